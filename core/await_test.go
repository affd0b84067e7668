package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseHandover(t *testing.T) {
	for _, c := range []struct {
		payload string
		want    handover
		ok      bool
	}{
		{"w.3 0", handover{token: "w.3", permit: -1}, true},
		{"w.3 1700000000000001", handover{token: "w.3", fence: 1700000000000001, permit: -1}, true},
		{"w.3 12 u", handover{token: "w.3", fence: 12, unguarded: true, permit: -1}, true},
		{"w.3 12 #0", handover{token: "w.3", fence: 12, permit: 0}, true}, // a semaphore's permit 0
		{"w.3 12 #7 u", handover{token: "w.3", fence: 12, unguarded: true, permit: 7}, true},
		{"w.3 12 #", handover{}, false},   // no permit
		{"w.3 12 #-1", handover{}, false}, // a negative permit
		{"w.3 12 #1 x", handover{}, false},
		{"", handover{}, false},         // a plain wake-up
		{"w.3", handover{}, false},      // no fence
		{" 12", handover{}, false},      // no token
		{"w.3 -1", handover{}, false},   // a negative fence
		{"w.3 x", handover{}, false},    // not a number
		{"w.3 12 x", handover{}, false}, // an unknown flag
	} {
		got, ok := parseHandover(c.payload)
		assert.Equal(t, c.ok, ok, "%q", c.payload)
		assert.Equal(t, c.want, got, "%q", c.payload)
	}
}

// TestAwaitTakesOnlyFreshHandovers: a waiter takes the lock from hand-over messages only
// once a quorum of the nodes that refused its latest attempt sent one for that attempt's
// token; messages for an earlier attempt, repeats, and messages from nodes whose refusal
// it did not see count for nothing; a plain wake-up ends the wait so that it calls again;
// and a hand-over with less than half the TTL left is not taken.
func TestAwaitTakesOnlyFreshHandovers(t *testing.T) {
	refused := []bool{true, true, false, true, true} // node 2's answer was not seen
	type step struct {
		m     message
		taken bool // the wait ends with the lock after this message
	}
	for _, c := range []struct {
		name  string
		age   time.Duration // how long ago the attempt started
		steps []step
		ends  bool // the wait ends (without the lock) after the last message
	}{
		{"a quorum of fresh ones", 0, []step{{m: message{0, "w.2 5"}}, {m: message{1, "w.2 9"}}, {m: message{3, "w.2 7"}, taken: true}}, true},
		{"stale, repeated and unseen ones", 0, []step{
			{m: message{0, "w.1 5"}}, {m: message{1, "w.1 5"}}, {m: message{3, "w.1 5"}}, // an earlier attempt's
			{m: message{0, "w.2 5"}}, {m: message{0, "w.2 5"}}, // a repeat
			{m: message{2, "w.2 5"}}, // a node whose refusal it did not see
			{m: message{4, "v.2 5"}}, // another waiter's
			{m: message{1, "w.2 9"}}, {m: message{4, "w.2 7"}, taken: true},
		}, true},
		{"a plain wake-up", 0, []step{{m: message{0, "w.2 5"}}, {m: message{1, ""}}}, true},
		{"too little TTL left", 3 * time.Second, []step{{m: message{0, "w.2 5"}}, {m: message{1, "w.2 5"}}, {m: message{3, "w.2 5"}}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cl, _ := cluster(t, grants(1), grants(1), grants(1), grants(1), grants(1))
				l := claimOf(testLock()) // TTL 5 s
				l.Fence, l.token, l.NodeTimeout = false, "w.2", time.Minute
				w := activeWatch()
				o := outcome{start: time.Now().Add(-c.age), refused: refused, handers: 4}
				type result struct {
					g  Grant
					ok bool
				}
				done := make(chan result, 1)
				go func() { g, ok := cl.await(context.Background(), l, w, o, time.Minute, true); done <- result{g, ok} }()
				for i, s := range c.steps {
					w.msgs <- s.m
					synctest.Wait()
					last := i == len(c.steps)-1
					select {
					case r := <-done:
						require.True(t, s.taken || last, "the wait ended after message %d", i)
						require.Equal(t, s.taken, r.ok, "after message %d", i)
						if r.ok {
							assert.Equal(t, uint64(9), r.g.Fence, "the fence is not the largest handed over")
							assert.Equal(t, o.start, r.g.Start)
							assert.Equal(t, o.start.Add(l.TTL-l.Drift()), r.g.Until)
						}
						return
					default:
						require.False(t, s.taken || last, "the wait did not end after message %d", i)
					}
				}
			})
		})
	}
}

