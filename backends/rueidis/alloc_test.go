package rueidis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// mutexPair returns a Lock+Unlock of an uncontended Mutex over rueidis clients (the
// driver's defaults) to servers, under a cancellable context as a program's calls are.
func mutexPair(tb testing.TB, servers []*redistest.Server) func() {
	nodes := make([]redlock.Node, len(servers))
	for i, s := range servers {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr()}})
		require.NoError(tb, err)
		node := rlrueidis.New(rc)
		tb.Cleanup(func() { _ = node.Close(); rc.Close() })
		nodes[i] = node
	}
	client, err := redlock.New(nodes, redlock.WithRestartGuard(0))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = client.Close() }) // runs first: the Client, then the nodes
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	m := client.NewMutex("allocs")
	return func() {
		if err := m.LockContext(ctx); err != nil {
			tb.Fatal(err)
		}
		if err := m.UnlockContext(ctx); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkMutexUncontended: Lock+Unlock of a free Mutex over rueidis, at N = 1 and 5 real
// redis-servers, one goroutine.
func BenchmarkMutexUncontended(b *testing.B) {
	if !redistest.Available() {
		b.Skip("redis-server not installed")
	}
	servers := redistest.StartN(b, 5)
	for _, n := range []int{1, 5} {
		b.Run(fmt.Sprint("N=", n), func(b *testing.B) {
			pair := mutexPair(b, servers[:n])
			for range 20 { // connections and scripts warm
				pair()
			}
			b.ReportAllocs()
			for b.Loop() {
				pair()
			}
		})
	}
}

// TestAllocationsPerCall: on a real redis-server, SetNX allocates nothing, called under a
// deadline as core calls it. (Eval's count, two or three per call as rueidis reads the reply,
// is measured by BenchmarkMutexUncontended, not bounded here.)
func TestAllocationsPerCall(t *testing.T) {
	if !redistest.Available() {
		t.Skip("redis-server not installed")
	}
	s := redistest.Start(t)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr()}})
	require.NoError(t, err)
	node := rlrueidis.New(rc)
	t.Cleanup(func() { _ = node.Close(); rc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, c := range []struct {
		name string
		most float64
		call func()
	}{
		{"SetNX", 0, func() { _, _ = node.SetNX(ctx, "allocs", "token", 10*time.Second) }},
	} {
		for range 10 { // the connection and the script warm
			c.call()
		}
		// The count is the process's, and other goroutines can only add to it: the least of
		// five counts. (AllocsPerRun rounds down, so a sync.Pool dropping an item now and
		// then, as it does under the race detector, does not count.)
		allocs := testing.AllocsPerRun(100, c.call)
		for range 4 {
			allocs = min(allocs, testing.AllocsPerRun(100, c.call))
		}
		if allocs > c.most {
			t.Errorf("%s: %.0f allocations per call, want at most %.0f", c.name, allocs, c.most)
		}
	}
}
