package core

import (
	"context"
	"errors"
	"fmt"
	"net"

	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeNode answers each script through a function, and records the scripts it ran.
type fakeNode struct {
	name string
	eval func(ctx context.Context, s *Script) ([]int64, error)

	mu     sync.Mutex
	ran    []string
	tokens []string // args[0] of each call
}

func (n *fakeNode) Eval(ctx context.Context, s *Script, keys []string, args ...string) ([]int64, error) {
	n.mu.Lock()
	n.ran = append(n.ran, s.Name())
	n.tokens = append(n.tokens, args[0])
	n.mu.Unlock()
	vals, err := n.eval(ctx, s)
	return asked(s, args, vals), err
}

// asked returns vals as a server that reports no run_id replies to an acquisition that asks
// it to say which server it is (see acquire.lua): with a third element. The fake nodes of
// these tests are all distinct servers.
func asked(s *Script, args []string, vals []int64) []int64 {
	if s != acquireScript || len(args) < 8 || args[7] != "1" || vals == nil || len(vals) >= 3 {
		return vals
	}
	out := make([]int64, 3)
	copy(out, vals)
	return out
}

func (n *fakeNode) String() string { return n.name }

func (n *fakeNode) scripts() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.ran...)
}

// grants answers yes to every script, with fence as the counter.
func grants(fence int64) func(context.Context, *Script) ([]int64, error) {
	return func(context.Context, *Script) ([]int64, error) { return []int64{1, fence}, nil }
}

