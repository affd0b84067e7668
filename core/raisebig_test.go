package core_test

import (
	"context"
	"math"
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRaiseBeyondExactCounters: the scripts count in Lua's numbers, doubles, exact to 2^53.
// Raise either puts a fence on the nodes that every later token exceeds, or refuses it
// (ErrInvalid); it never reports a raise that the nodes did not make.
func TestRaiseBeyondExactCounters(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		cl := newCluster(t, []server{s})
		ctx := context.Background()
		for _, fence := range []uint64{1<<53 + 1, math.MaxInt64, 1 << 63, math.MaxUint64} {
			l := lock("big")
			l.Fence = true
			h, err := cl.Acquire(ctx, l)
			require.NoError(t, err)
			err = cl.Raise(ctx, h, fence)
			require.NoError(t, cl.Release(ctx, h))
			if err != nil {
				assert.ErrorIs(t, err, core.ErrInvalid, "fence %d", fence)
				continue
			}
			last := fence
			for range 3 {
				h, err := cl.Acquire(ctx, l)
				require.NoError(t, err)
				require.NoError(t, cl.Release(ctx, h))
				require.Greater(t, h.Fence, last, "after a raise to %d", fence)
				last = h.Fence
			}
		}
	})
}
