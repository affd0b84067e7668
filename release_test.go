package redlock_test

import (
	"testing"
	"time"

	"github.com/go-redlock/redlock"
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
