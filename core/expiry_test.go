package core_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests check that every key the scripts write expires, and what the scripts do at
// the edges of time: a fence counter that expired, a key in its last millisecond, a queue
// full of lapsed waiters, a holder that crashed.

// script returns core's script called name.
func script(t *testing.T, name string) *core.Script {
	for _, s := range core.Scripts() {
		if s.Name() == name {
			return s
		}
	}
	t.Fatalf("no %q script", name)
	return nil
}

// nodeOf returns a go-redis Node for addr.
func nodeOf(t *testing.T, addr string) *goredis.Node {
	c := redis.NewClient(&redis.Options{Addr: addr})
	n := goredis.New(c)
	t.Cleanup(func() { _ = n.Close(); _ = c.Close() })
	return n
}

// acquireArgs are the acquire script's ARGV for a waiter's attempt (see acquire.lua).
func acquireArgs(token, fence, waiter string, ticket int64) []string {
	return []string{token, "10000", "0", fence, waiter, strconv.FormatInt(ticket, 10), "1000", "0", "w", "-1"}
}

// requireEveryKeyExpires fails unless every key on s has a TTL.
func requireEveryKeyExpires(t *testing.T, s server) {
	t.Helper()
	v, err := s.do("KEYS", "*")
	require.NoError(t, err)
	keys := v.([]any)
	require.NotEmpty(t, keys)
	for _, k := range keys {
		pttl, err := s.do("PTTL", k.(string))
		require.NoError(t, err)
		assert.Greater(t, pttl.(int64), int64(0), "key %s has no TTL", k)
	}
}

// TestEveryKeyExpires: a waiter takes the lock with a plain SET on a node, lets go of it
// but keeps its place (its attempt failed elsewhere), and a second waiter queues behind it:
// the queue's three keys all expire (the waiters' hash was once left without a TTL), and
// so does the fence counter, after a fenced acquisition and after a raise, FenceIdle after it.
func TestEveryKeyExpires(t *testing.T) {
	onOneOfEachTimed(t, func(t *testing.T, s server) {
		node := nodeFor(t, s)
		k := core.NewKeys("e:", "job")
		ctx := context.Background()
		_, err := s.do("SET", k.Lock, "w1.1", "PX", "10000") // w1's plain SET NX
		require.NoError(t, err)
		_, err = node.Eval(ctx, script(t, "release"), k.ScriptKeys(), "w1.1", "w", "PUBLISH", "w1", "stay", "1", "1000")
		require.NoError(t, err)
		r, err := node.Eval(ctx, script(t, "acquire"), k.ScriptKeys(), acquireArgs("w2.1", "0", "w2", 2)...)
		require.NoError(t, err)
		require.Equal(t, []int64{0, 0}, r, "w2 queues behind w1")
		for _, key := range []string{k.Queue, k.Alive, k.Waiters} {
			ok, err := s.do("EXISTS", key)
			require.NoError(t, err)
			require.Equal(t, int64(1), ok, key)
		}
		requireEveryKeyExpires(t, s)

		other := core.NewKeys("e:", "fenced")
		r, err = node.Eval(ctx, script(t, "acquire"), other.ScriptKeys(), "t1", "10000", "0", "1", "", "0", "1000", "0", "w", "-1")
		require.NoError(t, err)
		require.Equal(t, int64(1), r[0])
		_, err = node.Eval(ctx, script(t, "extend"), []string{other.Lock, other.Fence}, "t1", "10000", "w", strconv.FormatInt(r[1]+10, 10))
		require.NoError(t, err)
		requireEveryKeyExpires(t, s)
		pttl, err := s.do("PTTL", other.Fence)
		require.NoError(t, err)
		if simulated([]server{s}) {
			assert.Equal(t, core.FenceIdle.Milliseconds(), pttl.(int64))
			return
		}
		assert.LessOrEqual(t, pttl.(int64), core.FenceIdle.Milliseconds())
		assert.Greater(t, pttl.(int64), core.FenceIdle.Milliseconds()-60_000)
	})
}

// TestFenceIdleIsTheScripts: the scripts expire fence counters after core.FenceIdle.
func TestFenceIdleIsTheScripts(t *testing.T) {
	want := fmt.Sprintf("fence_idle = %d", core.FenceIdle.Milliseconds())
	for _, name := range []string{"acquire", "extend"} {
		assert.Contains(t, script(t, name).Source(), want, name)
	}
}

