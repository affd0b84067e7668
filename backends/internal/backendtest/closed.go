package backendtest

import (
	"context"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ClosedClient: once the driver's client under a Node was closed, the Node's Eval
// and Subscribe fail at once with an error that matches core.ErrClosed and keeps the
// driver's (closing), so that a redlock Client over it gives up (Acquire and LockContext
// fail with redlock.ErrClosed, naming the node) instead of retrying until its context ends.
// newNode builds the Node over a new client of the server at addr, a real one or miniredis
// (mini), and returns the func that closes that client; the test closes the Node.
func ClosedClient(t *testing.T, closing error, newNode func(t *testing.T, addr string, mini bool) (core.Node, func())) {
	t.Run("redis-server", func(t *testing.T) {
		if !redistest.Available() {
			t.Skip("redis-server not on PATH")
		}
		s := redistest.Start(t)
		node, closeClient := newNode(t, s.Addr(), false)
		// The server has just started: under the restart guard it would abstain for 30 s.
		client, err := redlock.New([]redlock.Node{node}, redlock.WithRestartGuard(0))
		require.NoError(t, err)
		t.Cleanup(func() { _ = client.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		lease, err := client.Acquire(ctx, "closed")
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
		closeClient()

		closedNode(t, node, closing)
		start := time.Now()
		_, err = client.Acquire(ctx, "closed")
		assert.ErrorIs(t, err, redlock.ErrClosed)
		assert.ErrorContains(t, err, node.String())
		assert.ErrorIs(t, client.NewMutex("closed").LockContext(ctx), redlock.ErrClosed)
		assert.Less(t, time.Since(start), time.Second, "a closed client was retried")
	})
	t.Run("miniredis", func(t *testing.T) {
		s := Start(t, Miniredis)
		node, closeClient := newNode(t, s.Addr, true)
		closeClient()
		closedNode(t, node, closing)
	})
}

// closedNode checks the calls of a node whose client was closed.
func closedNode(t *testing.T, node core.Node, closing error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := node.Eval(ctx, Script(t, "extend"), []string{"lock"}, "token", "10000", "w")
	assert.ErrorIs(t, err, core.ErrClosed, "Eval on a closed client")
	assert.ErrorIs(t, err, closing, "Eval on a closed client keeps the driver's error")
	_, err = node.(core.Subscriber).Subscribe(ctx, "ch", func(string) {})
	assert.ErrorIs(t, err, core.ErrClosed, "Subscribe on a closed client")
}
