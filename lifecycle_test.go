package redlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/internal/simnet"
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
	// Each case in a bubble of its own, over three simulated servers, with a 300 ms TTL.
	run := func(name string, f func(t *testing.T, c *redlock.Client, servers []*simnet.Server, ctx context.Context)) {
		t.Run(name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				nodes, servers := simNodes(t, 3)
				f(t, closingClient(t, nodes, redlock.WithTTL(300*time.Millisecond)), servers, ctxT(t, 10*time.Second))
			})
		})
	}
	run("released", func(t *testing.T, c *redlock.Client, _ []*simnet.Server, ctx context.Context) {
		l, err := c.TryAcquire(ctx, "released")
		require.NoError(t, err)
		require.NoError(t, l.Err())
		assert.False(t, closesWithin(l.Done(), 0))
		require.NoError(t, l.Release(ctx))
		assert.True(t, closesWithin(l.Done(), 0))
		assert.ErrorIs(t, l.Err(), redlock.ErrReleased)
	})
	run("expired", func(t *testing.T, c *redlock.Client, _ []*simnet.Server, ctx context.Context) {
		l, err := c.TryAcquire(ctx, "expired")
		require.NoError(t, err)
		<-l.Done()
		assert.Equal(t, l.Until(), time.Now(), "Done did not close at Until")
		assert.ErrorIs(t, l.Err(), redlock.ErrExpired)
		err = l.Extend(ctx)
		assert.ErrorIs(t, err, redlock.ErrNotHeld)
		assert.ErrorIs(t, err, redlock.ErrExpired)
		err = l.Release(ctx)
		assert.ErrorIs(t, err, redlock.ErrNotHeld)
		assert.ErrorIs(t, err, redlock.ErrExpired, "Release must say the lease had expired")
		assert.ErrorIs(t, l.Err(), redlock.ErrExpired, "Release after the end keeps the first reason")
	})
	run("lost", func(t *testing.T, c *redlock.Client, servers []*simnet.Server, ctx context.Context) {
		l, err := c.TryAcquire(ctx, "lost", redlock.WithTTL(10*time.Second))
		require.NoError(t, err)
		synctest.Wait() // the acquisition's stragglers land
		for _, s := range servers {
			s.Miniredis().Del(lockKey("lost"))
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

// TestAutoExtensionKeepsTheLease: a lease that extends itself is still held after several
// TTLs, its keys on every server; another client is refused all along.
func TestAutoExtensionKeepsTheLease(t *testing.T) {
	for _, k := range timedKinds {
		k.run(t, k.name, func(t *testing.T) {
			nodes, stores := k.nodes(t, 3)
			// Exact on simulated servers: 500 ms for 5 TTLs; on redis-server a TTL that
			// leaves a loaded machine seconds for each extension, for 1.5 TTLs.
			ttl, hold := 500*time.Millisecond, 2500*time.Millisecond
			if !k.sim {
				ttl, hold = 3*time.Second, 4500*time.Millisecond
			}
			c := closingClient(t, nodes, redlock.WithTTL(ttl), redlock.WithAutoExtend(true), redlock.WithNodeTimeout(ttl/5))
			other := closingClient(t, nodes, redlock.WithTTL(ttl), redlock.WithNodeTimeout(ttl/5))
			ctx := ctxT(t, 20*time.Second)

			l, err := c.TryAcquire(ctx, "kept")
			require.NoError(t, err)
			end := time.Now().Add(hold)
			for time.Now().Before(end) {
				_, err := other.TryAcquire(ctx, "kept")
				require.ErrorIs(t, err, redlock.ErrHeld)
				time.Sleep(ttl / 5)
			}
			require.NoError(t, l.Err(), "the lease ended")
			assert.True(t, l.Until().After(time.Now()))
			if k.sim {
				synctest.Wait()
				assert.True(t, allExist(stores, lockKey("kept")), "the lock is not on every server")
			} else {
				holding := 0
				for _, s := range stores {
					if s.exists(lockKey("kept")) {
						holding++
					}
				}
				assert.GreaterOrEqual(t, holding, 2, "the lock is no longer on a quorum of servers")
			}
			require.NoError(t, l.Release(ctx))
			assert.ErrorIs(t, l.Err(), redlock.ErrReleased)
		})
	}
}

// TestAutoExtensionReportsLoss: when the keys vanish behind the lease's back, Done closes
// at the next extension with ErrLost.
func TestAutoExtensionReportsLoss(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 3)
		const ttl = 300 * time.Millisecond
		c := closingClient(t, nodes, redlock.WithTTL(ttl), redlock.WithAutoExtend(true))
		l, err := c.TryAcquire(ctxT(t, 5*time.Second), "lost")
		require.NoError(t, err)
		simOnAll(t, servers, "lost") // the acquisition's stragglers have landed
		deleted := time.Now()
		for _, s := range servers {
			s.Miniredis().Del(lockKey("lost"))
		}
		<-l.Done()
		// The first extension, two thirds into the 295 ms validity, finds the keys gone.
		assert.Equal(t, 196666667*time.Nanosecond, time.Since(deleted), "the loss was not noticed at the next extension")
		assert.ErrorIs(t, l.Err(), redlock.ErrLost)
		synctest.Wait()
		for _, s := range servers {
			assert.False(t, s.Miniredis().Exists(lockKey("lost")), "an extension re-created the key")
		}
	})
}