// hangs blocks until ctx ends, like a node that accepted the connection and never answers.
func hangs(ctx context.Context, _ *Script) ([]int64, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// deaf ignores ctx and answers only after d.
func deaf(d time.Duration) func(context.Context, *Script) ([]int64, error) {
	return func(context.Context, *Script) ([]int64, error) {
		time.Sleep(d)
		return []int64{1, 1}, nil
	}
}

func held(pttl int64) func(context.Context, *Script) ([]int64, error) {
	return func(_ context.Context, s *Script) ([]int64, error) {
		if s == acquireScript {
			return []int64{0, pttl}, nil
		}
		return []int64{0, 0}, nil
	}
}

func failing(context.Context, *Script) ([]int64, error) { return nil, errors.New("connection refused") }

func cluster(t *testing.T, evals ...func(context.Context, *Script) ([]int64, error)) (*Cluster, []*fakeNode) {
	t.Helper()
	fakes := make([]*fakeNode, len(evals))
	nodes := make([]Node, len(evals))
	for i, e := range evals {
		fakes[i] = &fakeNode{name: fmt.Sprintf("node%d", i), eval: e}
		nodes[i] = fakes[i]
	}
	c, err := NewCluster(nodes)
	require.NoError(t, err)
	return c, fakes
}

func testLock() *Lock {
	return &Lock{Keys: NewKeys("t:", "x"), TTL: 5 * time.Second, NodeTimeout: 100 * time.Millisecond, DriftFactor: 0.01, Fence: true}
}

// testHeld returns l as held under a new token, for Extend and Release on fake nodes.
func testHeld(l *Lock) *Held { return HeldAs(l, NewToken(), "", 0) }

func TestNewClusterRejectsBadNodes(t *testing.T) {
	var typedNil *fakeNode
	for _, tc := range []struct {
		name  string
		nodes []Node
		want  string
	}{
		{"none", nil, "no nodes"},
		{"nil interface", []Node{&fakeNode{}, nil}, "node 1 is nil"},
		{"nil pointer", []Node{typedNil}, "node 0 is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewCluster(tc.nodes)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestQuorum(t *testing.T) {
	for n, q := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 7: 4} {
		evals := make([]func(context.Context, *Script) ([]int64, error), n)
		for i := range evals {
			evals[i] = grants(1)
		}
		c, _ := cluster(t, evals...)
		assert.Equal(t, q, c.Quorum(), "N=%d", n)
	}
}

func TestAcquireDecidesWithoutWaitingForHungNodes(t *testing.T) {
	bubble(t, func(t *testing.T) {
		c, _ := cluster(t, grants(1), hangs, grants(2), hangs, grants(3))
		l := testLock()
		l.NodeTimeout = 2 * time.Second
		// The first acquisition hears every node out, to learn which server each reaches
		// (see identity): it waits for the hung nodes once, which are suspected from then on.
		start := time.Now()
		_, err := c.Acquire(context.Background(), l)
		require.NoError(t, err)
		// The calls' deadline is shared per millisecond: at most one later.
		assert.GreaterOrEqual(t, time.Since(start), l.NodeTimeout, "the first acquisition did not hear every node out")
		assert.LessOrEqual(t, time.Since(start), l.NodeTimeout+time.Millisecond, "the first acquisition waited past the node timeout")
		synctest.Wait() // the hung nodes' failures, read by the calls' goroutines, are recorded
		start = time.Now()
		g, err := c.Acquire(context.Background(), testLock())
		require.NoError(t, err)
		assert.Zero(t, time.Since(start), "acquire waited for a hung node")
		// Fence raise is a second round: it also must not wait for the hung nodes.
		assert.Equal(t, uint64(3), g.Fence)
	})
}

func TestNodeIgnoringContextIsBoundedByTimeout(t *testing.T) {
	bubble(t, func(t *testing.T) {
		c, _ := cluster(t, grants(1), deaf(3*time.Second), deaf(3*time.Second))
		l := testLock()
		start := time.Now()
		_, err := c.Acquire(context.Background(), l)
		var qe *QuorumError
		require.ErrorAs(t, err, &qe)
		assert.True(t, errors.Is(err, ErrNodeTimeout))
		// Calls that start in one millisecond share a deadline: the node timeout after its end.
		assert.Equal(t, l.NodeTimeout+time.Millisecond, time.Since(start), "the attempt did not end at its node timeout")
	})
}

func TestFailedAcquireReleasesEveryNodeThatMayHoldIt(t *testing.T) {
	bubble(t, func(t *testing.T) {
		late := make(chan struct{})
		slow := func(ctx context.Context, s *Script) ([]int64, error) {
			if s == acquireScript {
				<-late // answers only after the attempt was decided
			}
			return []int64{1, 7}, nil
		}
		c, fakes := cluster(t, grants(1), held(500), held(500), failing, slow)
		_, err := c.Acquire(context.Background(), testLock())
		// 2 refused, 1 failed, 1 pending: a quorum of 3 is out of reach, but the no-votes alone
		// do not make it impossible, so this is no quorum rather than held.
		require.ErrorIs(t, err, ErrNoQuorum)
		assert.NotErrorIs(t, err, ErrHeld)
		released := func(i int) func() bool {
			return func() bool { return len(fakes[i].scripts()) == 2 }
		}
		// Nodes that answered before the decision are released before Acquire returns; those
		// that answered after it, in the background: either way, every one is released.
		synctest.Wait()
		require.True(t, released(0)(), "granted node not released")
		require.True(t, released(3)(), "a failed request may have landed: not released")
		require.False(t, released(4)(), "the straggler was released before it answered")
		close(late)
		synctest.Wait()
		require.True(t, released(4)(), "the straggler was not released after it answered")
		for _, i := range []int{0, 3, 4} {
			assert.Equal(t, []string{"acquire", "release"}, fakes[i].scripts())
		}
		assert.Equal(t, []string{"acquire"}, fakes[1].scripts(), "a node that refused needs no release")
	})
}

func TestHeldReportsTheHoldersRemainingTime(t *testing.T) {
	bubble(t, func(t *testing.T) {
		c, fakes := cluster(t, held(300), held(700), grants(1))
		_, o, err := c.acquire(context.Background(), claimOf(testLock()))
		require.ErrorIs(t, err, ErrHeld)
		assert.NotErrorIs(t, err, ErrNoQuorum)
		assert.Equal(t, 700*time.Millisecond, o.wait)
		assert.Contains(t, err.Error(), "700ms")
		synctest.Wait()
		require.Len(t, fakes[2].scripts(), 2, "the node that granted was not released")
	})
}

// A split vote's pause, and the wait for the rest of a hand-over, follow the time the
// attempt took to hear the nodes that answered: a node that timed out does not stretch them.
func TestAttemptTimeLeavesOutNodesThatFailed(t *testing.T) {
	bubble(t, func(t *testing.T) {
		// The nodes that answer take 10 ms: the attempt's time is that, not the 300 ms
		// node timeout. (At zero, the attempt's time would fall back to its whole length:
		// acquire's took == 0 means that no node answered.)
		rtt := func(f func(context.Context, *Script) ([]int64, error)) func(context.Context, *Script) ([]int64, error) {
			return func(ctx context.Context, s *Script) ([]int64, error) {
				time.Sleep(10 * time.Millisecond)
				return f(ctx, s)
			}
		}
		c, _ := cluster(t, rtt(grants(1)), rtt(held(300)), hangs)
		l := testLock()
		l.NodeTimeout = 300 * time.Millisecond
		start := time.Now()
		_, o, err := c.acquire(context.Background(), claimOf(l))
		require.ErrorIs(t, err, ErrNoQuorum)
		require.True(t, o.split, "one yes and one refusal: a split vote")
		require.GreaterOrEqual(t, time.Since(start), l.NodeTimeout, "the attempt did not wait for the node that could still decide it")
		assert.Equal(t, 10*time.Millisecond, o.took, "the attempt's time counts the node that timed out")
	})
}

func TestFenceIsRaisedOnlyForFencedLocksOverManyNodes(t *testing.T) {
	bubble(t, func(t *testing.T) {
		c, fakes := cluster(t, grants(5), grants(9), hangs)
		l := testLock()
		g, err := c.Acquire(context.Background(), l)
		require.NoError(t, err)
		assert.Equal(t, uint64(9), g.Fence)
		synctest.Wait()
		assert.Equal(t, []string{"acquire", "extend"}, fakes[0].scripts(), "the raise is an extension with the fence")

		c, fakes = cluster(t, grants(5), grants(9), grants(7))
		l.Fence = false
		_, err = c.Acquire(context.Background(), l)
		require.NoError(t, err)
		synctest.Wait() // a raise, if any, would have been sent at once
		assert.Equal(t, []string{"acquire"}, fakes[0].scripts())

		c, fakes = cluster(t, grants(5))
		l.Fence = true
		_, err = c.Acquire(context.Background(), l)
		require.NoError(t, err)
		assert.Equal(t, []string{"acquire"}, fakes[0].scripts(), "N=1 needs no raise")
	})
}

func TestFailedRaiseFailsTheAcquisition(t *testing.T) {
	bubble(t, func(t *testing.T) {
		// Every node grants a different counter, so that no two agree and the raise is needed
		// whichever replies come first.
		raiseRefused := func(fence int64) func(context.Context, *Script) ([]int64, error) {
			return func(_ context.Context, s *Script) ([]int64, error) {
				if s == extendScript {
					return []int64{0}, nil
				}
				return []int64{1, fence}, nil
			}
		}
		c, fakes := cluster(t, grants(1), raiseRefused(3), raiseRefused(4))
		_, err := c.Acquire(context.Background(), testLock())
		var qe *QuorumError
		require.ErrorAs(t, err, &qe)
		assert.Equal(t, "raise", qe.Op)
		for _, n := range fakes[1:] {
			synctest.Wait()
			// A straggler's acquire and the raise race on their way to a node; the release follows both.
			assert.ElementsMatch(t, []string{"acquire", "extend", "release"}, n.scripts())
		}
	})
}

func TestValidity(t *testing.T) {
	bubble(t, func(t *testing.T) {
		c, _ := cluster(t, grants(1))
		l := testLock()
		before := time.Now()
		g, err := c.Acquire(context.Background(), l)
		require.NoError(t, err)
		drift := time.Duration(float64(l.TTL)*0.01) + 2*time.Millisecond
		assert.Equal(t, before, g.Start)
		assert.Equal(t, g.Start.Add(l.TTL-drift), g.Until)

		slowYes := func(context.Context, *Script) ([]int64, error) {
			time.Sleep(60 * time.Millisecond)
			return []int64{1, 1}, nil
		}
		c, fakes := cluster(t, slowYes)
		l.TTL, l.NodeTimeout = 50*time.Millisecond, 200*time.Millisecond
		_, err = c.Acquire(context.Background(), l)
		require.ErrorIs(t, err, ErrExpired, "an attempt slower than the TTL was granted")
		assert.Equal(t, []string{"acquire", "release"}, fakes[0].scripts())
	})
}

func TestCancelledContext(t *testing.T) {
	bubble(t, func(t *testing.T) {
		c, fakes := cluster(t, grants(1))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := c.Acquire(ctx, testLock())
		require.ErrorIs(t, err, context.Canceled)
		assert.Empty(t, fakes[0].scripts())

		c, _ = cluster(t, hangs, hangs, hangs)
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		l := testLock()
		l.NodeTimeout = time.Second
		start := time.Now()
		_, err = c.Acquire(ctx, l)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, ErrNodeTimeout)
		assert.Equal(t, 30*time.Millisecond, time.Since(start), "the attempt did not end with its context")
	})
}

func TestAcquireWaitRetriesUntilFree(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var calls atomic.Int32
		c, _ := cluster(t, func(_ context.Context, s *Script) ([]int64, error) {
			if s == acquireScript && calls.Add(1) < 3 {
				return []int64{0, 20}, nil
			}
			return []int64{1, 4}, nil
		})
		h, err := c.AcquireWait(context.Background(), testLock(), Backoff{Min: time.Millisecond, Max: time.Second})
		require.NoError(t, err)
		assert.Equal(t, uint64(4), h.Fence)
		assert.Equal(t, int32(3), calls.Load())
		assert.True(t, strings.HasSuffix(h.Token(), ".3"), "each attempt uses a token of its own: %s", h.Token())
	})
}

