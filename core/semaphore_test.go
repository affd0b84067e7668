package core_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// semLock is a fenced request for one permit of the semaphore called name with k permits,
// with a node timeout that a loaded machine does not miss (these tests time nothing).
func semLock(name string, k int) *core.Lock {
	l := lock(name)
	l.Keys, l.Fence, l.NodeTimeout = core.NewSemaphoreKeys("q:", name, k), true, 10*time.Second
	return l
}

// TestSemaphoreWaitersShareThePermits: goroutines on three simulated nodes wait for the
// permits of a semaphore of 3 and hold each a moment: never more than 3 hold at once, every
// wait ends with a permit within a virtual minute, and 3 waiters that hold on until all 3
// hold get a permit each.
func TestSemaphoreWaitersShareThePermits(t *testing.T) {
	bubble(t, semaphoreWaitersShareThePermits)
}

func semaphoreWaitersShareThePermits(t *testing.T) {
	const goroutines, rounds, permits = 8, 5, 3
	c := newCluster(t, simServers(t, 3))
	l := semLock("pool", permits)
	l.NodeTimeout = 100 * time.Millisecond // virtual time
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

// TestSemaphoreSplitAsksForTheFreePermit: three nodes hold other owners' permits so that each
// grants a different one first. Where one permit is free on every node, Acquire asks for it at
// once and wins it; where none is free on a quorum, it fails with ErrHeld, and lets go of
// the permits the nodes granted it.
func TestSemaphoreSplitAsksForTheFreePermit(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		held [][]int // per node: the permits another owner holds
		want int     // the permit won; -1: ErrHeld
	}{
		{"free on a quorum", [][]int{{0}, {1}, {0, 1}}, 2},
		{"free on no quorum", [][]int{{0, 1}, {1, 2}, {0, 2}}, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			servers := miniServers(t, 3)
			cl := newCluster(t, servers)
			l := semLock("split", 3)
			for i, held := range c.held {
				for _, p := range held {
					_, err := servers[i].do("SET", l.Keys.Permits[p], "other", "PX", "60000")
					require.NoError(t, err)
				}
			}
			h, err := cl.Acquire(ctx, l)
			if c.want < 0 {
				require.ErrorIs(t, err, core.ErrHeld)
				for i, s := range servers {
					for p, key := range l.Keys.Permits {
						if v, err := s.do("GET", key); err == nil {
							assert.Equal(t, "other", v, "node %d permit %d: a grant left behind", i, p)
						}
					}
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, l.Keys.Permits[c.want], h.Keys.Lock)
			require.NoError(t, cl.Release(ctx, h))
		})
	}
}

// TestSemaphoreFreeIncludesEveryFreePermit: a waiter's later attempt on a node where its
// earlier one holds a permit is told every permit free to it there, its own and the free
// ones after it, as a first attempt is.
func TestSemaphoreFreeIncludesEveryFreePermit(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		node := nodeFor(t, s)
		k := core.NewSemaphoreKeys("free:", "s", 3)
		keys := append(k.ScriptKeys(), k.Permits...)
		args := func(token string) []string {
			return append(acquireArgs(token, "0", "w", 1), "0", "3", "0") // hint: permit 0
		}
		ctx := context.Background()
		first, err := node.Eval(ctx, script(t, "acquire"), keys, args("w.1")...)
		require.NoError(t, err)
		require.Equal(t, []int64{1, 0, 0, 0b111, 0}, first, "w.1 takes permit 0 of three free")
		again, err := node.Eval(ctx, script(t, "acquire"), keys, args("w.2")...)
		require.NoError(t, err)
		assert.Equal(t, []int64{1, 0, 0, 0b111, 0}, again, "w.2 keeps w's permit 0, and 1 and 2 are free to it")
	})
}

