package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestErrorsNameTheLockAsGiven: every error names the lock as the user gave it, never by its
// Redis key: a cancelled wait, a closed Client, no quorum, a failed release, a Semaphore's
// and an Election's errors.
func TestErrorsNameTheLockAsGiven(t *testing.T) {
	const name = "newcomer:c"
	check := func(t *testing.T, err error) {
		t.Helper()
		require.Error(t, err)
		assert.Contains(t, err.Error(), `"`+name+`"`, "the error does not name the lock as given")
		assert.NotContains(t, err.Error(), "redlock:{", "the error names the lock's Redis key")
	}
	nodes, servers := miniNodes(t, 3)
	opts := []redlock.Option{redlock.WithNodeTimeout(5 * time.Second)} // nothing here waits for one

	t.Run("cancelled", func(t *testing.T) {
		// On nodes of its own: what a waiter that gives up leaves behind is
		// TestAWaiterThatGivesUpLeavesNothing's subject, not this test's.
		nodes, servers := miniNodes(t, 3)
		a, b := newClient(t, nodes, opts...), newClient(t, nodesOf(t, servers), opts...)
		l, err := a.Acquire(ctxT(t, 10*time.Second), name)
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Release(ctxT(t, 10*time.Second))) }()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err = b.Acquire(ctx, name)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		check(t, err)
	})
	t.Run("released twice", func(t *testing.T) {
		c := newClient(t, nodes, opts...)
		l, err := c.Acquire(ctxT(t, 10*time.Second), name)
		require.NoError(t, err)
		for _, s := range servers {
			s.Set("redlock:{"+name+"}", "another owner's token")
		}
		err = l.Release(ctxT(t, 10*time.Second))
		require.ErrorIs(t, err, redlock.ErrNotHeld)
		check(t, err)
		for _, s := range servers {
			s.Del("redlock:{" + name + "}")
		}
	})
	t.Run("no quorum", func(t *testing.T) {
		down := []redlock.Node{hungNode(t), hungNode(t), nodes[2]}
		c := newClient(t, down, redlock.WithNodeTimeout(50*time.Millisecond))
		_, err := c.TryAcquire(ctxT(t, 10*time.Second), name)
		require.ErrorIs(t, err, redlock.ErrNoQuorum)
		check(t, err)
		_, err = c.NewSemaphore(name, 2).TryAcquire(ctxT(t, 10*time.Second))
		require.ErrorIs(t, err, redlock.ErrNoQuorum)
		check(t, err)
		_, err = c.NewElection(name).Leader(ctxT(t, 10*time.Second))
		require.ErrorIs(t, err, redlock.ErrNoQuorum)
		check(t, err)
	})
	t.Run("closed", func(t *testing.T) {
		c := newClient(t, nodesOf(t, servers), opts...)
		require.NoError(t, c.Close())
		_, err := c.Acquire(ctxT(t, 10*time.Second), name)
		require.ErrorIs(t, err, redlock.ErrClosed)
		check(t, err)
	})
}

// nodesOf returns a Node, with its own go-redis client, for each miniredis server.
func nodesOf(t *testing.T, servers []*miniredis.Miniredis) []redlock.Node {
	nodes := make([]redlock.Node, len(servers))
	for i, s := range servers {
		nodes[i] = goredisNode(t, s.Addr())
	}
	return nodes
}