// TestStragglerIsReleasedWithItsOwnToken: a straggler of a failed attempt is released with
// that attempt's token, not the token of the attempt that follows.
func TestStragglerIsReleasedWithItsOwnToken(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var first atomic.Bool
		slowFirst := func(_ context.Context, s *Script) ([]int64, error) {
			if s == acquireScript && !first.Swap(true) {
				time.Sleep(50 * time.Millisecond)
			}
			return []int64{1, 1}, nil
		}
		var refusals atomic.Int32
		refuseTwice := func(_ context.Context, s *Script) ([]int64, error) {
			if s == acquireScript && refusals.Add(1) <= 2 {
				return []int64{0, 5}, nil
			}
			return []int64{1, 1}, nil
		}
		c, fakes := cluster(t, refuseTwice, refuseTwice, slowFirst)
		_, err := c.AcquireWait(context.Background(), testLock(), Backoff{Min: time.Millisecond, Max: time.Millisecond})
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond) // the straggler answers
		synctest.Wait()
		require.True(t, func() bool {
			fakes[2].mu.Lock()
			defer fakes[2].mu.Unlock()
			for i, name := range fakes[2].ran {
				if name == "release" {
					return fakes[2].tokens[i] == fakes[2].tokens[0]
				}
			}
			return false
		}(), "the straggler was not released with its own token")
	})
}

// Release returns once a quorum let go and the other nodes had twice as long as that took:
// it waits for a node about as fast as the quorum, not for one that does not answer.
func TestReleaseWaitsForNodesAboutAsFastAsTheQuorum(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var late atomic.Bool // the node slower than the quorum answered the release
		answers := func(d time.Duration, done *atomic.Bool) func(context.Context, *Script) ([]int64, error) {
			return func(ctx context.Context, s *Script) ([]int64, error) {
				if s == acquireScript {
					return []int64{1, 1}, nil
				}
				time.Sleep(d)
				if done != nil {
					done.Store(true)
				}
				return []int64{1, 0}, nil
			}
		}
		c, _ := cluster(t, answers(50*time.Millisecond, nil), answers(50*time.Millisecond, nil), answers(50*time.Millisecond, nil),
			answers(60*time.Millisecond, &late), hangs)
		l := testLock()
		l.NodeTimeout = 2 * time.Second
		h := testHeld(l)
		start := time.Now()
		require.NoError(t, c.Release(context.Background(), h))
		assert.True(t, late.Load(), "release did not wait for a node 10ms slower than the quorum")
		// The quorum let go at 50 ms; the rest had until 150 ms.
		assert.Equal(t, 150*time.Millisecond, time.Since(start), "release waited for the node that does not answer")
	})
}

func TestAcquireWaitStopsWithContext(t *testing.T) {
	bubble(t, func(t *testing.T) {
		c, _ := cluster(t, held(10_000))
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.AcquireWait(ctx, testLock(), Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, ErrHeld)
		assert.Equal(t, 50*time.Millisecond, time.Since(start), "the wait did not end with its context")
	})
}