// TestSemaphoreRecordGivesWayWhenUnused: a node's record of a semaphore's number of permits
// refuses another number ({-2, n}, nothing changed) while a permit of either number is held
// there, or a live waiter queues there; once neither is, the other number takes over.
func TestSemaphoreRecordGivesWayWhenUnused(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		node := nodeFor(t, s)
		ctx := context.Background()
		acquire := func(k core.Keys) []int64 {
			t.Helper()
			args := append(acquireArgs("c.1", "0", "", 1), "0", strconv.Itoa(len(k.Permits)), "-1")
			r, err := node.Eval(ctx, script(t, "acquire"), append(k.ScriptKeys(), k.Permits...), args...)
			require.NoError(t, err)
			return r
		}
		do := func(args ...string) {
			t.Helper()
			_, err := s.do(args...)
			require.NoError(t, err)
		}
		two, three := core.NewSemaphoreKeys("rec:", "s", 2), core.NewSemaphoreKeys("rec:", "s", 3)
		record := func() any { v, _ := s.do("GET", two.Readers); return v }

		do("SET", two.Readers, "3", "PX", "60000")
		do("SET", three.Permits[2], "other", "PX", "60000")
		assert.Equal(t, []int64{-2, 3}, acquire(two), "a count of 2 while permit 2 of 3 is held")
		do("DEL", three.Permits[2])
		do("ZADD", two.Queue, "1", "w")
		do("ZADD", two.Alive, "99999999999999", "w")
		assert.Equal(t, []int64{-2, 3}, acquire(two), "a count of 2 while a waiter queues")
		assert.Equal(t, "3", record())
		do("ZADD", two.Alive, "1", "w") // its place lapsed
		r := acquire(two)
		assert.Equal(t, int64(1), r[0], "a count of 2 was refused where nothing of the count of 3 is left: %v", r)
		assert.Equal(t, "2", record())
		assert.Equal(t, "c.1", get(t, s, two.Permits[0]))

		// The count that took over is held (permit 0): a count of 3 is refused; and where
		// only a permit past the record's count, but of the caller's, is held, too.
		assert.Equal(t, []int64{-2, 2}, acquire(three), "a count of 3 while permit 0 of 2 is held")
		do("DEL", two.Permits[0])
		do("SET", three.Permits[2], "other", "PX", "60000")
		assert.Equal(t, []int64{-2, 2}, acquire(three), "a count of 3 while its permit 2 is held")
		assert.Equal(t, "2", record())
	})
}

// TestSemaphoreFailedGrantKeepsTheWaiterQueued: a waiter's attempt that a quorum granted a
// permit but that fails all the same (ErrExpired: a slow node's answer, which a semaphore's
// attempt waits for, came after the TTL) leaves no node's queue: the node that refused it
// keeps its place (it is not marked left), so that its next attempt is not refused there
// for the 10 s a leave is remembered.
func TestSemaphoreFailedGrantKeepsTheWaiterQueued(t *testing.T) {
	inBubble(t, 3, func(t *testing.T, servers []server) {
		l := semLock("late-grant", 2)
		l.TTL = time.Second
		for _, p := range l.Keys.Permits { // the third node refuses: its permits are held
			_, err := servers[2].do("SET", p, "other", "PX", "60000")
			require.NoError(t, err)
		}
		slow, _ := slowThird(t, servers, 1500*time.Millisecond)
		_, err := slow.AcquireAs(context.Background(), l, "w.1", "w", 1)
		require.ErrorIs(t, err, core.ErrExpired)
		synctest.Wait() // the calls in the background
		_, err = servers[2].do("ZSCORE", l.Keys.Queue, "w")
		assert.NoError(t, err, "the node that refused no longer queues the waiter")
		_, err = servers[2].do("ZSCORE", l.Keys.Alive, "!w")
		assert.ErrorIs(t, err, redis.Nil, "the node that refused marked the waiter left")
		for i, s := range servers[:2] {
			for _, p := range l.Keys.Permits {
				_, err := s.do("GET", p)
				assert.ErrorIs(t, err, redis.Nil, "node %d keeps a permit of the failed attempt", i)
			}
		}
	})
}
