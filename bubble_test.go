package redlock_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/internal/simnet"
	"github.com/stretchr/testify/require"
)

// The timed tests run on simulated servers (internal/simnet) in a synctest bubble, where
// the clock moves only when every goroutine waits: their timing is exact. Their
// redis-server variants time nothing tightly: they wait for observable state, generously.
//
// The slowest tests, which mostly wait (for servers, pauses and TTLs, or in a bubble), call
// t.Parallel: they run together once the others are done, which takes minutes off the
// package's time; the exclusion tests among them then also check exclusion under each
// other's load. Tests that set slog's default logger or that time a real-server call
// tightly stay sequential.

// generous bounds a real-server test's wait for something that takes milliseconds.
const generous = 10 * time.Second

// bubble runs f in a synctest bubble. Once f and the cleanups it registered are done (the
// clients closed, the servers down), the clock runs on for a minute, for the calls still
// under way to end: a bubble ends only once each of its goroutines has.
func bubble(t *testing.T, f func(t *testing.T)) {
	synctest.Test(t, func(t *testing.T) {
		t.Cleanup(func() { time.Sleep(time.Minute) })
		f(t)
	})
}

// simNodes starts n simulated servers, inside a bubble, and returns a Node for each.
func simNodes(t testing.TB, n int) ([]redlock.Node, []*simnet.Server) {
	servers := simnet.NewServers(t, n)
	return simnet.Nodes(t, servers), servers
}

// simStore is the store of a simulated server.
type simStore struct{ s *simnet.Server }

func (s simStore) exists(key string) bool {
	m := s.s.Miniredis()
	return m != nil && m.Exists(key)
}

// timedKind is a way to run a timed test: on simulated servers in a bubble, or on
// redis-server processes.
type timedKind struct {
	name  string
	sim   bool
	nodes func(t testing.TB, n int) ([]redlock.Node, []store)
}

// timedKinds are the ways to run a timed test.
var timedKinds = []timedKind{
	{"sim", true, func(t testing.TB, n int) ([]redlock.Node, []store) {
		nodes, servers := simNodes(t, n)
		stores := make([]store, n)
		for i, s := range servers {
			stores[i] = simStore{s}
		}
		return nodes, stores
	}},
	{"redis-server", false, kinds[1].nodes},
}

// run runs f as a subtest called name, in a bubble if k is simulated.
func (k timedKind) run(t *testing.T, name string, f func(t *testing.T)) {
	t.Run(name, func(t *testing.T) {
		if k.sim {
			bubble(t, f)
			return
		}
		f(t)
	})
}

// realNodeTimeout is the node timeout of the redis-server variants where the test is not
// about node timeouts: one no loaded machine runs past.
const realNodeTimeout = 2 * time.Second

// nodeTimeoutFor returns d in a bubble, and realNodeTimeout on real servers.
func nodeTimeoutFor(sim bool, d time.Duration) redlock.Option {
	if sim {
		return redlock.WithNodeTimeout(d)
	}
	return redlock.WithNodeTimeout(realNodeTimeout)
}

// closingClient is newClient, closed when the test ends (a bubble ends only once the
// Client's goroutines have).
func closingClient(t testing.TB, nodes []redlock.Node, opts ...redlock.Option) *redlock.Client {
	c := newClient(t, nodes, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// within returns what ch delivers: in a bubble whenever it comes (the test asserts the
// virtual time it took), on real servers within a generous time.
func within[T any](t *testing.T, sim bool, ch <-chan T, what string) T {
	t.Helper()
	if sim {
		return <-ch
	}
	select {
	case v := <-ch:
		return v
	case <-time.After(generous):
		t.Fatalf("%s: nothing within %v", what, generous)
		var zero T
		return zero
	}
}

// settle requires cond to hold once everything has done what it can without the clock
// moving: in a bubble at once after synctest.Wait, on real servers within a generous time.
func settle(t *testing.T, sim bool, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	if sim {
		synctest.Wait()
		require.True(t, cond(), msgAndArgs...)
		return
	}
	require.Eventually(t, cond, generous, time.Millisecond, msgAndArgs...)
}

// until waits in a bubble for cond, checking it each time every goroutine waits and moving
// the clock a millisecond at a time, up to limit, and returns how long it took (so that the
// test can assert the virtual time exactly).
func until(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		synctest.Wait()
		if cond() {
			return time.Since(start)
		}
		if time.Since(start) >= limit {
			t.Fatalf("no %s within %v", what, limit)
		}
		time.Sleep(time.Millisecond)
	}
}

// simAwait is until for a condition on r's record: it returns the record and how long the
// condition took to hold.
func (r *recorder) simAwait(t *testing.T, limit time.Duration, what string, cond func(s record) bool) (record, time.Duration) {
	t.Helper()
	took := until(t, limit, what, func() bool { return cond(r.snapshot()) })
	return r.snapshot(), took
}