func TestExtendAndRelease(t *testing.T) {
	bubble(t, func(t *testing.T) {
		c, fakes := cluster(t, grants(1), hangs, grants(1))
		l := testLock()
		l.NodeTimeout = 400 * time.Millisecond
		h := testHeld(l)
		h.holds = 1<<3 - 1 // granted by every node: the hung node is sent no fence to take the lock with
		start := time.Now()
		until, err := c.Extend(context.Background(), h)
		require.NoError(t, err)
		assert.True(t, until.After(start))
		assert.Equal(t, time.Duration(0), time.Since(start), "extend waited for a hung node")
		// Release returns once a quorum let go, without waiting for the hung node, whose call
		// goes on in the background.
		start = time.Now()
		require.NoError(t, c.Release(context.Background(), h))
		assert.Equal(t, releaseGrace, time.Since(start), "release waited for a hung node longer than the grace of the others")
		for _, i := range []int{0, 2} {
			assert.Equal(t, []string{"extend", "release"}, fakes[i].scripts(), "node %d was not released by the time Release returned", i)
		}
		synctest.Wait()
		require.Equal(t, []string{"extend", "release"}, fakes[1].scripts(), "the hung node was not called")
		// That call is background work: Wait (which a Client's Close runs before it closes
		// the nodes) waits for it, until its deadline.
		waited := time.Now()
		c.Wait()
		assert.InDelta(t, l.NodeTimeout-releaseGrace, time.Since(waited), float64(2*time.Millisecond), "Wait did not wait for the release's call to the hung node")

		c, _ = cluster(t, held(1), held(1), grants(1))
		_, err = c.Extend(context.Background(), h)
		require.ErrorIs(t, err, ErrNotHeld)
		require.ErrorIs(t, c.Release(context.Background(), h), ErrNotHeld)

		c, _ = cluster(t, failing, failing, grants(1))
		_, err = c.Extend(context.Background(), h)
		require.ErrorIs(t, err, ErrNoQuorum)
		err = c.Release(context.Background(), h)
		require.ErrorIs(t, err, ErrNoQuorum)
		assert.Contains(t, err.Error(), "node0: connection refused")
		assert.Contains(t, err.Error(), "node1: connection refused")
	})
}