// TestAwaitCallsAgainWhenAQuorumDoesNotFollow: after a first hand-over, a waiter waits for
// the rest of the quorum about twice its attempt's time (at least 2ms, at most a node
// timeout), not a whole node timeout, before it calls again: the other nodes may have
// handed the lock to other waiters, and then no one would hold it while everyone waits.
func TestAwaitCallsAgainWhenAQuorumDoesNotFollow(t *testing.T) {
	for _, c := range []struct {
		name        string
		took        time.Duration // the attempt's time
		nodeTimeout time.Duration
		wait        time.Duration // the wait after the lone hand-over
	}{
		{"a fast attempt: 2ms", 100 * time.Microsecond, 5 * time.Second, 2 * time.Millisecond},
		{"twice the attempt", 300 * time.Millisecond, 5 * time.Second, 600 * time.Millisecond},
		{"at most a node timeout", 10 * time.Second, 200 * time.Millisecond, 200 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cl, _ := cluster(t, grants(1), grants(1), grants(1))
				l := claimOf(testLock())
				l.Fence, l.token, l.NodeTimeout = false, "w.2", c.nodeTimeout
				w := activeWatch()
				w.msgs <- message{0, "w.2 0"}
				start := time.Now()
				_, taken := cl.await(context.Background(), l, w, outcome{start: start, took: c.took, refused: []bool{true, true, true}, handers: 3}, time.Minute, true)
				assert.False(t, taken)
				assert.Equal(t, c.wait, time.Since(start), "it did not wait for the rest of the quorum as long as it should")
			})
		})
	}
}

// TestHandOverThatNoQuorumCanFollowCallsAgainAtOnce: a waiter handed the lock by fewer nodes
// than a quorum waits for the rest only if enough nodes may still hand it over: those that
// refused its attempt, and those that had not answered. When the others granted it (and it
// let go) or failed, nothing there hands it over, and it calls again at once (it used to
// wait about twice its attempt's time: under an asymmetric partition, where a release
// reaches only some of a waiter's nodes, that wait came after most hand-overs).
func TestHandOverThatNoQuorumCanFollowCallsAgainAtOnce(t *testing.T) {
	bubble(t, handOverThatNoQuorumCanFollowCallsAgainAtOnce)
}

func handOverThatNoQuorumCanFollowCallsAgainAtOnce(t *testing.T) {
	// The attempt's outcome counts as handers the refusals and the nodes not heard.
	cl, _ := cluster(t, grants(1), held(60_000), failing)
	l := claimOf(testLock())
	l.Fence, l.waiter, l.token = false, "w", "w.1"
	_, o, err := cl.acquire(context.Background(), l)
	require.ErrorIs(t, err, ErrNoQuorum)
	assert.Equal(t, 1, o.handers, "a granting node or a failing one counted as one that may hand over")

	slow := func(ctx context.Context, s *Script) ([]int64, error) {
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
		}
		return held(60_000)(ctx, s)
	}
	cl, _ = cluster(t, held(60_000), held(60_000), slow)
	l = claimOf(testLock())
	l.Fence, l.waiter, l.token = false, "w", "w.1"
	_, o, err = cl.acquire(context.Background(), l)
	require.ErrorIs(t, err, ErrHeld)
	assert.Equal(t, 3, o.handers, "the refusals and the node not heard yet")

	// await: one hand-over, and no quorum can follow: it returns at once, where twice the
	// attempt's time would be 600ms.
	w := activeWatch()
	w.msgs <- message{1, "w.2 0"}
	l.token, l.NodeTimeout = "w.2", 5*time.Second
	start := time.Now()
	_, taken := cl.await(context.Background(), l, w, outcome{start: start, took: 300 * time.Millisecond, refused: []bool{false, true, false}, handers: 1}, time.Minute, true)
	assert.False(t, taken)
	assert.Equal(t, time.Duration(0), time.Since(start), "it waited for hand-overs that cannot come")
}

// scriptedNode answers the acquire script's attempts in turn (then refuses), and is a
// Subscriber whose messages the test sends, from within an attempt, through say.
type scriptedNode struct {
	replies []func(token string) ([]int64, error)

	mu       sync.Mutex
	attempt  int
	callback func(string)
}

func (n *scriptedNode) String() string { return "scripted" }

func (n *scriptedNode) Eval(_ context.Context, s *Script, _ []string, args ...string) ([]int64, error) {
	if s != acquireScript {
		return []int64{0, 0}, nil
	}
	n.mu.Lock()
	i := n.attempt
	n.attempt++
	n.mu.Unlock()
	if i < len(n.replies) {
		vals, err := n.replies[i](args[0])
		return asked(s, args, vals), err
	}
	return asked(s, args, []int64{0, 60_000}), nil
}

