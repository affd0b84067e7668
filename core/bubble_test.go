package core_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/simnet"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// The timed tests run on simulated servers (internal/simnet) in a synctest bubble, where
// the clock moves only when every goroutine waits: their timing is exact. Their
// redis-server variants time nothing tightly: they wait for observable state, generously.

// generous bounds a real-server test's wait for something that takes milliseconds.
const generous = 10 * time.Second

// simServers starts n simulated servers; call it inside a synctest bubble. They refuse a
// script's call that names a key the script did not declare in KEYS, as Redis's scripting
// contract asks (and some servers and proxies enforce).
func simServers(t *testing.T, n int) []server {
	s := make([]server, n)
	for i, srv := range simnet.NewServers(t, n) {
		srv.SetStrictKeys(true)
		s[i] = simServer(t, srv)
	}
	return s
}

// simServer returns the server of srv. Its do speaks RESP3, as the other servers' do.
func simServer(t *testing.T, srv *simnet.Server) server {
	c := simnet.Client(t, srv, func(o *redis.Options) { o.Protocol = 3 })
	return server{addr: srv.Addr(), sim: srv, do: func(args ...string) (any, error) {
		a := make([]any, len(args))
		for i, v := range args {
			a[i] = v
		}
		return c.Do(context.Background(), a...).Result()
	}}
}

// clientFor returns a go-redis client for s, closed when the test ends.
func clientFor(t *testing.T, s server) *redis.Client {
	if s.sim != nil {
		return simnet.Client(t, s.sim)
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// nodeFor returns a go-redis Node over a client of its own for s; both are closed when the
// test ends.
func nodeFor(t *testing.T, s server) *goredis.Node {
	n := goredis.New(clientFor(t, s))
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// simulated reports whether servers are simulated: a test on them runs in a bubble.
func simulated(servers []server) bool { return len(servers) > 0 && servers[0].sim != nil }

// settle requires cond to hold once the servers and their clients have done what they can
// without the clock moving: in a bubble at once after synctest.Wait, on real servers within
// a generous time.
func settle(t *testing.T, servers []server, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	if simulated(servers) {
		synctest.Wait()
		require.True(t, cond(), msgAndArgs...)
		return
	}
	require.Eventually(t, cond, generous, time.Millisecond, msgAndArgs...)
}

// await returns what ch delivers: in a bubble whenever it comes (the test asserts the
// virtual time it took), on real servers within a generous time.
func await[T any](t *testing.T, servers []server, ch <-chan T, what string) T {
	t.Helper()
	if simulated(servers) {
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

// advance moves the bubble's clock by d, and lets every goroutine do what it can at the
// new time.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// sim is a setup of n simulated servers.
type simSetup struct {
	name string
	n    int
	real bool // redis-server processes, outside a bubble
}

// simSetups are the servers the timed queue tests run on: one or three simulated servers in
// a bubble, three redis-server processes.
var simSetups = []simSetup{{"sim/N=1", 1, false}, {"sim/N=3", 3, false}, {"redis-server/N=3", 3, true}}

// run runs f as a subtest over the setup's servers, in a bubble if they are simulated.
func (c simSetup) run(t *testing.T, f func(t *testing.T, servers []server)) {
	t.Run(c.name, func(t *testing.T) {
		if c.real {
			f(t, realServers(t, c.n))
			return
		}
		bubble(t, func(t *testing.T) { f(t, simServers(t, c.n)) })
	})
}

// onEachSetup runs f on each of simSetups.
func onEachSetup(t *testing.T, f func(t *testing.T, servers []server)) {
	for _, c := range simSetups {
		c.run(t, f)
	}
}

// onOneOfEachTimed runs f as a subtest on one simulated server in a bubble, and as another
// on one redis-server.
func onOneOfEachTimed(t *testing.T, f func(t *testing.T, s server)) {
	simSetup{"sim", 1, false}.run(t, func(t *testing.T, s []server) { f(t, s[0]) })
	simSetup{"redis-server", 1, true}.run(t, func(t *testing.T, s []server) { f(t, s[0]) })
}

// inBubble runs f in a bubble over n simulated servers.
func inBubble(t *testing.T, n int, f func(t *testing.T, servers []server)) {
	bubble(t, func(t *testing.T) { f(t, simServers(t, n)) })
}

// bubble runs f in a synctest bubble. Once f and the cleanups it registered are done (the
// servers down), the clock runs on for a minute, for the calls a test's slow Nodes still
// hold back to end: a bubble ends only once each of its goroutines has.
func bubble(t *testing.T, f func(t *testing.T)) {
	synctest.Test(t, func(t *testing.T) {
		t.Cleanup(func() { time.Sleep(time.Minute) })
		f(t)
	})
}

// until waits for cond and returns how long it took: in a bubble it checks cond each time
// every goroutine waits and moves the clock a millisecond at a time, up to limit (so the
// test can assert the virtual time exactly); on real servers it polls for a generous time
// (and the time it returns means nothing).
func until(t *testing.T, servers []server, limit time.Duration, cond func() bool, msgAndArgs ...any) time.Duration {
	t.Helper()
	start := time.Now()
	if !simulated(servers) {
		require.Eventually(t, cond, generous, time.Millisecond, msgAndArgs...)
		return time.Since(start)
	}
	for {
		synctest.Wait()
		if cond() {
			return time.Since(start)
		}
		if time.Since(start) >= limit {
			require.Fail(t, "not within "+limit.String(), msgAndArgs...)
		}
		time.Sleep(time.Millisecond)
	}
}

// generousNodeTimeout is the node timeout of the locks of the redis-server variants: one no
// loaded machine runs past, where the test is not about node timeouts.
const generousNodeTimeout = 2 * time.Second

// lockOn is lock(name) for a test on servers: with a generous node timeout on real servers.
func lockOn(servers []server, name string) *core.Lock {
	l := lock(name)
	if !simulated(servers) {
		l.NodeTimeout = generousNodeTimeout
	}
	return l
}

// readLockOn is readLock(name) for a test on servers: with a generous node timeout on real
// servers.
func readLockOn(servers []server, name string) *core.Lock {
	l := lockOn(servers, name)
	l.Read = true
	return l
}
