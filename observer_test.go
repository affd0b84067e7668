package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// record is what a recorder recorded.
type record struct {
	waiting  []redlock.WaitEvent // not in order: the tests of order predate the event
	acquired []redlock.AcquireEvent
	released []redlock.ReleaseEvent
	extended []redlock.ExtendEvent
	lost     []redlock.LostEvent
	nodes    []redlock.NodeEvent
	order    []string // "acquired", "released", "extended", "lost", "node", as they came
}

// recorder is an Observer that records every event, in order.
type recorder struct {
	mu  sync.Mutex
	rec record
}

func (r *recorder) Waiting(e redlock.WaitEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.waiting = append(r.rec.waiting, e)
}

func (r *recorder) Acquired(e redlock.AcquireEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.acquired = append(r.rec.acquired, e)
	r.rec.order = append(r.rec.order, "acquired")
}

func (r *recorder) Released(e redlock.ReleaseEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.released = append(r.rec.released, e)
	r.rec.order = append(r.rec.order, "released")
}

func (r *recorder) Extended(e redlock.ExtendEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.extended = append(r.rec.extended, e)
	r.rec.order = append(r.rec.order, "extended")
}

func (r *recorder) Lost(e redlock.LostEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.lost = append(r.rec.lost, e)
	r.rec.order = append(r.rec.order, "lost")
}

func (r *recorder) NodeError(e redlock.NodeEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.nodes = append(r.rec.nodes, e)
	r.rec.order = append(r.rec.order, "node")
}

// snapshot returns a copy of what r recorded so far.
func (r *recorder) snapshot() record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return record{
		waiting:  append([]redlock.WaitEvent(nil), r.rec.waiting...),
		acquired: append([]redlock.AcquireEvent(nil), r.rec.acquired...),
		released: append([]redlock.ReleaseEvent(nil), r.rec.released...),
		extended: append([]redlock.ExtendEvent(nil), r.rec.extended...),
		lost:     append([]redlock.LostEvent(nil), r.rec.lost...),
		nodes:    append([]redlock.NodeEvent(nil), r.rec.nodes...),
		order:    append([]string(nil), r.rec.order...),
	}
}

// reset forgets what r recorded.
func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec = record{}
}

// index returns the position of the n-th (from 0) event called kind in s.order, or -1.
func (s record) index(kind string, n int) int {
	for i, k := range s.order {
		if k == kind {
			if n == 0 {
				return i
			}
			n--
		}
	}
	return -1
}

// TestObserverLeaseWaitAndWake: on one simulated node, A's Acquire (its round trips take
// 1 ms), B's TryAcquire refused (held), B's Acquire given up at its deadline (timeout),
// and B's Acquire that waits while A holds the lock for 300 ms and is woken by A's
// Release: its wait is the 300 ms and a round trip, it made three
// attempts (the first finds the lock held; once subscribed, the second queues it; the
// third, on the wake-up, takes it) and no release handed it the lock; A's release reports
// the hold time.
func TestObserverLeaseWaitAndWake(t *testing.T) {
	bubble(t, observerLeaseWaitAndWake)
}

func observerLeaseWaitAndWake(t *testing.T) {
	nodes, sims := simNodes(t, 1)
	server := sims[0].Miniredis()
	ra, rb := &recorder{}, &recorder{}
	// A node timeout of 2 s makes the waiter's refresh interval 5 s: it waits for the
	// hand-over rather than calling again.
	opts := []redlock.Option{redlock.WithNodeTimeout(2 * time.Second), redlock.WithRetry(time.Second, 5*time.Second)}
	a := closingClient(t, []redlock.Node{slowNode{Node: nodes[0], delay: time.Millisecond}}, append(opts, redlock.WithObserver(ra))...)
	b := closingClient(t, nodes, append(opts, redlock.WithObserver(rb))...)
	ctx := ctxT(t, 20*time.Second)

	before := time.Now()
	la, err := a.Acquire(ctx, "job")
	require.NoError(t, err)
	s := ra.snapshot()
	require.Len(t, s.acquired, 1)
	e := s.acquired[0]
	assert.Equal(t, "job", e.Name)
	assert.Equal(t, redlock.KindLease, e.Kind)
	assert.Equal(t, redlock.OutcomeOK, e.Outcome)
	assert.NoError(t, e.Err)
	assert.Equal(t, 1, e.Attempts)
	assert.Equal(t, ctx, e.Context)
	assert.Equal(t, before, e.Start)
	assert.Equal(t, time.Millisecond, e.Wait, "the acquisition's round trip")

	_, err = b.TryAcquire(ctx, "job")
	require.ErrorIs(t, err, redlock.ErrHeld)
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	_, err = b.Acquire(short, "job")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	s = rb.snapshot()
	require.Len(t, s.acquired, 2)
	tried, gaveUp := s.acquired[0], s.acquired[1]
	assert.Equal(t, redlock.OutcomeHeld, tried.Outcome)
	assert.ErrorIs(t, tried.Err, redlock.ErrHeld)
	assert.Equal(t, 1, tried.Attempts)
	assert.Equal(t, redlock.OutcomeTimeout, gaveUp.Outcome)
	assert.ErrorIs(t, gaveUp.Err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, gaveUp.Attempts, 1)
	assert.Equal(t, 150*time.Millisecond, gaveUp.Wait)
	assert.Empty(t, s.nodes, "a held lock is no node's error")
	rb.reset()

	got := make(chan *redlock.Lease, 1)
	go func() {
		lb, err := b.Acquire(ctx, "job")
		assert.NoError(t, err)
		got <- lb
	}()
	const hold = 300 * time.Millisecond
	time.Sleep(hold)
	// B waits for a wake-up once it is queued and subscribed (its second attempt, after it
	// subscribed, is refused too): release before that, and B would find the lock free at
	// a later call instead.
	members, err := server.ZMembers(lockKey("job") + ":queue")
	require.NoError(t, err)
	require.Len(t, members, 1, "B is not queued")
	require.True(t, strings.HasPrefix(server.HGet(lockKey("job")+":waiters", members[0]), "w "), "B is not queued as a writer")
	require.NoError(t, la.Release(ctx))
	lb := <-got
	require.NotNil(t, lb)
	defer func() { _ = lb.Release(ctx) }()

	s = ra.snapshot()
	require.Len(t, s.released, 1)
	r := s.released[0]
	assert.Equal(t, "job", r.Name)
	assert.Equal(t, redlock.KindLease, r.Kind)
	assert.NoError(t, r.Err)
	assert.Equal(t, hold+150*time.Millisecond, r.Hold, "A held it through B's two calls and the sleep")
	assert.Equal(t, time.Millisecond, r.Duration, "the release's round trip")
	assert.Equal(t, s.acquired[0].Start.Add(s.acquired[0].Wait).Add(r.Hold), r.Start)

	s = rb.snapshot()
	require.Len(t, s.acquired, 1)
	e = s.acquired[0]
	assert.Equal(t, redlock.OutcomeOK, e.Outcome)
	assert.Equal(t, hold+time.Millisecond, e.Wait, "the hold, and the release and B's last call on their way")
	assert.Equal(t, 3, e.Attempts, "refused, queued, then taken on the wake-up")
}