// TestTokensIncreaseAcrossTheFenceExpiry: a counter pushed as far ahead of the server's
// clock as a client can push it (2 s) expires after FenceIdle without acquisitions, and the
// next token is still larger: it starts again from the server's clock, which has moved on
// by FenceIdle. (miniredis: the test sets the server's clock.)
func TestTokensIncreaseAcrossTheFenceExpiry(t *testing.T) {
	m := miniredis.RunT(t)
	start := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	m.SetTime(start)
	node := nodeOf(t, m.Addr())
	k := core.NewKeys("e:", "fence")
	ctx := context.Background()
	acquire := func(token string, floor int64) int64 {
		r, err := node.Eval(ctx, script(t, "acquire"), k.ScriptKeys(), token, "10000", "0", strconv.FormatInt(floor, 10), "", "0", "1000", "0", "w", "-1")
		require.NoError(t, err)
		require.Equal(t, int64(1), r[0])
		_, err = node.Eval(ctx, script(t, "release"), k.ScriptKeys(), token, "w", "PUBLISH", "", "leave", "", "")
		require.NoError(t, err)
		return r[1]
	}
	first := acquire("t1", start.Add(time.Hour).UnixMicro()) // a floor far ahead counts for 2 s
	assert.Equal(t, start.Add(2*time.Second).UnixMicro(), first)

	m.SetTime(start.Add(core.FenceIdle))
	m.FastForward(core.FenceIdle)
	assert.False(t, m.Exists(k.Fence), "the counter outlived FenceIdle")
	next := acquire("t2", 1)
	assert.Greater(t, next, first)
	assert.Equal(t, start.Add(core.FenceIdle).UnixMicro(), next)
}

// TestHeldReplyIsAtLeastOneMillisecond: a lock in its last millisecond (PTTL 0) is reported
// held for 1 ms, not 0, which a waiter would read as "no bound" and sleep its whole backoff.
func TestHeldReplyIsAtLeastOneMillisecond(t *testing.T) {
	m := miniredis.RunT(t)
	node := nodeOf(t, m.Addr())
	k := core.NewKeys("e:", "last")
	require.NoError(t, m.Set(k.Lock, "other"))
	m.SetTTL(k.Lock, 500*time.Microsecond)
	r, err := node.Eval(context.Background(), script(t, "acquire"), k.ScriptKeys(), acquireArgs("w.1", "0", "w", 1)...)
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 1}, r)
}

// TestLapsedWaitersAreForgottenInBoundedSteps: a queue of 100 waiters whose places lapsed:
// each call forgets at most 64 of them, so that a script's work is bounded; a call whose
// scan ran out reads as one with a live waiter ahead (it refuses the free lock: one may be
// there) and tells the caller to call again at once ({0, 1}: no release will wake it), and
// the next call finishes the job.
func TestLapsedWaitersAreForgottenInBoundedSteps(t *testing.T) {
	m := miniredis.RunT(t)
	start := time.Now()
	m.SetTime(start)
	node := nodeOf(t, m.Addr())
	k := core.NewKeys("e:", "lapsed")
	ctx := context.Background()
	require.NoError(t, m.Set(k.Lock, "holder"))
	for i := range 100 {
		_, err := node.Eval(ctx, script(t, "acquire"), k.ScriptKeys(), acquireArgs(fmt.Sprintf("w%d.1", i), "0", fmt.Sprintf("w%d", i), int64(i))...)
		require.NoError(t, err)
	}
	m.SetTime(start.Add(2 * time.Second)) // their places (450 ms) lapsed
	m.Del(k.Lock)
	count := func() int {
		if !m.Exists(k.Queue) {
			return 0
		}
		n, err := m.ZMembers(k.Queue)
		require.NoError(t, err)
		return len(n)
	}
	require.Equal(t, 100, count())
	r, err := node.Eval(ctx, script(t, "acquire"), k.ScriptKeys(), acquireArgs("late.1", "0", "late", 1000)...)
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 1}, r, "a scan that ran out must refuse the free lock, and say to call again at once")
	assert.Equal(t, 100-64+1, count(), "the call forgot 64 lapsed waiters, and queued the caller")
	r, err = node.Eval(ctx, script(t, "acquire"), k.ScriptKeys(), acquireArgs("late.2", "0", "late", 1000)...)
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 0}, r, "the next call forgot the rest, and found no one ahead")
	assert.Equal(t, 0, count(), "a holder is in no queue")
	assert.False(t, m.Exists(k.Waiters))
	_, err = node.Eval(ctx, script(t, "release"), k.ScriptKeys(), "late.2", "w", "PUBLISH", "late", "leave", "", "")
	require.NoError(t, err)
	assert.Equal(t, 0, count(), "the release left a place")
	alive, err := m.ZMembers(k.Alive)
	require.NoError(t, err)
	assert.Equal(t, []string{"!late"}, alive, "the liveness set keeps only the mark of the waiter that left")
}

// TestCrashedHolderBlocksNoLongerThanItsTTL: a waiter that got the lock by hand-over and
// then crashed (it never releases nor extends) blocks the waiter behind it only until its
// lock's TTL runs out: its place in the queue lapses with the lock, not a place's
// lifetime (a refresh interval and two node timeouts) after its last call.
func TestCrashedHolderBlocksNoLongerThanItsTTL(t *testing.T) {
	for _, c := range simSetups[1:] { // N = 3
		c.run(t, crashedHolderBlocksNoLongerThanItsTTL)
	}
}