func TestReleaseSurvivesCancelledContext(t *testing.T) {
	c, fakes := cluster(t, grants(1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, c.Release(ctx, testHeld(testLock())))
	assert.Equal(t, []string{"release"}, fakes[0].scripts())
}

func TestBackoff(t *testing.T) {
	b := Backoff{Min: 10 * time.Millisecond, Max: 80 * time.Millisecond}
	for attempt, want := range []time.Duration{10, 20, 40, 80, 80, 80} {
		want *= time.Millisecond
		for range 50 {
			d := b.Delay(attempt, 0)
			assert.GreaterOrEqual(t, d, want/2, "attempt %d", attempt)
			assert.LessOrEqual(t, d, want, "attempt %d", attempt)
		}
	}
	assert.Equal(t, 3*time.Millisecond, b.Delay(5, 3*time.Millisecond), "waited past the holder's TTL")
	assert.LessOrEqual(t, Backoff{Min: time.Second, Max: time.Hour}.Delay(1000, 0), time.Hour)
}

func TestKeysShareOneHashSlot(t *testing.T) {
	k := NewKeys("redlock:", "jobs:nightly")
	want := Keys{
		Name:    "jobs:nightly",
		Lock:    "redlock:{jobs:nightly}",
		Fence:   "redlock:{jobs:nightly}:fence",
		Queue:   "redlock:{jobs:nightly}:queue",
		Alive:   "redlock:{jobs:nightly}:alive",
		Waiters: "redlock:{jobs:nightly}:waiters",
		Readers: "redlock:{jobs:nightly}:readers",
		Leader:  "redlock:{jobs:nightly}:leader",
		Channel: "redlock:{jobs:nightly}:released",
	}
	made := k
	made.scriptKeys = nil
	assert.Equal(t, want, made)
	acquire := []string{want.Lock, want.Fence, want.Queue, want.Alive, want.Waiters, want.Readers}
	release := acquire
	assert.Equal(t, acquire, k.ScriptKeys())
	// core's calls share the slices NewKeys made; a Keys made otherwise makes them.
	assert.Equal(t, acquire, k.callKeys(false))
	assert.Equal(t, release, k.callKeys(true))
	assert.Same(t, &k.callKeys(true)[0], &k.callKeys(true)[0])
	assert.Equal(t, acquire, want.callKeys(false))
	assert.Equal(t, release, want.callKeys(true))
	k.ScriptKeys()[0] = "changed" // the exported ones are the caller's
	assert.Equal(t, acquire, k.callKeys(false))
	assert.Equal(t, "redlock:{jobs:nightly}:released:w1", k.Wake("w1"))
	assert.NotEqual(t, NewToken(), NewToken())
	assert.GreaterOrEqual(t, len(NewToken()), 22) // 16 random bytes
}

// shardedNode is a fakeNode that records release arguments, and asks for sharded pub/sub
// unless plain.
type shardedNode struct {
	fakeNode
	plain bool
	mu    sync.Mutex
	args  [][]string
}

func (n *shardedNode) ShardedPubSub() bool { return !n.plain }

func (n *shardedNode) Eval(ctx context.Context, s *Script, keys []string, args ...string) ([]int64, error) {
	n.mu.Lock()
	n.args = append(n.args, args)
	n.mu.Unlock()
	return []int64{1, 0}, nil
}

func TestReleasePublishesShardedWhereTheNodeAsks(t *testing.T) {
	plain := &shardedNode{fakeNode: fakeNode{name: "plain"}, plain: true}
	sharded := &shardedNode{fakeNode: fakeNode{name: "sharded"}}
	c, err := NewCluster([]Node{plain, sharded})
	require.NoError(t, err)
	l := HeldAs(testLock(), "w1.1", "w1", 1)
	require.NoError(t, c.Release(context.Background(), l))
	assert.Equal(t, [][]string{{"w1.1", "w", "SPUBLISH", "w1", "leave", "", ""}}, sharded.args)
	assert.Equal(t, [][]string{{"w1.1", "w", "PUBLISH", "w1", "leave", "", ""}}, plain.args)

	// A semaphore's release, to nodes that granted the permit (which are sent "1" more).
	plain.args, sharded.args = nil, nil
	sem := testLock()
	sem.Keys = NewSemaphoreKeys("t:", "x", 2)
	h := HeldAs(sem, "w2.1", "w2", 1)
	h.holds = 3
	require.NoError(t, c.Release(context.Background(), h))
	assert.Equal(t, [][]string{{"w2.1", "2", "SPUBLISH", "w2", "leave", "", "", "1"}}, sharded.args)
	assert.Equal(t, [][]string{{"w2.1", "2", "PUBLISH", "w2", "leave", "", "", "1"}}, plain.args)
}

// lateNode grants acquisitions after a delay and holds a key in memory, like a slow server.
type lateNode struct {
	delay    time.Duration
	mu       sync.Mutex
	held     bool
	released time.Time // when a release last deleted the key
}

func (n *lateNode) String() string { return "late" }

func (n *lateNode) Eval(ctx context.Context, s *Script, keys []string, args ...string) ([]int64, error) {
	if s == acquireScript {
		time.Sleep(n.delay)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch s {
	case acquireScript:
		n.held = true
		return asked(s, args, []int64{1, 1}), nil
	case releaseScript:
		was := n.held
		n.held = false
		if was {
			n.released = time.Now()
			return []int64{1, 0}, nil
		}
		return []int64{0, 0}, nil
	}
	return []int64{1}, nil
}

// TestReleaseWaitsForTheAcquisitionsStragglers: a release right after a quorum granted the
// lock does not overtake a slower node's SET, which would leave that node's key behind;
// also past 64 nodes, where Release waits for the stragglers before calling any node.
func TestReleaseWaitsForTheAcquisitionsStragglers(t *testing.T) {
	bubble(t, func(t *testing.T) {
		for _, n := range []int{3, 65} {
			late := &lateNode{delay: 50 * time.Millisecond}
			nodes := []Node{late}
			for range n - 1 {
				nodes = append(nodes, &lateNode{})
			}
			c, err := NewCluster(nodes)
			require.NoError(t, err)
			l := testLock()
			l.Fence = false
			h, err := c.Acquire(context.Background(), l)
			require.NoError(t, err)
			require.NoError(t, c.Release(context.Background(), h))
			time.Sleep(late.delay) // an overtaken SET would land by now
			synctest.Wait()
			late.mu.Lock()
			assert.False(t, late.held, "N=%d: the straggler's key outlived the release", n)
			late.mu.Unlock()
		}
	})
}

// TestReleaseDoesNotWaitForStragglersElsewhere: a release right after a quorum granted the
// lock lets go of it at once on the nodes that answered, and on a slower node only once
// its SET answered; each of two slow nodes is released as it answers.
func TestReleaseDoesNotWaitForStragglersElsewhere(t *testing.T) {
	bubble(t, func(t *testing.T) {
		const delay = 300 * time.Millisecond
		nodes := []*lateNode{{}, {}, {}, {delay: delay}, {delay: delay / 2}}
		c, err := NewCluster([]Node{nodes[0], nodes[1], nodes[2], nodes[3], nodes[4]})
		require.NoError(t, err)
		l := testLock()
		l.Fence = false
		l.NodeTimeout = 2 * delay
		// The first acquisition hears every node out (see identity): the one tested comes
		// after it.
		first, err := c.Acquire(context.Background(), l)
		require.NoError(t, err)
		require.NoError(t, c.Release(context.Background(), first))
		start := time.Now() // the stragglers' SETs answer delay and delay/2 after it
		h, err := c.Acquire(context.Background(), l)
		require.NoError(t, err)
		released := make(chan error, 1)
		go func() { released <- c.Release(context.Background(), h) }()
		held := func(n *lateNode) bool {
			n.mu.Lock()
			defer n.mu.Unlock()
			return n.held
		}
		synctest.Wait()
		require.True(t, !held(nodes[0]) && !held(nodes[1]) && !held(nodes[2]), "the nodes that answered were not released at once")
		require.NoError(t, <-released)
		assert.Equal(t, delay, time.Since(start), "the release did not return as the slowest node answered")
		synctest.Wait() // an overtaken SET would land by now
		for i, n := range nodes {
			assert.False(t, held(n), "node %d: the key outlived the release", i)
		}
		nodes[3].mu.Lock()
		nodes[4].mu.Lock()
		defer nodes[3].mu.Unlock()
		defer nodes[4].mu.Unlock()
		assert.Equal(t, delay/2, nodes[4].released.Sub(start), "the faster straggler waited for the slower")
		assert.Equal(t, delay, nodes[3].released.Sub(start), "the slower straggler was not released as it answered")
	})
}

// pubsubNode is a lateNode-like fake that is a Subscriber: a release wakes its subscribers.
type pubsubNode struct {
	fakeNode
	mu      sync.Mutex
	held    string // token, "" when free
	subs    map[int]func(string)
	next    int
	unsubs  int
	subcall int
	tries   int // acquire calls
}

func newPubsubNode() *pubsubNode { return &pubsubNode{subs: map[int]func(string){}} }

func (n *pubsubNode) Eval(_ context.Context, s *Script, keys []string, args ...string) ([]int64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch s {
	case acquireScript:
		n.tries++
		if n.held != "" && n.held != args[0] {
			return asked(s, args, []int64{0, 30_000}), nil // the holder may keep it 30 more seconds
		}
		n.held = args[0]
		return asked(s, args, []int64{1, 0}), nil
	case releaseScript:
		if n.held != args[0] {
			return []int64{0, 0}, nil
		}
		n.held = ""
		for _, f := range n.subs {
			go f("")
		}
		return []int64{1, int64(len(n.subs))}, nil
	}
	return []int64{1}, nil
}

func (n *pubsubNode) Subscribe(_ context.Context, _ string, onMessage func(string)) (func(), error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.subcall++
	id := n.next
	n.next++
	n.subs[id] = onMessage
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if _, ok := n.subs[id]; ok {
			delete(n.subs, id)
			n.unsubs++
		}
	}, nil
}

// TestWaitersWakeOnRelease: waiters for a lock whose holder may keep it 30 s wake as soon as
// it is released (the fake wakes every subscriber; the real release script wakes only the
// first waiter), each on its own channel, and unsubscribe when done.
func TestWaitersWakeOnRelease(t *testing.T) {
	bubble(t, func(t *testing.T) {
		n := newPubsubNode()
		c, err := NewCluster([]Node{n})
		require.NoError(t, err)
		l := testLock()
		l.Fence = false
		holder, err := c.Acquire(context.Background(), l)
		require.NoError(t, err)

		const waiters = 3
		got := make(chan *Held, waiters)
		for range waiters {
			go func() {
				l := testLock()
				// A backoff and a refresh interval (2.5 node timeouts) far longer than the test:
				// only a notification can wake them in time.
				l.Fence, l.NodeTimeout = false, time.Minute
				if h, err := c.AcquireWait(context.Background(), l, Backoff{Min: time.Minute, Max: time.Minute}); err == nil {
					got <- h
				}
			}()
		}
		synctest.Wait() // a waiter subscribed is woken by a release
		n.mu.Lock()
		require.True(t, n.subcall == waiters && len(n.subs) == waiters, "the waiters are not all waiting, each on its own channel")
		n.mu.Unlock()

		start := time.Now()
		require.NoError(t, c.Release(context.Background(), holder))
		for range waiters {
			l := <-got
			assert.Equal(t, time.Duration(0), time.Since(start), "a waiter did not wake at the release")
			require.NoError(t, c.Release(context.Background(), l)) // wakes the next
		}
		synctest.Wait() // a new owner unsubscribes in the background
		n.mu.Lock()
		assert.True(t, len(n.subs) == 0 && n.subcall == n.unsubs, "a subscription outlived its waiter")
		n.mu.Unlock()
	})
}

// TestWaitersCallAgainEveryRefreshInterval: a waiter whose backoff is a minute still calls
// the nodes every refresh interval (2.5 node timeouts, at least 50 ms) to keep its place in
// the queue, both when it polls (no Subscriber) and when it waits for a notification.
func TestWaitersCallAgainEveryRefreshInterval(t *testing.T) {
	l := testLock()
	l.NodeTimeout = 40 * time.Millisecond // refresh: 100 ms
	require.Equal(t, 100*time.Millisecond, l.refresh())
	// A node keeps the place a refresh interval and two node timeouts (one at least 50 ms)
	// after the call: the longest two calls of a live waiter land apart, and a margin.
	require.Equal(t, 190*time.Millisecond, l.placeKept())
	short := testLock()
	short.NodeTimeout = time.Millisecond
	require.Equal(t, 50*time.Millisecond, short.refresh(), "the refresh interval is at least 50 ms")
	require.Equal(t, 101*time.Millisecond, short.placeKept(), "the place's margin is at least 50 ms")

	for _, c := range []struct {
		name  string
		make  func(t *testing.T) (*Cluster, func() int)
		tries int // in 950 ms
	}{
		{"polling", func(t *testing.T) (*Cluster, func() int) {
			polling, fakes := cluster(t, held(30_000))
			return polling, func() int { // acquire calls (the waiter's leave at its end runs release)
				n := 0
				for _, name := range fakes[0].scripts() {
					if name == "acquire" {
						n++
					}
				}
				return n
			}
		}, 10}, // at 0, 100, ..., 900 ms
		{"subscribed", func(t *testing.T) (*Cluster, func() int) {
			subscribed := newPubsubNode()
			notified, err := NewCluster([]Node{subscribed})
			require.NoError(t, err)
			_, err = notified.Acquire(context.Background(), testLock())
			require.NoError(t, err)
			return notified, func() int { subscribed.mu.Lock(); defer subscribed.mu.Unlock(); return subscribed.tries }
		}, 11}, // the same, and one right after subscribing
	} {
		t.Run(c.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				cl, tries := c.make(t)
				before := tries()
				// The end falls between two calls (two timers due at one instant fire in
				// either order).
				ctx, cancel := context.WithTimeout(context.Background(), 950*time.Millisecond)
				defer cancel()
				w := testLock()
				w.NodeTimeout = l.NodeTimeout
				_, err := cl.AcquireWait(ctx, w, Backoff{Min: time.Minute, Max: time.Minute})
				require.ErrorIs(t, err, context.DeadlineExceeded)
				// A minute's backoff alone would allow 1 or 2 calls, a busy loop hundreds.
				assert.Equal(t, c.tries, tries()-before, "the waiter did not call every refresh interval")
			})
		})
	}
}

