package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldUp is a node whose first acquire call is held up on its way (a partition, a stopped
// server's socket): the caller hears its deadline pass, and the call lands later.
type heldUp struct {
	core.Node
	delay time.Duration
	once  atomic.Bool
}

func (n *heldUp) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if s.Name() != "acquire" || n.once.Swap(true) {
		return n.Node.Eval(ctx, s, keys, args...)
	}
	go func() {
		time.Sleep(n.delay)
		_, _ = n.Node.Eval(context.Background(), s, keys, args...)
	}()
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestHeldUpFirstAttemptAfterTheLeave: a waiter that gives up during its first attempt,
// whose call to a node is held up and lands after its leave there, does not take the free
// lock in its name (the package doc, invariant 7: a leave is final).
func TestHeldUpFirstAttemptAfterTheLeave(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := simServers(t, 1)[0]
		c, err := core.NewCluster([]core.Node{&heldUp{Node: nodeFor(t, s), delay: time.Second}})
		require.NoError(t, err)
		l := &core.Lock{Keys: core.NewKeys("t:", "heldup"), TTL: 10 * time.Second, NodeTimeout: 100 * time.Millisecond,
			DriftFactor: 0.01}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err = c.AcquireWait(ctx, l, core.Backoff{Min: time.Millisecond, Max: time.Millisecond})
		require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
		advance(2 * time.Second) // the leave, then the held-up call, have landed
		_, err = s.do("GET", l.Keys.Lock)
		assert.ErrorIs(t, err, redis.Nil, "the held-up first attempt took the lock for a waiter that left")
	})
}