// TestObserverKinds: each kind of lock reports its kind, its acquisitions and releases,
// with the hold time; a TryLock that finds another Mutex of its Client holding the name
// reports held, after no attempt; per-lock WithObserver replaces the Client's, and
// WithObserver(nil) turns it off.
func TestObserverKinds(t *testing.T) {
	bubble(t, observerKinds)
}

func observerKinds(t *testing.T) {
	nodes, _ := simNodes(t, 3)
	for i, n := range nodes {
		nodes[i] = slowNode{Node: n, delay: time.Millisecond} // waits and durations of 1 ms
	}
	rec, own := &recorder{}, &recorder{}
	c := closingClient(t, nodes, redlock.WithObserver(rec), redlock.WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 20*time.Second)
	const hold = 30 * time.Millisecond

	m := c.NewMutex("m")
	m.Lock()
	assert.False(t, c.NewMutex("m").TryLock())
	time.Sleep(hold)
	m.Unlock()

	rw := c.NewRWMutex("rw")
	require.True(t, rw.TryRLock())
	rw.RLock()
	time.Sleep(hold)
	rw.RUnlock()
	rw.RUnlock()
	require.NoError(t, rw.LockContext(ctx))
	time.Sleep(hold)
	require.NoError(t, rw.UnlockContext(ctx))

	require.NoError(t, c.Do(ctx, "do", func(context.Context) error { time.Sleep(hold); return nil }))

	s := rec.snapshot()
	type acq struct {
		name     string
		kind     redlock.Kind
		outcome  redlock.Outcome
		attempts int
	}
	var acqs []acq
	for _, e := range s.acquired {
		acqs = append(acqs, acq{e.Name, e.Kind, e.Outcome, e.Attempts})
		if e.Outcome == redlock.OutcomeOK {
			assert.Positive(t, e.Wait)
		}
	}
	assert.Equal(t, []acq{
		{"m", redlock.KindMutex, redlock.OutcomeOK, 1},
		{"m", redlock.KindMutex, redlock.OutcomeHeld, 0},
		{"rw", redlock.KindRWMutexRead, redlock.OutcomeOK, 1},
		{"rw", redlock.KindRWMutexRead, redlock.OutcomeOK, 1},
		{"rw", redlock.KindRWMutexWrite, redlock.OutcomeOK, 1},
		{"do", redlock.KindLease, redlock.OutcomeOK, 1},
	}, acqs)
	assert.Equal(t, context.Background(), s.acquired[0].Context, "Lock has no context of its own")
	assert.Equal(t, ctx, s.acquired[4].Context)

	type rel struct {
		name string
		kind redlock.Kind
	}
	var rels []rel
	for i, e := range s.released {
		rels = append(rels, rel{e.Name, e.Kind})
		assert.NoError(t, e.Err)
		if i != 1 { // the first read holding is released after the second: held for less
			assert.GreaterOrEqual(t, e.Hold, hold, "release %d", i)
		}
		assert.Positive(t, e.Duration)
	}
	assert.Equal(t, []rel{
		{"m", redlock.KindMutex},
		{"rw", redlock.KindRWMutexRead},
		{"rw", redlock.KindRWMutexRead},
		{"rw", redlock.KindRWMutexWrite},
		{"do", redlock.KindLease},
	}, rels)
	assert.Empty(t, s.lost)
	assert.Empty(t, s.nodes)
	assert.Equal(t, "acquired", s.order[0])
	assert.Equal(t, "released", s.order[2], "the Mutex's release comes right after its two acquisitions")

	rec.reset()
	mine := c.NewMutex("own", redlock.WithObserver(own))
	require.NoError(t, mine.LockContext(ctx))
	require.NoError(t, mine.UnlockContext(ctx))
	quiet := c.NewMutex("quiet", redlock.WithObserver(nil))
	require.NoError(t, quiet.LockContext(ctx))
	require.NoError(t, quiet.UnlockContext(ctx))
	l, err := c.TryAcquire(ctx, "own-lease", redlock.WithObserver(own))
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	s = own.snapshot()
	assert.Equal(t, []string{"acquired", "released", "acquired", "released"}, s.order)
	assert.Empty(t, rec.snapshot().order, "the per-lock observers replace the Client's")
}