// TestSplitVoteRetriesAfterAShortPause: an attempt that some nodes granted but that no owner
// won (here the other nodes failed) is a split vote: the waiter retries after a random pause
// of at most two attempts' time, not after its backoff and refresh interval (a minute and
// 25 s here).
func TestSplitVoteRetriesAfterAShortPause(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var calls atomic.Int32
		// Fails its first acquire call, after 20 ms, and grants the later ones.
		flaky := func(context.Context, *Script) ([]int64, error) {
			if calls.Add(1) <= 2 { // the first attempt's call on each flaky node
				time.Sleep(20 * time.Millisecond)
				return nil, errors.New("connection reset")
			}
			return []int64{1, 1}, nil
		}
		c, fakes := cluster(t, grants(1), flaky, flaky)
		l := testLock()
		l.Fence, l.NodeTimeout = false, 10*time.Second
		start := time.Now()
		_, err := c.AcquireWait(context.Background(), l, Backoff{Min: time.Minute, Max: time.Minute})
		require.NoError(t, err)
		// The first attempt ends at 20 ms; the pause is at most twice that.
		assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
		assert.LessOrEqual(t, time.Since(start), 60*time.Millisecond, "the split vote waited for the backoff")
		assert.GreaterOrEqual(t, len(fakes[1].scripts()), 2, "no second attempt")
	})
}

