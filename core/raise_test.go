package core

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFailedRaiseReleasesTheKeysItTook: a raise is an extension with the fence, which takes
// the lock where it is free, on a node that refused the acquisition too. When the raise
// fails, so does the acquisition, and its undoing lets go of what the raise took.
func TestFailedRaiseReleasesTheKeysItTook(t *testing.T) {
	bubble(t, func(t *testing.T) {
		raiseHangs := func(fence int64) func(context.Context, *Script) ([]int64, error) {
			return func(ctx context.Context, s *Script) ([]int64, error) {
				if s == extendScript {
					return hangs(ctx, s)
				}
				return []int64{1, fence}, nil
			}
		}
		// Refuses the acquisition (held by another, who lets go), then the raise takes it.
		freedThenTaken := func(_ context.Context, s *Script) ([]int64, error) {
			switch s {
			case acquireScript:
				return []int64{0, 500}, nil
			case extendScript:
				return []int64{2}, nil
			}
			return []int64{1, 0}, nil
		}
		c, fakes := cluster(t, raiseHangs(1), raiseHangs(2), freedThenTaken)
		_, err := c.Acquire(context.Background(), testLock())
		var qe *QuorumError
		require.ErrorAs(t, err, &qe)
		assert.Equal(t, "raise", qe.Op)
		synctest.Wait()
		assert.Equal(t, []string{"acquire", "extend", "release"}, fakes[2].scripts(), "the key the raise took is left held")
	})
}
