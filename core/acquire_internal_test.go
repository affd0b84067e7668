package core

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSemaphoreLetsGoOfOtherPermitsPast64Nodes: a semaphore's winner lets go at once of the
// permit each other node gave it, also on a node past the 64th.
func TestSemaphoreLetsGoOfOtherPermitsPast64Nodes(t *testing.T) {
	bubble(t, func(t *testing.T) {
		gives := func(permit int64) func(context.Context, *Script) ([]int64, error) {
			return func(_ context.Context, s *Script) ([]int64, error) {
				if s == acquireScript {
					return []int64{1, 0, 0, 3, permit}, nil // both permits free to us; took permit
				}
				return []int64{1, 0}, nil
			}
		}
		evals := make([]func(context.Context, *Script) ([]int64, error), 65)
		for i := range evals {
			evals[i] = gives(0)
			if i >= 40 {
				evals[i] = gives(1)
			}
		}
		c, fakes := cluster(t, evals...)
		l := testLock()
		l.Fence = false
		l.Keys = NewSemaphoreKeys("t:", "sem", 2)
		_, err := c.Acquire(context.Background(), l)
		require.NoError(t, err)
		synctest.Wait()
		for _, i := range []int{40, 63, 64} {
			assert.Equal(t, []string{"acquire", "release"}, fakes[i].scripts(), "node %d's other permit is kept", i)
		}
		assert.Equal(t, []string{"acquire"}, fakes[0].scripts())
	})
}