// TestCallsKeepValuesNotCancellation: a node's call runs under a context that carries the
// caller's values but not its cancellation, with a deadline a node timeout away: a caller
// that gives up leaves its calls to answer, so that what they did can be undone.
func TestCallsKeepValuesNotCancellation(t *testing.T) {
	bubble(t, func(t *testing.T) {
		type key struct{}
		const timeout = 300 * time.Millisecond
		calls := make(chan context.Context, 3)
		hang := func(ctx context.Context, s *Script) ([]int64, error) {
			if s != acquireScript {
				return []int64{1, 0}, nil
			}
			calls <- ctx
			<-ctx.Done() // until its deadline
			return nil, ctx.Err()
		}
		c, _ := cluster(t, hang, hang, hang) // (a single node is called under ctx itself)
		caller, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
		l := testLock()
		l.NodeTimeout = timeout
		start := time.Now()
		time.AfterFunc(20*time.Millisecond, cancel)
		_, err := c.Acquire(caller, l)
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 20*time.Millisecond, time.Since(start), "the caller waited for its call's deadline")
		ctx := <-calls
		assert.Equal(t, "v", ctx.Value(key{}), "the caller's values are lost")
		assert.NoError(t, ctx.Err(), "the caller's cancellation ended its call")
		dl, ok := ctx.Deadline()
		require.True(t, ok, "no deadline")
		assert.False(t, dl.Before(start.Add(timeout)), "the deadline is less than the node timeout away")
		assert.False(t, dl.After(start.Add(timeout+time.Millisecond)), "the deadline is more than a millisecond past the node timeout")
		<-ctx.Done()
		assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
		assert.Equal(t, dl, time.Now(), "the call's context did not end at its deadline")
	})
}

// funcCtx is a context whose type cannot be compared with ==.
type funcCtx struct {
	context.Context
	f func()
}

// TestSingleNodeCallEndsWithItsCaller: at N=1, after calls that answered, an acquisition
// whose node hangs still returns as soon as the caller's context is cancelled, long before
// the node timeout.
func TestSingleNodeCallEndsWithItsCaller(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var hang atomic.Bool
		c, _ := cluster(t, func(ctx context.Context, s *Script) ([]int64, error) {
			if hang.Load() && s == acquireScript { // the failed attempt's release answers
				return hangs(ctx, s)
			}
			return []int64{1, 0}, nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for range 3 {
			l := testLock()
			l.NodeTimeout = 10 * time.Second
			h, err := c.Acquire(ctx, l)
			require.NoError(t, err)
			require.NoError(t, c.Release(context.Background(), h))
		}
		hang.Store(true)
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		l := testLock()
		l.NodeTimeout = 10 * time.Second
		_, err := c.Acquire(ctx, l)
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 50*time.Millisecond, time.Since(start), "the call did not end with its caller")
	})
}

// TestDetachedCallsShareADeadline: a detached call's context (see sharedDeadlines.detach)
// keeps the caller's values but not its end, has a deadline at least the timeout away and
// at most a millisecond more, ends at that deadline (a context derived from it too), and is
// shared by the calls of one millisecond under one context.
func TestDetachedCallsShareADeadline(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var c sharedDeadlines
		const timeout = 100 * time.Millisecond
		type key struct{}
		caller, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
		start := time.Now()
		d := c.detach(caller, timeout)
		end := time.Now()
		dl, ok := d.Deadline()
		require.True(t, ok, "no deadline")
		assert.False(t, dl.Before(start.Add(timeout)), "the deadline is less than the timeout away")
		assert.False(t, dl.After(end.Add(timeout+time.Millisecond)), "the deadline is more than a millisecond past the timeout")
		assert.Equal(t, "v", d.Value(key{}), "the caller's values are lost")
		child, cancelChild := context.WithCancel(d)
		defer cancelChild()

		cancel()
		assert.NoError(t, d.Err(), "the caller's end ended a detached call")
		<-d.Done()
		assert.Equal(t, dl, time.Now(), "a detached context did not end at its deadline")
		assert.ErrorIs(t, d.Err(), context.DeadlineExceeded)
		assert.ErrorIs(t, context.Cause(d), context.DeadlineExceeded)
		synctest.Wait()
		select {
		case <-child.Done(): // derived contexts end with it
		default:
			t.Fatal("a context derived from a detached one did not end with it")
		}

		// Calls of one millisecond share: under one context, one detached context; under
		// Background, the shared deadline itself; under another context, its own values.
		shared := false
		for range 10 {
			a, b := c.detach(caller, timeout), c.detach(caller, timeout)
			bg := c.detach(context.Background(), timeout)
			other := c.detach(context.WithValue(context.Background(), key{}, "w"), timeout)
			assert.Equal(t, "w", other.Value(key{}))
			assert.Nil(t, bg.Value(key{}))
			if a == b && a.Done() == bg.Done() && other.Done() == bg.Done() {
				shared = true
				break
			}
		}
		assert.True(t, shared, "calls of one millisecond do not share a deadline")

		// A context that == cannot compare is not shared, and does not panic.
		odd := funcCtx{Context: caller, f: func() {}}
		assert.Equal(t, "v", c.detach(odd, timeout).Value(key{}))
		assert.Equal(t, "v", c.detach(odd, timeout).Value(key{}))
	})
}

