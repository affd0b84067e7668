package redlock_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMutualExclusion: 3 Clients, each with its own connections, run 8 goroutines that each
// increment a shared value 40 times under the lock, with a read-yield-write that loses
// updates unless the lock excludes. No update is lost and no two holders ever overlap.
func TestMutualExclusion(t *testing.T) {
	t.Parallel() // see bubble_test.go
	const clients, goroutines, increments = 3, 8, 40
	servers := realServers(t, 3)
	var (
		value   atomic.Int64 // read and written separately: only the lock makes it safe
		holders atomic.Int32
		overlap atomic.Int32
		wg      sync.WaitGroup
	)
	ctx := ctxT(t, 3*time.Minute)
	for range clients {
		c := newClient(t, nodesFor(t, servers), redlock.WithRetry(time.Millisecond, 4*time.Millisecond),
			redlock.WithNodeTimeout(time.Second)) // a loaded 2-core machine under -race answers slowly
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range increments {
					l, err := c.Acquire(ctx, "counter")
					if !assert.NoError(t, err) {
						return
					}
					if holders.Add(1) != 1 {
						overlap.Add(1)
					}
					v := value.Load()
					runtime.Gosched()
					value.Store(v + 1)
					holders.Add(-1)
					if !assert.NoError(t, l.Release(ctx)) {
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	require.Zero(t, overlap.Load(), "two holders overlapped")
	require.Equal(t, int64(clients*goroutines*increments), value.Load(), "updates were lost")
}
