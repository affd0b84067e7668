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
