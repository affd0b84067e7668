package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scriptedNode answers a waiter's attempt n with replies[n-1] (then refuses), n read from
// the attempt's token, so that the calls of two attempts that cross get their own; it is a
// Subscriber whose messages the test sends, from within an attempt, through say.
type scriptedNode struct {
	replies []func(token string) ([]int64, error)

	mu       sync.Mutex
	last     int // the highest attempt called
	callback func(string)
}

func (n *scriptedNode) String() string { return "scripted" }

func (n *scriptedNode) Eval(_ context.Context, s *Script, _ []string, args ...string) ([]int64, error) {
	if s != acquireScript {
		return []int64{0, 0}, nil
	}
	i, err := strconv.Atoi(args[0][strings.LastIndexByte(args[0], '.')+1:])
	if err != nil {
		return nil, fmt.Errorf("token %q names no attempt", args[0])
	}
	n.mu.Lock()
	n.last = max(n.last, i)
	n.mu.Unlock()
	if i--; i < len(n.replies) {
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
// (here: a failed attempt's backoff, full of wake-ups meant for an earlier attempt) are
// forgotten before its next attempt, so that they do not wake that attempt's wait: it
// waits for a wake-up of its own. It fails if AcquireWait stops draining.
func TestDrainForgetsEarlierMessages(t *testing.T) {
	bubble(t, drainForgetsEarlierMessages)
}

func drainForgetsEarlierMessages(t *testing.T) {
	held := func(string) ([]int64, error) { return []int64{0, 60_000}, nil }
	n := &scriptedNode{}
	n.replies = []func(string) ([]int64, error){
		held, // attempt 1: held, the waiter subscribes and tries again at once
		func(string) ([]int64, error) { // attempt 2 fails: the waiter backs off, deaf
			for range 16 {
				n.say("") // wake-ups meant for the earlier attempt
			}
			return nil, errors.New("connection reset")
		},
		held, // attempt 3: held, and no wake-up comes for it
	}
	c, err := NewCluster([]Node{n})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	l := testLock()
	l.TTL, l.NodeTimeout = time.Minute, 10*time.Second // refresh interval: 25 s
	_, err = c.AcquireWait(ctx, l, Backoff{Min: 50 * time.Millisecond, Max: 50 * time.Millisecond})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	n.mu.Lock()
	defer n.mu.Unlock()
	assert.Equal(t, 3, n.last, "an earlier attempt's wake-up woke a later one")

	var none *watch
	none.drain() // a no-op on a nil watch (before the waiter first subscribes)
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

// TestAwaitEndsAtAQuorumOfWakeUps: a waiter's wait ends once wake-ups came from as many
// nodes as it needs (here two), or a grace after the first, whichever comes first; wake-ups
// from one node count once. Before this, the first wake-up ended it, and the woken waiter's
// attempt could find the lock still held where the release had not landed yet.
func TestAwaitEndsAtAQuorumOfWakeUps(t *testing.T) {
	type wake struct {
		node int
		at   time.Duration
	}
	const delay, grace = 10 * time.Second, 5 * time.Millisecond
	for _, tc := range []struct {
		name  string
		wakes []wake
		want  time.Duration
	}{
		{"none", nil, delay},
		{"a quorum", []wake{{0, time.Millisecond}, {2, 3 * time.Millisecond}}, 3 * time.Millisecond},
		{"one node", []wake{{1, time.Millisecond}}, time.Millisecond + grace},
		{"one node twice", []wake{{1, time.Millisecond}, {1, 2 * time.Millisecond}}, time.Millisecond + grace},
		{"the second past the grace", []wake{{0, time.Millisecond}, {1, 10 * time.Millisecond}}, time.Millisecond + grace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				cl, err := NewCluster([]Node{instantNode{0}, instantNode{1}, instantNode{2}})
				require.NoError(t, err)
				t.Cleanup(cl.Close)
				w := &watch{usable: make(chan struct{}), msgs: make(chan message, 8)}
				close(w.usable)
				w.active.Store(true)
				go func() {
					start := time.Now()
					for _, m := range tc.wakes {
						time.Sleep(m.at - time.Since(start))
						w.msgs <- message{node: m.node}
					}
				}()
				start := time.Now()
				cl.await(context.Background(), w, delay, true, 2, grace)
				assert.Equal(t, tc.want, time.Since(start))
			})
		})
	}
}
