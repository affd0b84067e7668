package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClusterMastersAsPlainNodes: the masters of a real Redis Cluster given as plain nodes
// answer MOVED for the slots they do not serve. No retry fixes that: Acquire fails at once,
// saying to use a cluster client.
func TestClusterMastersAsPlainNodes(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	var nodes []redlock.Node
	for _, addr := range cluster.Addrs() {
		nodes = append(nodes, goredisNode(t, addr))
	}
	c := newClient(t, nodes, patient)
	t.Cleanup(func() { _ = c.Close() })
	_, err := c.Acquire(ctxT(t, 30*time.Second), "job") // retried, it would wait for its deadline
	require.Error(t, err)
	assert.False(t, errors.Is(err, context.DeadlineExceeded), "retried until the deadline: %v", err)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	assert.Contains(t, err.Error(), "MOVED")
	assert.Contains(t, err.Error(), "cluster client")
}

// TestPasswordMissing: a server with requirepass, reached without a password, refuses every
// command before the user logs in. No retry fixes that: Acquire fails at once with an
// error that says the server asks for authentication.
func TestPasswordMissing(t *testing.T) {
	servers := redistest.StartN(t, 3)
	var nodes []redlock.Node
	for _, s := range servers {
		_, err := s.Do("CONFIG", "SET", "requirepass", "secret") // the test kit's own PING needs none
		require.NoError(t, err)
		nodes = append(nodes, goredisNode(t, s.Addr()))
	}
	c := newClient(t, nodes, patient)
	t.Cleanup(func() { _ = c.Close() })
	mu := c.NewMutex("mutex") // without the guard its first attempt is a plain SET NX: NOAUTH
	for _, acquire := range []func() error{
		func() error { _, err := c.Acquire(ctxT(t, 30*time.Second), "job"); return err }, // a script: a longer command
		func() error { return mu.LockContext(ctxT(t, 30*time.Second)) },
	} {
		err := acquire()
		require.Error(t, err)
		assert.False(t, errors.Is(err, context.DeadlineExceeded), "retried until the deadline: %v", err)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		assert.Contains(t, err.Error(), "authentication")
		assert.Contains(t, err.Error(), "password")
	}
}