func crashedHolderBlocksNoLongerThanItsTTL(t *testing.T, servers []server) {
	cl := newCluster(t, servers)
	first := hold(t, cl, servers, "crash")
	const ttl = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waiter := func(ready chan<- time.Time, nodeTimeout time.Duration) {
		l := lock("crash")
		l.TTL, l.NodeTimeout = ttl, nodeTimeout
		_, err := cl.AcquireWait(ctx, l, patient)
		if err != nil {
			t.Error(err)
		}
		ready <- time.Now()
	}
	crashedGot, nextGot := make(chan time.Time, 1), make(chan time.Time, 1)
	// The waiter that crashes keeps a place for 4.5 s after its last call (a 1 s node
	// timeout), far beyond its lock's TTL, unless the place lapses with the lock; the next
	// calls again every 250 ms.
	go waiter(crashedGot, time.Second)
	settle(t, servers, func() bool { return allEqual(queued(t, servers, first.Keys), 1) }, "the first waiter is not queued")
	if simulated(servers) {
		advance(100 * time.Millisecond) // the next waiter's refresh (250 ms) falls out of step with the lock's TTL
	}
	start := time.Now()
	nextTimeout := 100 * time.Millisecond
	if !simulated(servers) {
		nextTimeout = time.Second // no tighter than a loaded machine keeps to: the TTL decides here
	}
	go waiter(nextGot, nextTimeout)
	settle(t, servers, func() bool { return allEqual(queued(t, servers, first.Keys), 2) }, "the next waiter is not queued")
	require.NoError(t, cl.Release(context.Background(), first))
	crashed := await(t, servers, crashedGot, "the first waiter's hand-over") // and never releases
	next := await(t, servers, nextGot, "the next waiter's lock")
	waited := next.Sub(crashed)
	t.Logf("the next waiter got the lock %v after the crashed holder did (TTL %v)", waited, ttl)
	if simulated(servers) {
		// The crashed holder's lock, handed over at the next waiter's start, runs out 300 ms
		// later; the next waiter, refused with the lock's PTTL, calls again at that instant
		// (before its refresh at 350 ms) and takes it.
		assert.Equal(t, start, crashed)
		assert.Equal(t, ttl, waited, "the next waiter did not get the lock as the crashed holder's TTL ran out")
		return
	}
	assert.GreaterOrEqual(t, waited, ttl/2, "the next waiter got in while the crashed holder's lock was valid")
	assert.Less(t, waited, 4*time.Second, "the crashed holder's place outlived its lock")
}

// TestLateCallOfAWaiterThatLeftIsRefused: a call of a waiter that has left the queue
// (released its lock, or gave up), which lands after its leave (held up on the way), is
// refused and changes nothing: it neither queues the waiter again nor takes the free lock
// in its name; a stale "stay" release does not queue it again either. Another waiter,
// which never left, is not affected.
func TestLateCallOfAWaiterThatLeftIsRefused(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		node := nodeOf(t, s.addr)
		k := core.NewKeys("e:", "left")
		ctx := context.Background()
		acquire := func(token, waiter string, ticket int64) []int64 {
			r, err := node.Eval(ctx, script(t, "acquire"), k.ScriptKeys(), acquireArgs(token, "0", waiter, ticket)...)
			require.NoError(t, err)
			return r
		}
		release := func(token, waiter, mode string) []int64 {
			r, err := node.Eval(ctx, script(t, "release"), k.ScriptKeys(), token, "w", "PUBLISH", waiter, mode, "1", "1000")
			require.NoError(t, err)
			return r
		}
		queue := func() []any {
			v, err := s.do("ZRANGE", k.Queue, "0", "-1")
			require.NoError(t, err)
			q, _ := v.([]any)
			return q
		}
		_, err := s.do("SET", k.Lock, "holder", "PX", "10000")
		require.NoError(t, err)
		require.Equal(t, int64(0), acquire("w.1", "w", 1)[0])
		require.Equal(t, int64(0), acquire("v.1", "v", 2)[0])
		require.Len(t, queue(), 2)
		release("w.1", "w", "leave") // w gives up
		require.Equal(t, []any{"v"}, queue())

		// w's first attempt lands again, late: the lock held, then free.
		assert.Equal(t, int64(0), acquire("w.1", "w", 1)[0])
		assert.Equal(t, []any{"v"}, queue(), "a late call queued a waiter that left")
		_, err = s.do("DEL", k.Lock, k.Queue)
		require.NoError(t, err)
		assert.Equal(t, []int64{0, 0}, acquire("w.1", "w", 1), "a late call took the free lock for a waiter that left")
		assert.Empty(t, queue())
		_, err = s.do("GET", k.Lock)
		assert.ErrorIs(t, err, redis.Nil, "the lock was set for a waiter that left")

		// v, which never left, takes it; its release, and a stale "stay" release of
		// w's (which found the lock w's) after it, queue no one.
		assert.Equal(t, int64(1), acquire("v.2", "v", 2)[0])
		_, err = s.do("SET", k.Lock, "w.1", "PX", "10000")
		require.NoError(t, err)
		release("w.1", "w", "stay")
		assert.Empty(t, queue(), "a stale release queued a waiter that left")
		requireEveryKeyExpires(t, s)
	})
}
