package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// closesWithin reports whether ch closes within d.
func closesWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	default:
	}
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// TestLeaseEnds: Done closes and Err says why, for each way a lease ends.
func TestLeaseEnds(t *testing.T) {
	nodes, servers := miniNodes(t, 3)
	c := newClient(t, nodes, redlock.WithTTL(300*time.Millisecond))
	ctx := ctxT(t, 10*time.Second)

	t.Run("released", func(t *testing.T) {
		l, err := c.TryAcquire(ctx, "released")
		require.NoError(t, err)
		require.NoError(t, l.Err())
		assert.False(t, closesWithin(l.Done(), 0))
		require.NoError(t, l.Release(ctx))
		assert.True(t, closesWithin(l.Done(), 0))
		assert.ErrorIs(t, l.Err(), redlock.ErrReleased)
	})
	t.Run("expired", func(t *testing.T) {
		l, err := c.TryAcquire(ctx, "expired")
		require.NoError(t, err)
		require.True(t, closesWithin(l.Done(), time.Second), "Done did not close at Until")
		assert.False(t, time.Now().Before(l.Until()), "Done closed before Until")
		assert.ErrorIs(t, l.Err(), redlock.ErrExpired)
		err = l.Extend(ctx)
		assert.ErrorIs(t, err, redlock.ErrNotHeld)
		assert.ErrorIs(t, err, redlock.ErrExpired)
		err = l.Release(ctx)
		assert.ErrorIs(t, err, redlock.ErrNotHeld)
		assert.ErrorIs(t, err, redlock.ErrExpired, "Release must say the lease had expired")
		assert.ErrorIs(t, l.Err(), redlock.ErrExpired, "Release after the end keeps the first reason")
	})
	t.Run("lost", func(t *testing.T) {
		l, err := c.TryAcquire(ctx, "lost", redlock.WithTTL(10*time.Second))
		require.NoError(t, err)
		for _, s := range servers {
			s.Del(lockKey("lost"))
		}
		err = l.Extend(ctx)
		assert.ErrorIs(t, err, redlock.ErrNotHeld)
		assert.ErrorIs(t, err, redlock.ErrLost)
		assert.True(t, closesWithin(l.Done(), 0))
		assert.ErrorIs(t, l.Err(), redlock.ErrLost)
	})
	t.Run("zero lease", func(t *testing.T) {
		var l redlock.Lease
		assert.True(t, closesWithin(l.Done(), 0))
		assert.ErrorIs(t, l.Err(), redlock.ErrNotHeld)
	})
}

// TestAutoExtensionKeepsTheLease: on real servers, where keys do expire, a 500ms lease that
// extends itself is still held after 5 TTLs; another client is refused all along.
func TestAutoExtensionKeepsTheLease(t *testing.T) {
	nodes, servers := realNodes(t, 3)
	const ttl = 500 * time.Millisecond
	c := newClient(t, nodes, redlock.WithTTL(ttl), redlock.WithAutoExtend(true))
	other := newClient(t, nodes, redlock.WithTTL(ttl))
	ctx := ctxT(t, 20*time.Second)

	l, err := c.TryAcquire(ctx, "kept")
	require.NoError(t, err)
	end := time.Now().Add(5 * ttl)
	for time.Now().Before(end) {
		_, err := other.TryAcquire(ctx, "kept")
		require.ErrorIs(t, err, redlock.ErrHeld)
		time.Sleep(ttl / 5)
	}
	require.NoError(t, l.Err(), "the lease ended")
	assert.True(t, l.Until().After(time.Now()))
	holding := 0
	for _, s := range servers {
		if (realStore{s}).exists(lockKey("kept")) {
			holding++
		}
	}
	assert.GreaterOrEqual(t, holding, 2, "the lock is no longer on a quorum of servers")
	require.NoError(t, l.Release(ctx))
	assert.ErrorIs(t, l.Err(), redlock.ErrReleased)
}