// TestObserverExtensions: a Lease with a 300 ms TTL that extends itself reports its
// automatic extensions, each with its new Until; an Extend call reports one that is not
// automatic; and a Mutex's extensions report its kind.
func TestObserverExtensions(t *testing.T) {
	bubble(t, observerExtensions)
}

func observerExtensions(t *testing.T) {
	nodes, _ := simNodes(t, 3)
	for i, n := range nodes {
		nodes[i] = slowNode{Node: n, delay: time.Millisecond} // durations of 1 ms
	}
	rec := &recorder{}
	const ttl = 300 * time.Millisecond
	c := closingClient(t, nodes, redlock.WithTTL(ttl), redlock.WithObserver(rec))
	ctx := ctxT(t, 20*time.Second)

	l, err := c.Acquire(ctx, "ext", redlock.WithAutoExtend(true))
	require.NoError(t, err)
	s, _ := rec.simAwait(t, 5*ttl, "two automatic extensions", func(s record) bool { return len(s.extended) >= 2 })
	for _, e := range s.extended[:2] {
		assert.Equal(t, "ext", e.Name)
		assert.Equal(t, redlock.KindLease, e.Kind)
		assert.True(t, e.Auto)
		assert.NoError(t, e.Err)
		assert.Equal(t, time.Millisecond, e.Duration)
		assert.Equal(t, e.Start.Add(ttl-(ttl/100+2*time.Millisecond)), e.Until, "Until is not Start + TTL - drift")
		_, hasDeadline := e.Context.Deadline()
		assert.True(t, hasDeadline, "an automatic extension's context ends at the validity")
	}
	rec.reset()
	extendCtx := ctxT(t, 5*time.Second)
	require.NoError(t, l.Extend(extendCtx))
	s = rec.snapshot()
	require.NotEmpty(t, s.extended)
	e := s.extended[0] // an automatic one may have come in meanwhile
	for _, x := range s.extended {
		if !x.Auto {
			e = x
		}
	}
	assert.False(t, e.Auto)
	assert.Equal(t, extendCtx, e.Context)
	assert.Equal(t, l.Until(), e.Until)
	require.NoError(t, l.Release(ctx))

	rec.reset()
	m := c.NewMutex("ext-mutex")
	m.Lock()
	s, _ = rec.simAwait(t, 5*ttl, "a Mutex's automatic extension", func(s record) bool { return len(s.extended) >= 1 })
	assert.Equal(t, redlock.KindMutex, s.extended[0].Kind)
	assert.True(t, s.extended[0].Auto)
	m.Unlock()
	assert.Empty(t, rec.snapshot().lost)
}

// TestObserverLosses: a holding whose keys are deleted behind its back is reported lost
// (ErrLost) at its next extension, before that extension's failure, and its later Release
// reports the loss; a lease that is not extended expires (ErrExpired); one that reaches its
// maximum hold time is lost (ErrMaxHold) and released by the library, once.
func TestObserverLosses(t *testing.T) {
	bubble(t, observerLosses)
}

