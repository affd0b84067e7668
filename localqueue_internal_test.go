package redlock

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	rlgoredis "github.com/go-redlock/redlock/backends/goredis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLocalQueuesAreForgotten: a Client forgets the local queue of a name once no Mutex,
// Lease or waiter uses it, and keeps the one that a live Mutex or a held Lease uses, which
// every Mutex of that name then shares.
func TestLocalQueuesAreForgotten(t *testing.T) {
	s := miniredis.RunT(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := New([]Node{rlgoredis.New(rdb)}, WithNodeTimeout(5*time.Second)) // nothing here is timed
	require.NoError(t, err)
	ctx := context.Background()

	kept := c.NewMutex("kept")
	for i := range 100 {
		m := c.NewMutex("once-" + strconv.Itoa(i))
		require.NoError(t, m.LockContext(ctx))
		require.NoError(t, m.UnlockContext(ctx))
	}
	held, err := c.TryAcquire(ctx, "held")
	require.NoError(t, err)

	queues := func() int {
		c.qmu.Lock()
		defer c.qmu.Unlock()
		return len(c.queues)
	}
	require.Eventually(t, func() bool { runtime.GC(); return queues() == 2 }, 10*time.Second, 10*time.Millisecond,
		"the queues of names no one uses are still kept")
	assert.Same(t, kept.x.queue, c.NewMutex("kept").x.queue, "two Mutexes of one name do not share its queue")
	_, err = c.TryAcquire(ctx, "held")
	assert.ErrorIs(t, err, ErrHeld, "the held Lease's queue was forgotten")
	require.NoError(t, held.Release(ctx))
	runtime.KeepAlive(kept)
}
