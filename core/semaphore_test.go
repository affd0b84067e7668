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
			a := acquireArgs(token, "0", "w", 1)
			a[8], a[9] = "3", "0" // a semaphore of 3; hint: permit 0
			return a
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
// refuses another number ({-2, n}, nothing changed) while it stands: at least as long as a
// permit taken may be held (an acquisition's TTL, an extension's), or a queued waiter's
// place may live (two place lifetimes); a release that leaves no permit held and no waiter
// queued deletes it, and another number takes over.
func TestSemaphoreRecordGivesWayWhenUnused(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		node := nodeFor(t, s)
		ctx := context.Background()
		eval := func(name string, keys []string, args ...string) []int64 {
			t.Helper()
			r, err := node.Eval(ctx, script(t, name), keys, args...)
			require.NoError(t, err)
			return r
		}
		// acquire asks for a permit of k for token (waiter "" or its id, its place kept ms).
		acquire := func(k core.Keys, token, waiter, kept string) []int64 {
			t.Helper()
			args := acquireArgs(token, "0", waiter, 1)
			args[6], args[8] = kept, strconv.Itoa(len(k.Permits))
			return eval("acquire", append(k.ScriptKeys(), k.Permits...), args...)
		}
		release := func(k core.Keys, token, waiter string) []int64 {
			t.Helper()
			args := []string{token, strconv.Itoa(len(k.Permits)), "PUBLISH", waiter, "leave", "", ""}
			return eval("release", append(k.ScriptKeys(), k.Permits...), args...)
		}
		two, three := core.NewSemaphoreKeys("rec:", "s", 2), core.NewSemaphoreKeys("rec:", "s", 3)
		record := func() string { return get(t, s, two.Readers) }
		recordTTL := func() int64 {
			t.Helper()
			v, err := s.do("PTTL", two.Readers)
			require.NoError(t, err)
			return v.(int64)
		}

		r := acquire(three, "c.1", "", "1000")
		require.Equal(t, int64(1), r[0], "a permit of 3 of none held: %v", r)
		assert.Equal(t, "3", record())
		assert.Greater(t, recordTTL(), int64(9000), "the record may go before the permit")
		assert.Equal(t, []int64{-2, 3}, acquire(two, "d.1", "", "1000"), "a count of 2 while a permit of 3 is held")
		assert.Equal(t, "", get(t, s, two.Permits[1]), "a refused count took a permit")
		assert.Equal(t, []int64{1}, eval("extend", []string{three.Permits[0], three.Fence, three.Readers}, "c.1", "60000", "p"))
		assert.Greater(t, recordTTL(), int64(50000), "the record may go before the extended permit")
		release(three, "c.1", "")
		assert.Equal(t, "", record(), "the release of the last permit, no one queued, left the record")

		r = acquire(two, "d.1", "", "1000")
		require.Equal(t, int64(1), r[0], "a count of 2 was refused where nothing of the count of 3 is left: %v", r)
		assert.Equal(t, "2", record())
		assert.Equal(t, "d.1", get(t, s, two.Permits[0]))
		r = acquire(two, "e.1", "", "1000")
		require.Equal(t, int64(1), r[0], "the second permit of 2: %v", r)
		r = acquire(two, "w.1", "w", "60000") // none free: it queues, for a minute
		require.Equal(t, int64(0), r[0], "a third holder of 2 permits: %v", r)
		assert.Greater(t, recordTTL(), int64(110000), "the record may go before the queued waiter's place")
		release(two, "d.1", "")
		release(two, "e.1", "")
		assert.Equal(t, "2", record(), "the record went while a waiter queues")
		assert.Equal(t, []int64{-2, 2}, acquire(three, "f.1", "", "1000"), "a count of 3 while a waiter for 2 queues")
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

// TestSemaphoreRecordGoesWithTheLastWaiter: a waiter's leave that leaves no permit held and
// no waiter queued deletes the semaphore's record of its number, as a holder's release does:
// another number then takes over at once.
func TestSemaphoreRecordGoesWithTheLastWaiter(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		node := nodeFor(t, s)
		ctx := context.Background()
		two, three := core.NewSemaphoreKeys("last:", "s", 2), core.NewSemaphoreKeys("last:", "s", 3)
		for _, p := range two.Permits { // another owner's permits, as yet
			_, err := s.do("SET", p, "other", "PX", "60000")
			require.NoError(t, err)
		}
		args := acquireArgs("w.1", "0", "w", 1)
		args[8] = "2"
		r, err := node.Eval(ctx, script(t, "acquire"), append(two.ScriptKeys(), two.Permits...), args...)
		require.NoError(t, err)
		require.Equal(t, int64(0), r[0], "a waiter for 2 permits held: %v", r)
		for _, p := range two.Permits { // their TTL ran out
			_, err := s.do("DEL", p)
			require.NoError(t, err)
		}
		_, err = node.Eval(ctx, script(t, "release"), append(two.ScriptKeys(), two.Permits...),
			"w.2", "2", "PUBLISH", "w", "leave", "", "")
		require.NoError(t, err)
		assert.Equal(t, []int64{0}, queued(t, []server{s}, two), "the waiter did not leave")
		assert.Equal(t, "", get(t, s, two.Readers), "the last waiter's leave, no permit held, left the record")
		args = acquireArgs("c.1", "0", "", 1)
		args[8] = "3"
		r, err = node.Eval(ctx, script(t, "acquire"), append(three.ScriptKeys(), three.Permits...), args...)
		require.NoError(t, err)
		assert.Equal(t, int64(1), r[0], "a count of 3 was refused where nothing of the count of 2 is left: %v", r)
	})
}

