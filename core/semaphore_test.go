package core_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// semLock is a fenced request for one permit of the semaphore called name with k permits.
func semLock(name string, k int) *core.Lock {
	l := lock(name)
	l.Keys, l.Fence = core.NewSemaphoreKeys("q:", name, k), true
	return l
}

// TestSemaphoreWaitersShareThePermits: goroutines on three nodes wait for the permits of a
// semaphore of 3 and hold each a moment: never more than 3 hold at once, every wait ends
// with a permit, and 3 waiters that hold on until all 3 hold get a permit each.
func TestSemaphoreWaitersShareThePermits(t *testing.T) {
	const goroutines, rounds, permits = 8, 5, 3
	c := newCluster(t, miniServers(t, 3))
	l := semLock("pool", permits)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var holders, most atomic.Int32
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for r := range rounds {
				h, err := c.AcquireWait(ctx, l, core.Backoff{Min: time.Millisecond, Max: 10 * time.Millisecond})
				if !assert.NoError(t, err, "goroutine %d round %d", g, r) {
					return
				}
				n := holders.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Millisecond)
				holders.Add(-1)
				assert.NoError(t, c.Release(ctx, h))
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int32(permits))

	all := make(chan *core.Held, permits)
	for range permits {
		wg.Go(func() {
			h, err := c.AcquireWait(ctx, l, core.Backoff{Min: time.Millisecond, Max: 10 * time.Millisecond})
			if assert.NoError(t, err) {
				all <- h
			}
		})
	}
	wg.Wait()
	require.Len(t, all, permits)
	_, err := c.Acquire(ctx, l)
	require.ErrorIs(t, err, core.ErrHeld, "a permit beyond the number")
	seen := map[string]bool{}
	for range permits {
		h := <-all
		assert.False(t, seen[h.Keys.Lock], "two holders of one permit")
		seen[h.Keys.Lock] = true
		require.NoError(t, c.Release(ctx, h))
	}
}
