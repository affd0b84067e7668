package redlock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReleaseOfAKeyGoneWithinTheValidity: a release that finds the lease's key gone on every
// node within the lease's validity (as a backend's resend of the release finds it) counts
// as done; one that finds another owner's key there reports ErrNotHeld.
func TestReleaseOfAKeyGoneWithinTheValidity(t *testing.T) {
	nodes, servers := miniNodes(t, 3)
	c := newClient(t, nodes, patient)
	ctx := ctxT(t, 10*time.Second)
	gone, err := c.TryAcquire(ctx, "gone")
	require.NoError(t, err)
	taken, err := c.TryAcquire(ctx, "taken")
	require.NoError(t, err)
	for _, s := range servers {
		s.Del(lockKey("gone"))
		s.Set(lockKey("taken"), "another owner's token")
	}
	require.NoError(t, gone.Release(ctx))
	require.ErrorIs(t, taken.Release(ctx), redlock.ErrNotHeld)
}

// failingReleases fails the release script while fails is above 0, counting it down.
type failingReleases struct {
	redlock.Node
	fails *atomic.Int32
}

func (n failingReleases) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if s.Name() == "release" && n.fails.Add(-1) >= 0 {
		return nil, errors.New("connection reset")
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestReleaseAgainAfterTooFewAnswered: a Release that too few nodes answered (a
// *QuorumError) can be called again, and tries the nodes again, so the lock is free at
// once rather than after its TTL; once a Release succeeded, another says ErrNotHeld and
// ErrReleased, without calling the nodes (or the Observer, whose second event says it
// is a retry); called again once the lease's keys expired, it says ErrNotHeld.
func TestReleaseAgainAfterTooFewAnswered(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, _ := simNodes(t, 3)
		var fails atomic.Int32
		wrapped := []redlock.Node{nodes[0], failingReleases{nodes[1], &fails}, failingReleases{nodes[2], &fails}}
		var events releases
		c, other := newClient(t, wrapped, redlock.WithObserver(&events)), newClient(t, nodes)
		ctx := t.Context()
		l, err := c.TryAcquire(ctx, "again")
		require.NoError(t, err)

		fails.Store(2) // both wrapped nodes, once
		require.ErrorIs(t, l.Release(ctx), redlock.ErrNoQuorum)
		_, err = other.TryAcquire(ctx, "again")
		require.ErrorIs(t, err, redlock.ErrHeld, "two nodes of three still hold the lock")

		require.NoError(t, l.Release(ctx))
		o, err := other.TryAcquire(ctx, "again")
		require.NoError(t, err, "the second Release let go of the lock")

		fails.Store(2) // a third Release does not call the nodes
		err = l.Release(ctx)
		require.ErrorIs(t, err, redlock.ErrNotHeld)
		require.ErrorIs(t, err, redlock.ErrReleased)
		assert.Equal(t, int32(2), fails.Load())
		assert.Equal(t, []bool{false, true}, events.retries(), "Released events: the release and the one tried again")
		require.NoError(t, o.Release(ctx))

		// Called again once its keys expired, Release says so.
		late, err := c.TryAcquire(ctx, "late")
		require.NoError(t, err)
		fails.Store(2)
		require.ErrorIs(t, late.Release(ctx), redlock.ErrNoQuorum)
		time.Sleep(time.Until(late.Until()) + time.Minute)
		require.ErrorIs(t, late.Release(ctx), redlock.ErrNotHeld)
	})
}

// releases is an Observer that records the Retry field of each ReleaseEvent.
type releases struct {
	redlock.NopObserver
	mu    sync.Mutex
	retry []bool
}

func (r *releases) Released(e redlock.ReleaseEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retry = append(r.retry, e.Retry)
}

func (r *releases) retries() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.retry)
}

// failingPartReleases fails the release script of the keys that hold key while fails is
// above 0, counting it down.
type failingPartReleases struct {
	redlock.Node
	key   string
	fails *atomic.Int32
}

func (n failingPartReleases) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if s.Name() == "release" && slices.Contains(keys, n.key) && n.fails.Add(-1) >= 0 {
		return nil, errors.New("connection reset")
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestReleaseAgainOfALockSlotBySlot: a Release called again after one that too few nodes
// answered for one slot's names (the other slot's were let go, and another owner took them
// since) lets go of the names that were left, and says nothing of the others'.
func TestReleaseAgainOfALockSlotBySlot(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sims, _ := simNodes(t, 3)
		var fails atomic.Int32
		nodes := make([]redlock.Node, len(sims))
		for i, n := range sims {
			if i > 0 {
				n = failingPartReleases{n, lockKey("b"), &fails}
			}
			nodes[i] = clusterNode{Node: n}
		}
		c, other := newClient(t, nodes), newClient(t, sims)
		ctx := t.Context()
		l, err := c.TryAcquireAll(ctx, []string{"a", "b"})
		require.NoError(t, err)

		fails.Store(2) // b's release on two nodes of three, once
		require.ErrorIs(t, l.Release(ctx), redlock.ErrNoQuorum)
		a, err := other.TryAcquire(ctx, "a")
		require.NoError(t, err, "a was let go")
		_, err = other.TryAcquire(ctx, "b")
		require.ErrorIs(t, err, redlock.ErrHeld, "two nodes of three still hold b")

		require.NoError(t, l.Release(ctx), "the Release called again lets go of b")
		b, err := other.TryAcquire(ctx, "b")
		require.NoError(t, err, "the second Release let go of b")
		require.NoError(t, a.Extend(ctx), "a is still its new owner's")
		require.NoError(t, a.Release(ctx))
		require.NoError(t, b.Release(ctx))
	})
}
