package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestNoGoroutineLeaks: Lock/Unlock cycles, contended locks that wake on release, TryLock
// failures, cancelled LockContext calls, leases that expire, extend or hit their maximum
// hold time leave no goroutine behind once the nodes are closed.
func TestNoGoroutineLeaks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	var nodes []redlock.Node
	var closers []func()
	for range 3 {
		srv := miniredis.NewMiniRedis()
		require.NoError(t, srv.Start())
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		n := goredis.New(rdb)
		nodes = append(nodes, n)
		closers = append(closers, func() { _ = n.Close(); _ = rdb.Close(); srv.Close() })
	}
	c, err := redlock.New(nodes, redlock.WithTTL(300*time.Millisecond), redlock.WithRestartGuard(0))
	require.NoError(t, err)
	ctx := context.Background()

	m := c.NewMutex("leak")
	for range 20 {
		m.Lock()
		//lint:ignore SA2001 only the lock's own goroutines matter here
		m.Unlock()
	}
	// Contended: a second Client waits, subscribed, and wakes on release.
	other, err := redlock.New(nodes, redlock.WithRestartGuard(0))
	require.NoError(t, err)
	m.Lock()
	woke := make(chan struct{})
	go func() {
		om := other.NewMutex("leak")
		om.Lock()
		//lint:ignore SA2001 only the lock's own goroutines matter here
		om.Unlock()
		close(woke)
	}()
	time.Sleep(20 * time.Millisecond)
	require.False(t, other.NewMutex("leak").TryLock(), "TryLock must fail while held")
	cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	require.Error(t, other.NewMutex("leak").LockContext(cctx))
	cancel()
	m.Unlock()
	<-woke

	l, err := c.TryAcquire(ctx, "expires") // expires by itself
	require.NoError(t, err)
	<-l.Done()
	l, err = c.TryAcquire(ctx, "bounded", redlock.WithAutoExtend(true), redlock.WithMaxHold(200*time.Millisecond))
	require.NoError(t, err)
	<-l.Done()
	require.NoError(t, c.Do(ctx, "do", func(context.Context) error { return nil }))

	for _, close := range closers {
		close()
	}
}