// TestEndsAtDeadline: every context core calls a Node under, and WithDeadline's, is one
// that EndsAtDeadline knows (a backend may run its call inline); a caller's own context,
// even one with a deadline, is not. WithDeadline's keeps the values, not the end, of its
// parent, and ends at its deadline.
func TestEndsAtDeadline(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var c sharedDeadlines
		type key struct{}
		caller, cancel := context.WithTimeout(context.WithValue(context.Background(), key{}, "v"), time.Second)
		defer cancel()
		for _, ctx := range []context.Context{c.detach(caller, time.Second), c.detach(context.Background(), time.Second)} {
			assert.True(t, EndsAtDeadline(ctx), "a call context is not known")
		}
		for _, ctx := range []context.Context{caller, context.Background(), context.TODO()} {
			assert.False(t, EndsAtDeadline(ctx), "a caller's context is taken for a call context")
		}

		parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
		start := time.Now()
		d := WithDeadline(parent, 50*time.Millisecond)
		assert.True(t, EndsAtDeadline(d))
		assert.Equal(t, "v", d.Value(key{}), "the parent's values are lost")
		cancelParent()
		assert.NoError(t, d.Err(), "the parent's end ended it")
		<-d.Done()
		assert.Equal(t, 50*time.Millisecond, time.Since(start), "it did not end at its deadline")
		assert.ErrorIs(t, d.Err(), context.DeadlineExceeded)
	})
}

// TestNodeFailedReportsEveryFailedCall: Lock.NodeFailed hears of each node's failure or
// abstention as its call ends, under the operation's name: in operations that reached
// their quorum, for a node they did not wait for (after they returned), and in the
// background releases of a failed attempt; never of a call that the caller's end ended.
func TestNodeFailedReportsEveryFailedCall(t *testing.T) {
	bubble(t, func(t *testing.T) {
		type event struct {
			op, node string
			err      error
		}
		var mu sync.Mutex
		var events []event
		seen := func(op, node string) int {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, e := range events {
				if e.op == op && e.node == node {
					n++
				}
			}
			return n
		}
		abstains := func(_ context.Context, s *Script) ([]int64, error) {
			if s == acquireScript {
				return []int64{-1, 1500}, nil
			}
			return []int64{0, 0}, nil
		}
		c, _ := cluster(t, grants(1), grants(1), grants(1), failing, hangs)
		l := testLock()
		l.Fence = false
		l.NodeFailed = func(op string, e NodeError) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, event{op, e.Node, e.Err})
		}
		ctx := context.Background()
		// The first acquisition hears every node out (see identity), node4 until its node
		// timeout: it is suspected from then on, and the acquisition tested does not wait.
		warm := *l
		warm.NodeFailed = nil
		w, err := c.Acquire(ctx, &warm)
		require.NoError(t, err)
		require.NoError(t, c.Release(ctx, w))
		time.Sleep(l.NodeTimeout + time.Millisecond) // node4's release ends (deadlines are shared per millisecond)
		h, err := c.Acquire(ctx, l)
		require.NoError(t, err, "three of five grant")
		// node3 refused at once; node4 hangs until the node timeout, after Acquire returned.
		synctest.Wait()
		require.Equal(t, 1, seen("acquire", "node3"))
		require.Zero(t, seen("acquire", "node4"), "a node was reported before its call ended")
		time.Sleep(l.NodeTimeout + time.Millisecond)
		synctest.Wait()
		require.Equal(t, 1, seen("acquire", "node4"))
		_, err = c.Extend(ctx, h)
		require.NoError(t, err)
		require.NoError(t, c.Release(ctx, h))
		time.Sleep(l.NodeTimeout) // node4's calls end
		synctest.Wait()
		require.True(t, seen("extend", "node3") == 1 && seen("extend", "node4") == 1 && seen("release", "node3") == 1 && seen("release", "node4") == 1)
		mu.Lock()
		for _, e := range events {
			assert.Contains(t, []string{"node3", "node4"}, e.node, "a node that answered was reported")
			if e.node == "node4" {
				assert.ErrorIs(t, e.err, ErrNodeTimeout)
			} else {
				assert.ErrorContains(t, e.err, "connection refused")
			}
		}
		events = nil
		mu.Unlock()

		// Abstentions, and the background releases of a failed attempt's keys.
		c, _ = cluster(t, grants(1), abstains, abstains)
		_, err = c.Acquire(ctx, l)
		require.ErrorIs(t, err, ErrRestarted)
		synctest.Wait()
		require.True(t, seen("acquire", "node1") == 1 && seen("acquire", "node2") == 1)
		mu.Lock()
		for _, e := range events {
			if e.op == "acquire" {
				assert.ErrorIs(t, e.err, ErrRestarted)
			}
		}
		events = nil
		mu.Unlock()
		c, _ = cluster(t, grants(1), failing, failing)
		_, err = c.Acquire(ctx, l)
		require.ErrorIs(t, err, ErrNoQuorum)
		synctest.Wait()
		require.True(t, seen("release", "node1") == 1 && seen("release", "node2") == 1, "the failed attempt's releases on the nodes that may hold it")

		// A call that the caller's end ended says nothing of its node.
		mu.Lock()
		events = nil
		mu.Unlock()
		c, _ = cluster(t, hangs)
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(20*time.Millisecond, cancel)
		slow := *l
		slow.NodeTimeout = time.Second
		_, err = c.Acquire(cctx, &slow)
		require.ErrorIs(t, err, context.Canceled)
		time.Sleep(slow.NodeTimeout) // the call's own deadline passes too
		synctest.Wait()
		assert.Zero(t, seen("acquire", "node0"), "a call ended by the caller's context was reported")
	})
}

// TestSingleNodeFailureSaysWhy: at N = 1, an attempt on a node whose last call failed
// reports the node's own error, not that it was not waited for (its call has answered).
func TestSingleNodeFailureSaysWhy(t *testing.T) {
	c, _ := cluster(t, func(context.Context, *Script) ([]int64, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	})
	for i := range 3 {
		_, err := c.Acquire(context.Background(), testLock())
		require.ErrorIs(t, err, ErrNoQuorum, "attempt %d", i)
		assert.ErrorContains(t, err, "connection refused", "attempt %d", i)
		assert.NotErrorIs(t, err, errSuspect, "attempt %d", i)
	}
}