// TestAutoExtensionReportsLoss: when the keys vanish behind the lease's back, Done closes
// within one extension interval (a third of the validity, 100ms here) with ErrLost.
func TestAutoExtensionReportsLoss(t *testing.T) {
	nodes, servers := miniNodes(t, 3)
	const ttl = 300 * time.Millisecond
	c := newClient(t, nodes, redlock.WithTTL(ttl), redlock.WithAutoExtend(true))
	l, err := c.TryAcquire(ctxT(t, 5*time.Second), "lost")
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the acquisition's stragglers have landed
		return servers[0].Exists(lockKey("lost")) && servers[1].Exists(lockKey("lost")) && servers[2].Exists(lockKey("lost"))
	}, time.Second, time.Millisecond)
	deleted := time.Now()
	for _, s := range servers {
		s.Del(lockKey("lost"))
	}
	require.True(t, closesWithin(l.Done(), 2*ttl), "Done did not close after the keys were deleted")
	assert.Less(t, time.Since(deleted), ttl, "loss was noticed later than one extension interval (plus slack)")
	assert.ErrorIs(t, l.Err(), redlock.ErrLost)
	for _, s := range servers {
		assert.False(t, s.Exists(lockKey("lost")), "an extension re-created the key")
	}
}

// TestMaxHold: an auto-extending lease ends at its maximum hold time with ErrMaxHold and
// releases its lock.
func TestMaxHold(t *testing.T) {
	nodes, _ := realNodes(t, 3)
	// Three TTLs: the lease extends itself at least twice before its maximum hold time.
	c := newClient(t, nodes, redlock.WithTTL(600*time.Millisecond), redlock.WithNodeTimeout(250*time.Millisecond),
		redlock.WithAutoExtend(true), redlock.WithMaxHold(1800*time.Millisecond))
	ctx := ctxT(t, 10*time.Second)
	l, err := c.TryAcquire(ctx, "bounded")
	require.NoError(t, err)
	start := time.Now()
	require.True(t, closesWithin(l.Done(), 5*time.Second), "the lease outlived its maximum hold time")
	assert.GreaterOrEqual(t, time.Since(start), 1700*time.Millisecond, "ended too early")
	assert.ErrorIs(t, l.Err(), redlock.ErrMaxHold)
	// Done closes first, so the holder stops before anyone else can take the lock; the
	// release follows at once.
	l2, err := c.Acquire(ctxT(t, 150*time.Millisecond), "bounded")
	require.NoError(t, err, "the lock was not released at the maximum hold time")
	require.NoError(t, l2.Release(ctx))
	require.ErrorIs(t, l.Release(ctx), redlock.ErrNotHeld)
}

// TestDo: fn runs under the lock; its context is cancelled the moment the lease is lost,
// and Do says so; fn's own error comes back; the lock is released afterwards.
func TestDo(t *testing.T) {
	nodes, servers := miniNodes(t, 3)
	c := newClient(t, nodes, redlock.WithTTL(300*time.Millisecond))
	ctx := ctxT(t, 10*time.Second)

	t.Run("runs under the lock", func(t *testing.T) {
		err := c.Do(ctx, "job", func(ctx context.Context) error {
			_, err := c.TryAcquire(ctx, "job")
			assert.ErrorIs(t, err, redlock.ErrHeld)
			return nil
		})
		require.NoError(t, err)
		l, err := c.TryAcquire(ctx, "job")
		require.NoError(t, err, "Do did not release")
		require.NoError(t, l.Release(ctx))
	})
	t.Run("returns fn's error", func(t *testing.T) {
		boom := errors.New("boom")
		require.ErrorIs(t, c.Do(ctx, "job", func(context.Context) error { return boom }), boom)
	})
	t.Run("cancels fn on loss", func(t *testing.T) {
		var cause error
		err := c.Do(ctx, "job", func(fctx context.Context) error {
			for _, s := range servers {
				s.Del(lockKey("job"))
			}
			select {
			case <-fctx.Done():
				cause = context.Cause(fctx)
				return fctx.Err()
			case <-time.After(5 * time.Second):
				return errors.New("fn's context was not cancelled")
			}
		})
		require.ErrorIs(t, err, redlock.ErrNotHeld)
		require.ErrorIs(t, err, redlock.ErrLost)
		assert.Contains(t, err.Error(), "lease lost")
		require.ErrorIs(t, cause, redlock.ErrLost)
	})
	t.Run("bad input", func(t *testing.T) {
		require.ErrorIs(t, c.Do(ctx, "job", nil), redlock.ErrInvalid)
		require.ErrorIs(t, c.Do(ctx, "", func(context.Context) error { return nil }), redlock.ErrInvalid)
		require.ErrorIs(t, c.Do(ctx, "job", func(context.Context) error { return nil }, redlock.WithMaxHold(-1)), redlock.ErrInvalid)
	})
}