func observerLosses(t *testing.T) {
	nodes, servers := simNodes(t, 3)
	rec := &recorder{}
	const ttl = 300 * time.Millisecond
	c := closingClient(t, nodes, redlock.WithTTL(ttl), redlock.WithObserver(rec))
	ctx := ctxT(t, 20*time.Second)

	l, err := c.Acquire(ctx, "lost", redlock.WithAutoExtend(true))
	require.NoError(t, err)
	time.Sleep(ttl / 3)
	for _, s := range servers {
		s.Miniredis().Del(lockKey("lost"))
	}
	s, _ := rec.simAwait(t, 5*ttl, "the loss", func(s record) bool { return len(s.lost) == 1 && s.index("extended", 0) >= 0 })
	lost := s.lost[0]
	assert.Equal(t, "lost", lost.Name)
	assert.Equal(t, redlock.KindLease, lost.Kind)
	assert.ErrorIs(t, lost.Reason, redlock.ErrLost)
	// At the first extension, two thirds into the 295 ms validity.
	assert.Equal(t, 196666667*time.Nanosecond, lost.Hold)
	failed := s.extended[len(s.extended)-1]
	assert.ErrorIs(t, failed.Err, redlock.ErrNotHeld)
	assert.ErrorIs(t, failed.Err, redlock.ErrLost)
	assert.True(t, failed.Until.IsZero())
	assert.Less(t, s.index("lost", 0), s.index("extended", len(s.extended)-1), "the loss comes before the failed extension")
	require.ErrorIs(t, l.Release(ctx), redlock.ErrLost)
	s = rec.snapshot()
	require.Len(t, s.released, 1)
	assert.ErrorIs(t, s.released[0].Err, redlock.ErrNotHeld)
	assert.ErrorIs(t, s.released[0].Err, redlock.ErrLost)
	assert.GreaterOrEqual(t, s.released[0].Hold, lost.Hold)

	rec.reset()
	_, err = c.TryAcquire(ctx, "expires") // neither extended nor released
	require.NoError(t, err)
	s, _ = rec.simAwait(t, 5*ttl, "the expiry", func(s record) bool { return len(s.lost) == 1 })
	assert.ErrorIs(t, s.lost[0].Reason, redlock.ErrExpired)
	assert.Equal(t, ttl-(ttl/100+2*time.Millisecond), s.lost[0].Hold, "did not expire as its validity ran out")
	assert.Empty(t, s.extended)

	rec.reset()
	const maxHold = 100 * time.Millisecond
	l, err = c.Acquire(ctx, "bounded", redlock.WithMaxHold(maxHold), redlock.WithTTL(time.Second))
	require.NoError(t, err)
	s, _ = rec.simAwait(t, 10*maxHold, "the release at the maximum hold time", func(s record) bool { return len(s.released) == 1 })
	require.Len(t, s.lost, 1)
	assert.ErrorIs(t, s.lost[0].Reason, redlock.ErrMaxHold)
	assert.NoError(t, s.released[0].Err, "the library's own release")
	assert.Equal(t, maxHold, s.released[0].Hold)
	assert.Equal(t, []string{"acquired", "lost", "released"}, s.order)
	require.ErrorIs(t, l.Release(ctx), redlock.ErrMaxHold)
	assert.Len(t, rec.snapshot().released, 1, "a Release that reaches no node reports nothing")
}

// TestObserverNodeErrors: on 3 real servers, one killed, every failed call to a node is
// reported by the node's name, in operations that succeed (an acquisition, an extension and
// a release on the two live servers); then, with a second server paused, in an extension, a
// release, a TryAcquire and a waiting Acquire that fail for lack of a quorum, the paused
// one as timed out. No event names the live server.
func TestObserverNodeErrors(t *testing.T) {
	t.Parallel() // see bubble_test.go
	t.Run("sim", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			nodes, servers := simNodes(t, 3)
			observerNodeErrors(t, true, nodes, [3]string{servers[0].Addr(), servers[1].Addr(), servers[2].Addr()},
				servers[1].Crash, servers[2].Hang, servers[2].Resume)
		})
	})
	t.Run("redis-server", func(t *testing.T) {
		nodes, servers := realNodes(t, 3)
		observerNodeErrors(t, false, nodes, [3]string{servers[0].Addr(), servers[1].Addr(), servers[2].Addr()},
			servers[1].Kill, servers[2].Pause, servers[2].Resume)
	})
}