// TestMaxHold: an auto-extending lease ends at its maximum hold time with ErrMaxHold and
// releases its lock.
func TestMaxHold(t *testing.T) {
	for _, k := range timedKinds {
		k.run(t, k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 3)
			// Three TTLs: the lease extends itself at least twice before its maximum hold time.
			// (On redis-server 1.5, with a node timeout and a TTL a loaded machine keeps to.)
			ttl, nodeTimeout := 600*time.Millisecond, 250*time.Millisecond
			if !k.sim {
				ttl, nodeTimeout = 1200*time.Millisecond, 400*time.Millisecond
			}
			c := closingClient(t, nodes, redlock.WithTTL(ttl), redlock.WithNodeTimeout(nodeTimeout),
				redlock.WithAutoExtend(true), redlock.WithMaxHold(1800*time.Millisecond))
			ctx := ctxT(t, 10*time.Second)
			start := time.Now()
			l, err := c.TryAcquire(ctx, "bounded")
			require.NoError(t, err)
			within(t, k.sim, l.Done(), "the lease's end at its maximum hold time")
			if k.sim {
				assert.Equal(t, 1800*time.Millisecond, time.Since(start), "the lease did not end at its maximum hold time")
			} else {
				assert.GreaterOrEqual(t, time.Since(start), 1800*time.Millisecond, "ended too early")
			}
			assert.ErrorIs(t, l.Err(), redlock.ErrMaxHold)
			// Done closes first, so the holder stops before anyone else can take the lock; the
			// release follows at once.
			ended := time.Now()
			l2, err := c.Acquire(ctxT(t, generous), "bounded")
			require.NoError(t, err, "the lock was not released at the maximum hold time")
			if k.sim {
				assert.Equal(t, time.Duration(0), time.Since(ended), "the lock was not released at the maximum hold time")
			}
			require.NoError(t, l2.Release(ctx))
			require.ErrorIs(t, l.Release(ctx), redlock.ErrNotHeld)
		})
	}
}

// TestDo: fn runs under the lock; its context is cancelled the moment the lease is lost,
// and Do says so; fn's own error comes back; the lock is released afterwards.
func TestDo(t *testing.T) {
	// Each case in a bubble of its own, over three simulated servers, with a 300 ms TTL.
	run := func(name string, f func(t *testing.T, c *redlock.Client, servers []*simnet.Server, ctx context.Context)) {
		t.Run(name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				nodes, servers := simNodes(t, 3)
				f(t, closingClient(t, nodes, redlock.WithTTL(300*time.Millisecond)), servers, ctxT(t, 10*time.Second))
			})
		})
	}
	run("runs under the lock", func(t *testing.T, c *redlock.Client, _ []*simnet.Server, ctx context.Context) {
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
	run("returns fn's error", func(t *testing.T, c *redlock.Client, _ []*simnet.Server, ctx context.Context) {
		boom := errors.New("boom")
		require.ErrorIs(t, c.Do(ctx, "job", func(context.Context) error { return boom }), boom)
	})
	run("cancels fn on loss", func(t *testing.T, c *redlock.Client, servers []*simnet.Server, ctx context.Context) {
		var cause error
		var took time.Duration
		err := c.Do(ctx, "job", func(fctx context.Context) error {
			synctest.Wait() // the acquisition's stragglers land
			deleted := time.Now()
			for _, s := range servers {
				s.Miniredis().Del(lockKey("job"))
			}
			<-fctx.Done()
			took = time.Since(deleted)
			cause = context.Cause(fctx)
			return fctx.Err()
		})
		require.ErrorIs(t, err, redlock.ErrNotHeld)
		require.ErrorIs(t, err, redlock.ErrLost)
		assert.Contains(t, err.Error(), "lease lost")
		require.ErrorIs(t, cause, redlock.ErrLost)
		// The first extension, two thirds into the 295 ms validity, finds the keys gone, and
		// fn's context ends at once.
		assert.Equal(t, 196666667*time.Nanosecond, took, "fn's context did not end at the loss")
	})
	run("bad input", func(t *testing.T, c *redlock.Client, _ []*simnet.Server, ctx context.Context) {
		require.ErrorIs(t, c.Do(ctx, "job", nil), redlock.ErrInvalid)
		require.ErrorIs(t, c.Do(ctx, "", func(context.Context) error { return nil }), redlock.ErrInvalid)
		require.ErrorIs(t, c.Do(ctx, "job", func(context.Context) error { return nil }, redlock.WithMaxHold(-1)), redlock.ErrInvalid)
	})
}