// TestSemaphoreWakesOneWaiterPerFreePermit: a release of a semaphore's permit wakes as many
// of its first waiters as permits are free, each with an empty message on its channel, and
// no other; a woken waiter then takes a free permit with its next attempt.
func TestSemaphoreWakesOneWaiterPerFreePermit(t *testing.T) {
	onOneOfEachTimed(t, func(t *testing.T, s server) {
		node := nodeFor(t, s)
		ctx := context.Background()
		k := core.NewSemaphoreKeys("wake:", "s", 2)
		keys := append(k.ScriptKeys(), k.Permits...)
		acquire := func(token, waiter string, ticket int64) []int64 {
			t.Helper()
			args := acquireArgs(token, "0", waiter, ticket)
			args[8] = "2"
			r, err := node.Eval(ctx, script(t, "acquire"), keys, args...)
			require.NoError(t, err)
			return r
		}
		release := func(token string) {
			t.Helper()
			_, err := node.Eval(ctx, script(t, "release"), keys, token, "2", "PUBLISH", "", "leave", "", "")
			require.NoError(t, err)
		}
		for _, token := range []string{"c.1", "d.1"} {
			require.Equal(t, int64(1), acquire(token, "", 1)[0], "%s: a free permit", token)
		}
		msgs := map[string]<-chan string{}
		for i, id := range []string{"w1", "w2", "w3"} {
			require.Equal(t, int64(0), acquire(id+".1", id, int64(i+1))[0], "%s: no permit free", id)
			msgs[id] = listen(t, s, k.Wake(id))
		}
		// quiet fails the test if a waiter of ids is told anything.
		quiet := func(ids ...string) {
			t.Helper()
			if s.sim != nil {
				synctest.Wait() // a message would have come by now
			} else {
				time.Sleep(100 * time.Millisecond) // on redis-server: a message would come by then
			}
			for _, id := range ids {
				select {
				case m := <-msgs[id]:
					t.Fatalf("%s was told %q", id, m)
				default:
				}
			}
		}

		release("c.1") // one permit free: the first waiter
		assert.Equal(t, "", next(t, []server{s}, msgs["w1"]), "the first waiter was not woken")
		quiet("w2", "w3")
		release("d.1") // two free: the first two
		assert.Equal(t, "", next(t, []server{s}, msgs["w1"]), "the first waiter was not woken again")
		assert.Equal(t, "", next(t, []server{s}, msgs["w2"]), "the second waiter was not woken with two permits free")
		quiet("w3")
		for i, id := range []string{"w1", "w2"} {
			r := acquire(id+".2", id, int64(i+1))
			assert.Equal(t, int64(1), r[0], "the woken %s could not take a permit: %v", id, r)
		}
		assert.Equal(t, int64(0), acquire("w3.2", "w3", 3)[0], "the third waiter took a permit beyond the number")
	})
}