// observerNodeErrors is TestObserverNodeErrors over nodes for the servers at addrs, of
// which kill stops the second and pause the third (until resume).
func observerNodeErrors(t *testing.T, sim bool, nodes []redlock.Node, addrs [3]string, kill, pause, resume func()) {
	rec := &recorder{}
	// 200 ms; on redis-server, where the paused server's calls wait it out, a second, which
	// a loaded machine's live servers keep to.
	nodeTimeout := 200 * time.Millisecond
	if !sim {
		nodeTimeout = time.Second
	}
	c := closingClient(t, nodes, redlock.WithNodeTimeout(nodeTimeout), redlock.WithObserver(rec))
	ctx := ctxT(t, 30*time.Second)

	down, err := c.Acquire(ctx, "down")
	require.NoError(t, err)
	live, killed, paused := addrs[0], addrs[1], addrs[2]
	kill()

	// seen waits until the events of lock name under op name each of nodes, at least n
	// times each, and returns how many named each.
	seen := func(name, op string, n int, nodes ...string) map[string]int {
		t.Helper()
		var count map[string]int
		cond := func() bool {
			count = map[string]int{}
			for _, e := range rec.snapshot().nodes {
				if e.Name == name && e.Op == op {
					count[e.Node]++
				}
			}
			for _, node := range nodes {
				if count[node] < n {
					return false
				}
			}
			return true
		}
		if sim { // the events come with the calls' ends: a paused node's at its node timeout
			until(t, time.Second, fmt.Sprintf("%s: %d events for each of %v", op, n, nodes), cond)
			return count
		}
		if !assert.Eventually(t, cond, generous, 5*time.Millisecond, "%s: want %d events for each of %v", op, n, nodes) {
			t.Logf("%s: %v", op, count)
		}
		return count
	}

	// With one node down, every operation succeeds, and reports the node.
	up, err := c.Acquire(ctx, "up")
	require.NoError(t, err)
	seen("up", "acquire", 1, killed)
	require.NoError(t, up.Extend(ctx))
	seen("up", "extend", 1, killed)
	require.NoError(t, up.Release(ctx))
	seen("up", "release", 1, killed)
	for _, e := range rec.snapshot().nodes {
		assert.Equal(t, killed, e.Node)
		if e.Name != "up" {
			// The acquisition of "down" returned on a quorum; its call to the killed
			// server may have been in flight when it was killed.
			assert.Equal(t, "down", e.Name)
			assert.Equal(t, "acquire", e.Op)
		}
	}

	// With two down, operations fail for lack of a quorum, and report both.
	pause()
	t.Cleanup(resume)
	rec.reset()
	require.ErrorIs(t, down.Extend(ctx), redlock.ErrNoQuorum)
	seen("down", "extend", 1, killed, paused)
	require.ErrorIs(t, down.Release(ctx), redlock.ErrNoQuorum)
	seen("down", "release", 1, killed, paused)
	_, err = c.TryAcquire(ctx, "down")
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	seen("down", "acquire", 1, killed, paused)

	rec.reset()
	// Ten node timeouts (six on redis-server): with both suspected, the live node alone is
	// no quorum, so each attempt waits for the paused one.
	wait := 10 * nodeTimeout
	if !sim {
		wait = 6 * nodeTimeout
	}
	short, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	_, err = c.Acquire(short, "down")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	s := rec.snapshot()
	require.Len(t, s.acquired, 1)
	e := s.acquired[0]
	assert.Equal(t, redlock.OutcomeTimeout, e.Outcome)
	require.GreaterOrEqual(t, e.Attempts, 3, "seconds of retries")
	// Each attempt's call to each node that ended before the caller's context did: more
	// than the first attempt's, none beyond the attempts made. (How many of the last ones
	// the deadline cut depends on the machine's load.)
	for node, n := range seen("down", "acquire", 2, killed, paused) {
		if sim { // each attempt's call to each node, the last one's too
			assert.Equal(t, e.Attempts, n, node)
			continue
		}
		// On redis-server, the TryAcquire's call to the paused server may end (and be
		// reported) after the reset: one more.
		assert.LessOrEqual(t, n, e.Attempts+1, node)
	}

	for _, e := range rec.snapshot().nodes {
		assert.NotEqual(t, live, e.Node, "%s: an event for the live node: %v", e.Op, e.Err)
		assert.Equal(t, redlock.KindLease, e.Kind)
		assert.False(t, e.Abstained)
		assert.Error(t, e.Err)
		assert.Equal(t, errors.Is(e.Err, redlock.ErrNodeTimeout), e.TimedOut, "%s: %v", e.Node, e.Err)
		if e.Node == paused {
			assert.True(t, e.TimedOut, "%s %s: %v", e.Op, e.Node, e.Err)
		}
	}
}

// TestObserverAbstentions: fresh real servers under a 2 s restart guard abstain: a
// TryAcquire reports those that answered as abstentions (not timeouts), by name; an
// Acquire waits the guard out, reporting the abstentions of its failed attempts, and then
// holds the lock after several attempts.
func TestObserverAbstentions(t *testing.T) {
	t.Run("sim", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			nodes, servers := simNodes(t, 3)
			for _, s := range servers { // fresh: uptime 0
				s.Crash()
				s.Restart()
			}
			observerAbstentions(t, true, nodes, [3]string{servers[0].Addr(), servers[1].Addr(), servers[2].Addr()})
		})
	})
	t.Run("redis-server", func(t *testing.T) {
		nodes, servers := realNodes(t, 3)
		observerAbstentions(t, false, nodes, [3]string{servers[0].Addr(), servers[1].Addr(), servers[2].Addr()})
	})
}

// observerAbstentions is TestObserverAbstentions over nodes for fresh servers at addrs.
func observerAbstentions(t *testing.T, sim bool, nodes []redlock.Node, addrs [3]string) {
	rec := &recorder{}
	nodeTimeout := 100 * time.Millisecond
	if !sim {
		nodeTimeout = 500 * time.Millisecond // within the 1 s TTL, and what a loaded machine keeps to
	}
	c := closingClient(t, nodes, redlock.WithRestartGuard(2*time.Second), redlock.WithTTL(time.Second), redlock.WithObserver(rec),
		redlock.WithNodeTimeout(nodeTimeout))
	ctx := ctxT(t, 30*time.Second)

	_, err := c.TryAcquire(ctx, "fresh")
	require.ErrorIs(t, err, redlock.ErrRestarted)
	s := rec.snapshot()
	// Two abstentions decide the outcome: the third node's answer may come after it.
	require.GreaterOrEqual(t, len(s.nodes), 2)
	require.LessOrEqual(t, len(s.nodes), 3)
	for _, e := range s.nodes {
		assert.Contains(t, addrs, e.Node, "%s is not one of the servers", e.Node)
		assert.True(t, e.Abstained, "%s: %v", e.Node, e.Err)
		assert.False(t, e.TimedOut)
		assert.ErrorIs(t, e.Err, redlock.ErrRestarted)
		assert.Equal(t, "acquire", e.Op)
		assert.Equal(t, "fresh", e.Name)
	}
	require.Len(t, s.acquired, 1)
	assert.Equal(t, redlock.OutcomeError, s.acquired[0].Outcome)

	rec.reset()
	start := time.Now()
	l, err := c.Acquire(ctx, "fresh")
	require.NoError(t, err)
	if sim {
		// The servers' uptime first exceeds the 2 s guard at 3 s (uptime_in_seconds counts
		// whole seconds), and the attempt after that, within the retry's 250 ms, holds it.
		assert.GreaterOrEqual(t, time.Since(start), 3*time.Second, "the guard was not waited out")
		assert.LessOrEqual(t, time.Since(start), 3*time.Second+250*time.Millisecond, "the guard was waited out late")
	}
	defer func() { _ = l.Release(ctx) }()
	s = rec.snapshot()
	require.Len(t, s.acquired, 1)
	e := s.acquired[0]
	assert.Equal(t, redlock.OutcomeOK, e.Outcome)
	assert.Greater(t, e.Attempts, 1)
	abstained := 0
	for _, n := range s.nodes {
		if n.Abstained {
			abstained++
		}
	}
	assert.GreaterOrEqual(t, abstained, 2, "the failed attempts' abstentions")
}