func (n *scriptedNode) Subscribe(_ context.Context, _ string, onMessage func(string)) (func(), error) {
	n.mu.Lock()
	n.callback = onMessage
	n.mu.Unlock()
	return func() {}, nil
}

func (n *scriptedNode) say(payload string) {
	n.mu.Lock()
	f := n.callback
	n.mu.Unlock()
	f(payload)
}

// TestDrainForgetsEarlierMessages: messages that reach a waiter while it is not listening
// (here: a failed attempt's backoff, full of an earlier attempt's hand-overs) are
// forgotten before its next attempt, so that they do not fill its buffer and crowd out
// that attempt's hand-over, which it then takes without calling again. It fails if
// AcquireWait stops draining.
func TestDrainForgetsEarlierMessages(t *testing.T) {
	bubble(t, drainForgetsEarlierMessages)
}

func drainForgetsEarlierMessages(t *testing.T) {
	held := func(string) ([]int64, error) { return []int64{0, 60_000}, nil }
	n := &scriptedNode{}
	n.replies = []func(string) ([]int64, error){
		held, // attempt 1: held, the waiter subscribes and tries again at once
		func(token string) ([]int64, error) { // attempt 2 fails: the waiter backs off, deaf
			for range 16 {
				n.say(strings.TrimSuffix(token, ".2") + ".1 0") // an earlier attempt's hand-overs
			}
			return nil, errors.New("connection reset")
		},
		func(token string) ([]int64, error) { // attempt 3: refused, and handed over at once
			n.say(token + " 0") // before the reply: it waits in the buffer
			return []int64{0, 60_000}, nil
		},
	}
	c, err := NewCluster([]Node{n})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	l := testLock()
	l.TTL, l.NodeTimeout = time.Minute, 10*time.Second // refresh interval: 25 s
	start := time.Now()
	g, err := c.AcquireWait(ctx, l, Backoff{Min: 50 * time.Millisecond, Max: 50 * time.Millisecond})
	require.NoError(t, err, "the hand-over was crowded out")
	assert.Equal(t, 3, g.Attempts)
	// The third attempt, after one backoff (jittered within its upper half), took the
	// hand-over at once.
	assert.GreaterOrEqual(t, time.Since(start), 25*time.Millisecond)
	assert.LessOrEqual(t, time.Since(start), 50*time.Millisecond)

	var none *watch
	none.drain() // a no-op on a nil watch (before the waiter first subscribes)
}

// activeWatch returns a watch whose subscriptions all succeeded, and whose messages a test
// sends on w.msgs.
func activeWatch() *watch {
	w := &watch{usable: make(chan struct{}), ready: make(chan struct{}), msgs: make(chan message, 16)}
	w.active.Store(true)
	close(w.usable)
	close(w.ready)
	return w
}

// slowSubscriber is a Subscriber whose Subscribe confirms once gate is closed (or fails at
// its context's end), and then delivers what say sends.
type slowSubscriber struct {
	fakeNode
	gate   chan struct{}
	mu     sync.Mutex
	say    func(string)
	unsubs int
}

