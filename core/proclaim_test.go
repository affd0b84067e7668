package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProclaimReturnsAtAQuorum: with one of three servers hung, Proclaim returns once the
// other two recorded the value, not a node timeout later, and Leader reads it.
func TestProclaimReturnsAtAQuorum(t *testing.T) {
	bubble(t, func(t *testing.T) {
		servers := simServers(t, 3)
		c := newCluster(t, servers)
		ctx := context.Background()
		l := lock("elected")
		h, err := c.Acquire(ctx, l)
		require.NoError(t, err)
		servers[2].sim.Hang()
		defer servers[2].sim.Resume()
		start := time.Now()
		require.NoError(t, c.Proclaim(ctx, h, "me"))
		assert.Less(t, time.Since(start), l.NodeTimeout, "Proclaim waited for the hung server")
		token, value, ok, err := c.Leader(ctx, l.Keys, l.NodeTimeout)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, h.Token(), token)
		assert.Equal(t, "me", value)
	})
}

// TestProclaimEverywhereHearsEveryNode: ProclaimEverywhere waits for a hung server, up to
// the node timeout, and counts it as missed; with every server up it misses none.
func TestProclaimEverywhereHearsEveryNode(t *testing.T) {
	bubble(t, func(t *testing.T) {
		servers := simServers(t, 3)
		c := newCluster(t, servers)
		ctx := context.Background()
		l := lock("elected")
		h, err := c.Acquire(ctx, l)
		require.NoError(t, err)
		missed, err := c.ProclaimEverywhere(ctx, h, "me")
		require.NoError(t, err)
		assert.Zero(t, missed)
		servers[2].sim.Hang()
		defer servers[2].sim.Resume()
		start := time.Now()
		missed, err = c.ProclaimEverywhere(ctx, h, "me")
		require.NoError(t, err)
		assert.Equal(t, 1, missed, "the hung server")
		assert.GreaterOrEqual(t, time.Since(start), l.NodeTimeout, "ProclaimEverywhere did not wait for the hung server")
		assert.Less(t, time.Since(start), 2*l.NodeTimeout, "ProclaimEverywhere waited past the node timeout")
	})
}