// instantNode grants every SET NX and answers every script {1, 1} at once (with the third
// value of an acquisition asked to identify its server, which then reports no run_id, as
// miniredis does): a Node that costs nothing, so that a test can count the library's own
// allocations.
type instantNode struct{ id int }

func (instantNode) Eval(_ context.Context, s *core.Script, _ []string, args ...string) ([]int64, error) {
	if s.Name() == "acquire" && len(args) >= 8 && args[7] == "1" {
		return []int64{1, 1, 0}, nil
	}
	return []int64{1, 1}, nil
}
func (instantNode) SetNX(context.Context, string, string, time.Duration) (bool, error) {
	return true, nil
}
func (n instantNode) String() string { return "instant" + string(rune('0'+n.id)) }

// lockUnlockAllocs returns the allocations of one Lock and Unlock of an uncontended Mutex
// on one instant node, with opts: the least of three measurements, as goroutines of earlier
// tests can only add to the count. One node, so that the replies' order cannot change the
// path: over three nodes on a loaded machine, a run counted 28 without and 32 with
// NopObserver in every measurement, where an idle one counts 28 and 31.
func lockUnlockAllocs(t testing.TB, opts ...redlock.Option) float64 {
	c := newClient(t, []redlock.Node{instantNode{0}}, opts...)
	m := c.NewMutex("allocs")
	cycle := func() {
		m.Lock()
		//lint:ignore SA2001 the cycle measures lock+unlock itself
		m.Unlock()
	}
	allocs := testing.AllocsPerRun(200, cycle)
	for range 2 {
		allocs = min(allocs, testing.AllocsPerRun(200, cycle))
	}
	return allocs
}

// TestObserverCostsNothingUnset: without an Observer, Lock and Unlock allocate less than
// with one that does nothing, which costs at most 3 allocations: what tracks an
// acquisition is built only for an Observer, and the events themselves allocate nothing.
// observer_internal_test.go checks that the paths without an Observer allocate nothing.
func TestObserverCostsNothingUnset(t *testing.T) {
	none := lockUnlockAllocs(t)
	nop := lockUnlockAllocs(t, redlock.WithObserver(redlock.NopObserver{}))
	t.Logf("allocations per Lock and Unlock: %.1f without an Observer, %.1f with NopObserver", none, nop)
	assert.Less(t, none, nop)
	assert.LessOrEqual(t, nop-none, 3.0)
}

// counter is an Observer that counts events.
type counter struct {
	redlock.NopObserver
	acquired, released atomic.Int64
}

func (c *counter) Acquired(redlock.AcquireEvent) { c.acquired.Add(1) }
func (c *counter) Released(redlock.ReleaseEvent) { c.released.Add(1) }

// BenchmarkObserver: Lock and Unlock of an uncontended Mutex on 3 instant nodes, without an
// Observer, with NopObserver, and with one that counts events.
func BenchmarkObserver(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []redlock.Option
	}{
		{"none", nil},
		{"nop", []redlock.Option{redlock.WithObserver(redlock.NopObserver{})}},
		{"counter", []redlock.Option{redlock.WithObserver(&counter{})}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := newClient(b, []redlock.Node{instantNode{0}, instantNode{1}, instantNode{2}}, bc.opts...)
			m := c.NewMutex("bench")
			b.ReportAllocs()
			for b.Loop() {
				m.Lock()
				//lint:ignore SA2001 the benchmark measures lock+unlock itself
				m.Unlock()
			}
		})
	}
}

// TestObserverReportsADownNodeOncePerNodeTimeout: with one node of five that never answers,
// back-to-back acquisitions call it, and report it, once per node timeout (each call to it
// times out before the next is made), not once per attempt.
func TestObserverReportsADownNodeOncePerNodeTimeout(t *testing.T) {
	bubble(t, observerReportsADownNodeOncePerNodeTimeout)
}

func observerReportsADownNodeOncePerNodeTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	nodes, servers := simNodes(t, 5)
	for i, n := range nodes[:4] {
		nodes[i] = slowNode{Node: n, delay: 10 * time.Millisecond} // an attempt takes time
	}
	servers[4].Hang()
	down := nodes[4]
	rec := &recorder{}
	c := closingClient(t, nodes, redlock.WithNodeTimeout(timeout), redlock.WithObserver(rec))
	ctx := ctxT(t, 30*time.Second)

	reports := func() int {
		n := 0
		for _, e := range rec.snapshot().nodes {
			if e.Node == down.String() && e.Op == "acquire" {
				n++
			}
		}
		return n
	}
	// attempts takes locks of n names back to back, or as many as it can in d, and returns
	// how many it tried and how long they took. (A release right after an acquisition waits
	// for its stragglers, the down node among them: the locks are left to expire. On a
	// loaded machine an attempt may fail, a live node being slow: it still counts.)
	next := 0
	attempts := func(n int, d time.Duration) (int, time.Duration) {
		start := time.Now()
		i := 0
		for ; i < n && time.Since(start) < d; i++ {
			next++
			_, _ = c.TryAcquire(ctx, fmt.Sprint("busy-", next))
		}
		return i, time.Since(start)
	}
	attempts(1000, 2*timeout) // until the node's first calls have failed
	before := reports()
	tried, took := attempts(1000, time.Second)
	reported := reports() - before
	// An attempt takes the live nodes' 10 ms; a call to the down node ends 201 ms after it
	// starts (the node timeout, from the end of the millisecond its calls share), and the
	// next attempt after that calls it again: once every 210 ms, 4 or 5 times in the second
	// (as the calls fall in it).
	assert.Equal(t, time.Second, took)
	assert.Equal(t, 100, tried)
	assert.GreaterOrEqual(t, reported, 4, "the down node was not called again once its calls had ended")
	assert.LessOrEqual(t, reported, 5, "the down node was called (and reported) more than once per node timeout")
}

// panicky is an Observer whose Acquired or Released panics while its flag is set.
type panicky struct {
	redlock.NopObserver
	acquired, released atomic.Bool
}

func (p *panicky) Acquired(redlock.AcquireEvent) {
	if p.acquired.Load() {
		panic("observer: acquired")
	}
}

func (p *panicky) Released(redlock.ReleaseEvent) {
	if p.released.Load() {
		panic("observer: released")
	}
}

// TestObserverPanicKeepsNoLock: an Observer that panics in Acquired (after a grant, and
// after a refusal) or in Released leaves no lock held, on the nodes or in the Client: the
// panic reaches the caller, and the name can be taken again at once.
func TestObserverPanicKeepsNoLock(t *testing.T) {
	nodes, servers := miniNodes(t, 3)
	obs := &panicky{}
	client := newClient(t, nodes, redlock.WithObserver(obs), redlock.WithTTL(time.Minute), patient)
	t.Cleanup(func() { _ = client.Close() })
	ctx := ctxT(t, time.Minute)
	mustPanic := func(what string, flag *atomic.Bool, f func()) {
		t.Helper()
		flag.Store(true)
		defer flag.Store(false)
		defer func() { assert.NotNil(t, recover(), what+": no panic") }()
		f()
	}
	free := func(name string) {
		t.Helper()
		// A release returns once a quorum let go: a loaded machine's last node may follow
		// in the background (within the node timeout).
		for i, s := range servers {
			assert.Eventually(t, func() bool { return !s.Exists(lockKey(name)) }, 30*time.Second, time.Millisecond,
				"%s: node %d holds the lock", name, i)
		}
		lease, err := client.TryAcquire(ctx, name)
		require.NoError(t, err, name)
		require.NoError(t, lease.Release(ctx), name)
	}

	mustPanic("TryAcquire, granted", &obs.acquired, func() { _, _ = client.TryAcquire(ctx, "granted") })
	free("granted")
	mustPanic("Lock", &obs.acquired, func() { client.NewMutex("locked").Lock() })
	free("locked")

	held, err := client.TryAcquire(ctx, "refused")
	require.NoError(t, err)
	mustPanic("TryAcquire, refused", &obs.acquired, func() { _, _ = client.TryAcquire(ctx, "refused") })
	require.NoError(t, held.Release(ctx))
	free("refused")

	held, err = client.TryAcquire(ctx, "released")
	require.NoError(t, err)
	mustPanic("Release", &obs.released, func() { _ = held.Release(ctx) })
	free("released")

	m := client.NewMutex("unlocked")
	require.True(t, m.TryLock())
	mustPanic("Unlock", &obs.released, m.Unlock)
	free("unlocked")
}

// gauges is an Observer that keeps, per kind, the waits in progress and the holdings, as a
// dashboard's gauges do from the events alone: a WaitEvent counts a wait up and the
// AcquireEvent with Waiting counts it down; a held AcquireEvent counts a holding up, and
// its LostEvent or else its first ReleaseEvent (neither Retry nor Lost) counts it down. It
// records the lowest values seen, which must never be below 0.
type gauges struct {
	redlock.NopObserver
	mu                  sync.Mutex
	waits, holdings     map[redlock.Kind]int
	lowWaits, lowHolds  int
	starts, waitedStart []time.Time
}

func newGauges() *gauges {
	return &gauges{waits: map[redlock.Kind]int{}, holdings: map[redlock.Kind]int{}}
}

func (g *gauges) add(m map[redlock.Kind]int, low *int, k redlock.Kind, d int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m[k] += d
	*low = min(*low, m[k])
}

func (g *gauges) Waiting(e redlock.WaitEvent) {
	g.mu.Lock()
	g.starts = append(g.starts, e.Start)
	g.mu.Unlock()
	g.add(g.waits, &g.lowWaits, e.Kind, 1)
}

func (g *gauges) Acquired(e redlock.AcquireEvent) {
	if e.Waiting {
		g.mu.Lock()
		g.waitedStart = append(g.waitedStart, e.Start)
		g.mu.Unlock()
		g.add(g.waits, &g.lowWaits, e.Kind, -1)
	}
	if e.Outcome == redlock.OutcomeOK {
		g.add(g.holdings, &g.lowHolds, e.Kind, 1)
	}
}

