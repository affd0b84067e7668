package rueidis_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/go-redlock/redlock/backends/internal/backendtest"
	rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLazyStartsWithAServerDown: with one of three masters down at start, rueidis.NewClient
// fails for it, so New cannot make its Node; NewLazy can, and locks are taken on the other
// two (a quorum). The down node's calls fail with the dial's error, and once its server is
// back a later call makes the client and succeeds. After Close, calls (Subscribe
// included) fail with core.ErrClosed.
func TestLazyStartsWithAServerDown(t *testing.T) {
	t.Parallel()
	if !redistest.Available() {
		t.Skip("redis-server not on PATH")
	}
	servers := redistest.StartN(t, 3)
	down := servers[2]
	down.Kill()
	_, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{down.Addr()}, DisableCache: true})
	require.Error(t, err, "rueidis.NewClient of a server that is down")

	nodes := make([]core.Node, len(servers))
	lazies := make([]*rlrueidis.Lazy, len(servers))
	for i, s := range servers {
		lazies[i] = rlrueidis.NewLazy(rueidis.ClientOption{InitAddress: []string{s.Addr()}, DisableCache: true})
		nodes[i] = lazies[i]
		t.Cleanup(func() { _ = lazies[i].Close() })
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
	_, err = lazies[2].SetNX(ctx, "k", "v", time.Second)
	assert.ErrorIs(t, err, core.ErrClosed)
	_, err = lazies[2].Subscribe(ctx, "ch", func(string) {})
	assert.ErrorIs(t, err, core.ErrClosed)
}

// TestLazyTriesOnceASecond: calls to a Lazy whose server is down make at most one attempt
// to connect per second; the calls in between fail at once with the last attempt's error.
func TestLazyTriesOnceASecond(t *testing.T) {
	t.Parallel()
	if !redistest.Available() {
		t.Skip("redis-server not on PATH")
	}
	srv := redistest.Start(t)
	srv.Kill()
	lazy := rlrueidis.NewLazy(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	t.Cleanup(func() { _ = lazy.Close() })
	script := core.NewScript("one", "return {1}")
	ctx := context.Background()
	_, first := lazy.Eval(ctx, script, []string{"k"})
	require.Error(t, first)
	_, second := lazy.Eval(ctx, script, []string{"k"})
	assert.Same(t, first, second, "a call within a second of a failed attempt must return that attempt's error, not dial again")

	srv.Restart()
	assert.Eventually(t, func() bool {
		_, err := lazy.Eval(ctx, script, []string{"k"})
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
}

// TestLazyRefusesACluster: a Lazy whose client rueidis finds to be a cluster client fails
// every call with an error that matches core.ErrInvalid, and does not try again.
func TestLazyRefusesACluster(t *testing.T) {
	t.Parallel()
	if !redistest.Available() {
		t.Skip("redis-server not on PATH")
	}
	c := redistest.StartCluster(t, 1)
	lazy := rlrueidis.NewLazy(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	t.Cleanup(func() { _ = lazy.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := lazy.Eval(ctx, core.NewScript("one", "return {1}"), []string{"k"})
	assert.ErrorIs(t, err, core.ErrInvalid)
	assert.True(t, core.Permanent(err), "%v", err)
	_, again := lazy.Eval(ctx, core.NewScript("one", "return {1}"), []string{"k"})
	assert.True(t, errors.Is(again, core.ErrInvalid))
}

// TestStartsWithAServerDown: the node of a master that is down at start is a Lazy (see
// backendtest.StartsWithAServerDown).
func TestStartsWithAServerDown(t *testing.T) {
	t.Parallel()
	backendtest.StartsWithAServerDown(t, func(t *testing.T, addr string) core.Node {
		node := rlrueidis.NewLazy(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		t.Cleanup(func() { _ = node.Close() })
		return node
	})
}

// TestLazyWithoutAddress: a Lazy whose option has no InitAddress still has a name
// (core.Node's String), distinct from another such Lazy's, and fails every call with an
// error that matches core.ErrInvalid, which core does not retry.
func TestLazyWithoutAddress(t *testing.T) {
	a, b := rlrueidis.NewLazy(rueidis.ClientOption{}), rlrueidis.NewLazy(rueidis.ClientOption{})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
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
