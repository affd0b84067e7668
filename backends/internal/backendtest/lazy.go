package backendtest

import (
	"context"
	"errors"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// LazyNode is a backend's node that makes its client on first use, and owns it.
type LazyNode interface {
	core.Node
	core.Subscriber
	io.Closer
}

// NewLazy makes the backend's Lazy over a client option with addrs as its addresses and,
// unless it is "", password as its password, without client-side caching. The test closes
// it.
type NewLazy func(addrs []string, password string) LazyNode

// Lazy runs the tests of a backend's LazyNode on real servers: it starts while its server
// is down and answers once it is back; it dials at most once a second; it refuses a cluster,
// and an option without addresses, with an error that core.Permanent knows; its server's
// refusal of its password is such an error too.
func Lazy(t *testing.T, newLazy NewLazy) {
	if !redistest.Available() {
		t.Skip("redis-server not on PATH")
	}
	lazy := func(t *testing.T, password string, addrs ...string) LazyNode {
		l := newLazy(addrs, password)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	t.Run("server-down", func(t *testing.T) { t.Parallel(); lazyServerDown(t, lazy) })
	t.Run("tries-once-a-second", func(t *testing.T) { t.Parallel(); lazyOnceASecond(t, lazy) })
	t.Run("refuses-a-cluster", func(t *testing.T) { t.Parallel(); lazyCluster(t, lazy) })
	t.Run("without-address", func(t *testing.T) { t.Parallel(); lazyWithoutAddress(t, lazy) })
	t.Run("wrong-password", func(t *testing.T) { t.Parallel(); lazyWrongPassword(t, lazy) })
	t.Run("down-at-start", func(t *testing.T) {
		t.Parallel()
		StartsWithAServerDown(t, func(t *testing.T, addr string) core.Node { return lazy(t, "", addr) })
	})
}

// lazyServerDown: with one of three masters down at start, the driver cannot make its
// client, but a Lazy is made, and locks are taken on the other two (a quorum). The down
// node's calls fail with the dial's error, and once its server is back a later call makes
// the client and succeeds. After Close, calls (Subscribe included) fail with
// core.ErrClosed.
func lazyServerDown(t *testing.T, lazy func(t *testing.T, password string, addrs ...string) LazyNode) {
	servers := redistest.StartN(t, 3)
	down := servers[2]
	down.Kill()
	nodes := make([]core.Node, len(servers))
	lazies := make([]LazyNode, len(servers))
	for i, s := range servers {
		lazies[i] = lazy(t, "", s.Addr())
		nodes[i] = lazies[i]
	}
	assert.Equal(t, down.Addr(), lazies[2].String())
	cl, err := core.NewCluster(nodes)
	require.NoError(t, err)
	l := &core.Lock{Keys: core.NewKeys("test:", "lazy"), TTL: 10 * time.Second, NodeTimeout: 2 * time.Second, DriftFactor: 0.01}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := cl.Acquire(ctx, l)
	require.NoError(t, err, "Acquire over 3 lazy nodes, one of them down")
	require.NoError(t, cl.Release(ctx, h))

	script := core.NewScript("one", "return {1}")
	_, err = lazies[2].Eval(ctx, script, []string{"k"})
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "the down node's error: %v", err)

	down.Restart()
	assert.Eventually(t, func() bool {
		got, err := lazies[2].Eval(ctx, script, []string{"k"})
		return err == nil && len(got) == 1 && got[0] == 1
	}, 10*time.Second, 50*time.Millisecond, "the node whose server came back never answered")

	require.NoError(t, lazies[2].Close())
	_, err = lazies[2].Eval(ctx, script, []string{"k"})
	assert.ErrorIs(t, err, core.ErrClosed)
	_, err = lazies[2].Subscribe(ctx, "ch", func(string) {})
	assert.ErrorIs(t, err, core.ErrClosed)
}

// lazyOnceASecond: calls to a Lazy whose server is down make at most one attempt to connect
// per second; the calls in between fail at once with the last attempt's error.
func lazyOnceASecond(t *testing.T, lazy func(t *testing.T, password string, addrs ...string) LazyNode) {
	srv := redistest.Start(t)
	srv.Kill()
	l := lazy(t, "", srv.Addr())
	script := core.NewScript("one", "return {1}")
	ctx := context.Background()
	_, first := l.Eval(ctx, script, []string{"k"})
	require.Error(t, first)
	_, second := l.Eval(ctx, script, []string{"k"})
	assert.Same(t, first, second, "a call within a second of a failed attempt must return that attempt's error, not dial again")

	srv.Restart()
	assert.Eventually(t, func() bool {
		_, err := l.Eval(ctx, script, []string{"k"})
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
}

// lazyCluster: a Lazy whose client the driver finds to be a cluster client fails every call
// with an error that matches core.ErrInvalid, and does not try again.
func lazyCluster(t *testing.T, lazy func(t *testing.T, password string, addrs ...string) LazyNode) {
	c := redistest.StartCluster(t, 1)
	l := lazy(t, "", c.Addrs()...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := l.Eval(ctx, core.NewScript("one", "return {1}"), []string{"k"})
	assert.ErrorIs(t, err, core.ErrInvalid)
	assert.True(t, core.Permanent(err), "%v", err)
	_, again := l.Eval(ctx, core.NewScript("one", "return {1}"), []string{"k"})
	assert.True(t, errors.Is(again, core.ErrInvalid))
}

// lazyWithoutAddress: a Lazy whose option has no address still has a name (core.Node's
// String), distinct from another such Lazy's, and fails every call with an error that
// matches core.ErrInvalid, which core does not retry.
func lazyWithoutAddress(t *testing.T, lazy func(t *testing.T, password string, addrs ...string) LazyNode) {
	a, b := lazy(t, ""), lazy(t, "")
	assert.NotEmpty(t, a.String())
	assert.NotEqual(t, a.String(), b.String())
	_, err := core.NewCluster([]core.Node{a, b})
	require.NoError(t, err)

	ctx := context.Background()
	for range 2 {
		_, err = a.Eval(ctx, core.NewScript("one", "return {1}"), []string{"k"})
		assert.ErrorIs(t, err, core.ErrInvalid)
		assert.True(t, core.Permanent(err), "%v", err)
		assert.ErrorContains(t, err, a.String())
	}
}

// lazyWrongPassword: a Lazy whose server refuses its password fails with an error that
// core.Permanent knows, as the Node of New over a client with that password does.
func lazyWrongPassword(t *testing.T, lazy func(t *testing.T, password string, addrs ...string) LazyNode) {
	s := redistest.Start(t)
	_, err := redistest.DoTimeout(s.Addr(), 5*time.Second, "CONFIG", "SET", "requirepass", "right")
	require.NoError(t, err)
	l := lazy(t, "wrong", s.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = l.Eval(ctx, core.NewScript("one", "return {1}"), []string{"k"})
	if err == nil || !core.Permanent(err) {
		t.Errorf("Eval of a Lazy whose server refuses its password returned %v, which core.Permanent does not know (WRONGPASS)", err)
	}
}