func (g *gauges) Released(e redlock.ReleaseEvent) {
	if !e.Retry && !e.Lost {
		g.add(g.holdings, &g.lowHolds, e.Kind, -1)
	}
}

func (g *gauges) Lost(e redlock.LostEvent) { g.add(g.holdings, &g.lowHolds, e.Kind, -1) }

// now returns the waits and holdings of kind.
func (g *gauges) now(k redlock.Kind) (waits, holdings int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waits[k], g.holdings[k]
}

// TestObserverGauges: the events let an Observer keep gauges of the waits in progress and
// the holdings, per kind, that never go below 0 and come back to 0: a wait begins with a
// WaitEvent (none for a TryAcquire or TryLock) and ends with its AcquireEvent (same Start,
// Waiting set); a holding ends once, at its LostEvent (lost, expired, its maximum hold
// time, Close) or else at its first release, whose ReleaseEvent says Lost when a LostEvent
// came first.
func TestObserverGauges(t *testing.T) {
	bubble(t, observerGauges)
}

func observerGauges(t *testing.T) {
	nodes, servers := simNodes(t, 3)
	g := newGauges()
	const ttl = 300 * time.Millisecond
	c := closingClient(t, nodes, redlock.WithTTL(ttl), redlock.WithObserver(g))
	other := closingClient(t, nodes, redlock.WithTTL(ttl), redlock.WithObserver(g))
	ctx := ctxT(t, time.Minute)
	state := func(k redlock.Kind, waits, holdings int, what string) {
		t.Helper()
		w, h := g.now(k)
		assert.Equal(t, waits, w, "waits of %v: %s", k, what)
		assert.Equal(t, holdings, h, "holdings of %v: %s", k, what)
	}

	l, err := c.Acquire(ctx, "gauged")
	require.NoError(t, err)
	state(redlock.KindLease, 0, 1, "an acquired lease")
	done := make(chan error, 1)
	go func() {
		l2, err := other.Acquire(ctx, "gauged")
		if err == nil {
			err = l2.Release(ctx)
		}
		done <- err
	}()
	synctest.Wait()
	state(redlock.KindLease, 1, 1, "a second Acquire waits behind the holder")
	require.NoError(t, l.Release(ctx))
	require.NoError(t, <-done)
	state(redlock.KindLease, 0, 0, "both released")

	l, err = c.TryAcquire(ctx, "tried")
	require.NoError(t, err)
	_, err = other.TryAcquire(ctx, "tried")
	require.ErrorIs(t, err, redlock.ErrHeld)
	state(redlock.KindLease, 0, 1, "TryAcquire does not wait")
	require.NoError(t, l.Release(ctx))

	l, err = c.Acquire(ctx, "lost", redlock.WithAutoExtend(true))
	require.NoError(t, err)
	for _, s := range servers {
		s.Miniredis().Del(lockKey("lost"))
	}
	<-l.Done()
	synctest.Wait() // Done closes before the Lost event is reported
	state(redlock.KindLease, 0, 0, "lost behind its back")
	require.ErrorIs(t, l.Release(ctx), redlock.ErrLost)
	state(redlock.KindLease, 0, 0, "the release of a lost holding")

	l, err = c.TryAcquire(ctx, "expires")
	require.NoError(t, err)
	<-l.Done()
	synctest.Wait() // Done closes before the Lost event is reported
	state(redlock.KindLease, 0, 0, "expired")
	require.ErrorIs(t, l.Release(ctx), redlock.ErrExpired)

	l, err = c.Acquire(ctx, "bounded", redlock.WithMaxHold(100*time.Millisecond))
	require.NoError(t, err)
	<-l.Done()
	synctest.Wait() // the Lost event (Done closes before it) and the library's own release
	state(redlock.KindLease, 0, 0, "its maximum hold time")

	m := c.NewMutex("mutex")
	m.Lock()
	assert.False(t, other.NewMutex("mutex").TryLock())
	state(redlock.KindMutex, 0, 1, "a locked Mutex; TryLock does not wait")
	m.Unlock()
	state(redlock.KindMutex, 0, 0, "unlocked")

	rw := c.NewRWMutex("rw")
	rw.RLock()
	rw.RLock()
	state(redlock.KindRWMutexRead, 0, 2, "two readers")
	rw.RUnlock()
	rw.RUnlock()

	m.Lock()
	_, err = c.Acquire(ctx, "closed")
	require.NoError(t, err)
	require.NoError(t, c.Close())
	state(redlock.KindMutex, 0, 0, "released by Close")
	state(redlock.KindLease, 0, 0, "released by Close")
	assert.ErrorIs(t, m.UnlockContext(ctx), redlock.ErrClosed)
	state(redlock.KindMutex, 0, 0, "an Unlock after Close")

	g.mu.Lock()
	defer g.mu.Unlock()
	assert.Zero(t, g.lowWaits, "a wait gauge went below 0")
	assert.Zero(t, g.lowHolds, "a holdings gauge went below 0")
	assert.Equal(t, g.starts, g.waitedStart, "each wait's AcquireEvent has its WaitEvent's Start")
	assert.NotEmpty(t, g.starts)
}