func (n *slowSubscriber) Subscribe(ctx context.Context, _ string, onMessage func(string)) (func(), error) {
	select {
	case <-n.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	n.mu.Lock()
	n.say = onMessage
	n.mu.Unlock()
	return func() { n.mu.Lock(); n.unsubs++; n.mu.Unlock() }, nil
}

// TestWatchWaitsForAQuorumOfSubscriptions: a waiter's subscription returns once a quorum of
// the nodes confirmed and the rest had twice as long as the quorum took, without waiting
// for a node that does not answer; a node that confirms within that grace is subscribed
// when it returns; one that confirms later delivers its messages from then on; stop
// unsubscribes everywhere, the late ones too.
func TestWatchWaitsForAQuorumOfSubscriptions(t *testing.T) {
	bubble(t, watchWaitsForAQuorumOfSubscriptions)
}

func watchWaitsForAQuorumOfSubscriptions(t *testing.T) {
	nodes := make([]Node, 5)
	subs := make([]*slowSubscriber, 5)
	for i := range subs {
		subs[i] = &slowSubscriber{fakeNode: fakeNode{name: fmt.Sprintf("node%d", i)}, gate: make(chan struct{})}
		nodes[i] = subs[i]
	}
	c, err := NewCluster(nodes)
	require.NoError(t, err)
	for _, s := range subs[:2] {
		close(s.gate)
	}
	ctx := context.Background()
	returned := make(chan *watch, 1)
	start := time.Now()
	go func() { returned <- c.watch(ctx, "ch", time.Minute) }()
	time.Sleep(50 * time.Millisecond)
	synctest.Wait()
	select {
	case <-returned:
		t.Fatal("watch returned with 2 of 5 subscriptions confirmed")
	default:
	}
	// The third makes a quorum, after 50 ms: the rest get 100 ms, and the fourth confirms
	// within them; the watch returns when they are over.
	close(subs[2].gate)
	close(subs[3].gate)
	w := <-returned
	assert.Equal(t, 150*time.Millisecond, time.Since(start), "watch did not give the rest twice the quorum's time")
	assert.True(t, w.isActive())
	subs[3].mu.Lock()
	assert.NotNil(t, subs[3].say, "a node that confirmed within the grace was not waited for")
	subs[3].mu.Unlock()
	select {
	case <-w.ready:
		t.Fatal("ready before every node answered")
	default:
	}

	close(subs[4].gate) // a late confirmation delivers from then on
	synctest.Wait()
	subs[4].mu.Lock()
	require.NotNil(t, subs[4].say, "the late confirmation was not taken")
	subs[4].say("late")
	subs[4].mu.Unlock()
	synctest.Wait()
	select {
	case m := <-w.msgs:
		assert.Equal(t, message{node: 4, payload: "late"}, m)
	default:
		t.Fatal("no message from the node that confirmed late")
	}

	w.stop()
	for i, s := range subs {
		s.mu.Lock()
		assert.Equal(t, 1, s.unsubs, "node %d", i)
		s.mu.Unlock()
	}

	// No node answers in time: the watch returns at the timeout, inactive.
	c2, err := NewCluster([]Node{
		&slowSubscriber{fakeNode: fakeNode{name: "a"}, gate: make(chan struct{})},
		&slowSubscriber{fakeNode: fakeNode{name: "b"}, gate: make(chan struct{})},
		&slowSubscriber{fakeNode: fakeNode{name: "c"}, gate: make(chan struct{})},
	})
	require.NoError(t, err)
	start = time.Now()
	w = c2.watch(ctx, "ch", 20*time.Millisecond)
	assert.Equal(t, 20*time.Millisecond, time.Since(start))
	assert.False(t, w.isActive())
}

// TestSplitVotePauseEndsAtAWakeUp: after a split vote a waiter pauses a random time of up
// to twice its attempt's (here up to 600 ms), and a node that wakes it meanwhile ends the
// pause: the lock is free there, and it is first in that node's queue. Each round fails
// without it 3 times in 4.
func TestSplitVotePauseEndsAtAWakeUp(t *testing.T) {
	bubble(t, splitVotePauseEndsAtAWakeUp)
}

func splitVotePauseEndsAtAWakeUp(t *testing.T) {
	held := func(string) ([]int64, error) { return []int64{0, 60_000}, nil }
	yes := func(string) ([]int64, error) { return []int64{1, 0}, nil }
	slow := func(vals []int64, err error) func(string) ([]int64, error) {
		return func(string) ([]int64, error) { time.Sleep(300 * time.Millisecond); return vals, err }
	}
	for round := range 3 {
		nodes := []*scriptedNode{{}, {}, {}}
		woken := make(chan time.Time, 1)
		nodes[0].replies = []func(string) ([]int64, error){held, slow([]int64{1, 0}, nil), yes}
		nodes[1].replies = []func(string) ([]int64, error){held, func(token string) ([]int64, error) {
			vals, _ := slow([]int64{0, 60_000}, nil)(token)
			go func() { time.Sleep(50 * time.Millisecond); woken <- time.Now(); nodes[1].say("") }()
			return vals, nil
		}, yes}
		nodes[2].replies = []func(string) ([]int64, error){held, func(string) ([]int64, error) { return nil, errors.New("connection reset") }, yes}
		c, err := NewCluster([]Node{nodes[0], nodes[1], nodes[2]})
		require.NoError(t, err)
		l := testLock()
		l.Fence, l.NodeTimeout = false, 2*time.Second // refresh interval: 5 s
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		g, err := c.AcquireWait(ctx, l, Backoff{Min: time.Second, Max: time.Second})
		took := time.Now()
		cancel()
		require.NoError(t, err)
		require.Equal(t, 3, g.Attempts, "round %d", round)
		// The wake-up comes 350 ms after the start; a pause that had not ended by then ends
		// at that instant.
		assert.False(t, took.After(<-woken), "round %d: the pause went on after the wake-up", round)
	}
}
