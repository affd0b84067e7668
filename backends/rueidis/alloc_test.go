package rueidis_test

import (
	"context"
	"fmt"
	"testing"

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
