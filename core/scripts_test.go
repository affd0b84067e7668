package core_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// twice is a Node that runs each script twice with the same arguments and returns the second
// run's reply, as a backend does that sends a script again after its connection broke under
// the first run's reply. between[name], if set, runs between the two runs of the script of
// that name, as another client's call landing there meanwhile would.
type twice struct {
	core.Node
	between map[string]func()
}

func (n *twice) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if _, err := n.Node.Eval(ctx, s, keys, args...); err != nil {
		return nil, err
	}
	if f := n.between[s.Name()]; f != nil {
		f()
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// twiceClusters returns a Cluster over s whose node runs every script twice, the node, and
// a Cluster over s that runs each once, for the other clients.
func twiceClusters(t *testing.T, s server) (*core.Cluster, *twice, *core.Cluster) {
	n := &twice{Node: nodeOf(t, s.addr), between: map[string]func(){}}
	tw, err := core.NewCluster([]core.Node{n})
	require.NoError(t, err)
	return tw, n, newCluster(t, []server{s})
}

// patientLock is lock(name) with a node timeout that a loaded machine does not miss:
// nothing in these tests waits for one.
func patientLock(name string, read bool) *core.Lock {
	l := lock(name)
	l.NodeTimeout = 10 * time.Second
	l.Read = read
	return l
}

// TestScriptsRunTwice: every script may run twice with the same arguments (docs/design.md):
// at each step of its state table (core/doc.go), the second run answers as the first did,
// and leaves what the first did, also when another client's call lands between the two.
func TestScriptsRunTwice(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		ctx := context.Background()
		tw, node, plain := twiceClusters(t, s)
		// each gives every step a lock of its own, and clears the hooks after it.
		each := func(name string, f func(t *testing.T, name string)) {
			t.Run(name, func(t *testing.T) {
				defer clear(node.between)
				f(t, name)
			})
		}
		holder := func(name string) string { return get(t, s, patientLock(name, false).Keys.Lock) }

		each("acquire/free", func(t *testing.T, name string) {
			h, err := tw.Acquire(ctx, patientLock(name, false))
			require.NoError(t, err)
			assert.Equal(t, h.Token(), holder(name))
			require.NoError(t, plain.Release(ctx, h))
		})
		each("acquire/held", func(t *testing.T, name string) {
			other, err := plain.Acquire(ctx, patientLock(name, false))
			require.NoError(t, err)
			_, err = tw.AcquireAs(ctx, patientLock(name, false), "w.1", "w", 1)
			require.ErrorIs(t, err, core.ErrHeld)
			assert.Equal(t, []int64{1}, queued(t, []server{s}, other.Keys), "the waiter is queued once")
			require.NoError(t, plain.Release(ctx, other))
		})
		each("acquire/behind a live waiter", func(t *testing.T, name string) {
			other, err := plain.Acquire(ctx, patientLock(name, false))
			require.NoError(t, err)
			_, err = plain.AcquireAs(ctx, patientLock(name, false), "a.1", "a", 1)
			require.ErrorIs(t, err, core.ErrHeld)
			require.NoError(t, plain.Release(ctx, other)) // wakes a
			_, err = tw.AcquireAs(ctx, patientLock(name, false), "b.1", "b", 2)
			require.Error(t, err)
			assert.Empty(t, holder(name), "b took the lock past a")
			h, err := plain.AcquireAs(ctx, patientLock(name, false), "a.2", "a", 1)
			require.NoError(t, err, "a, first, could not take the lock")
			require.NoError(t, plain.Release(ctx, h))
		})
		each("acquire/freed between the runs", func(t *testing.T, name string) {
			other, err := plain.Acquire(ctx, patientLock(name, false))
			require.NoError(t, err)
			node.between["acquire"] = func() { assert.NoError(t, plain.Release(ctx, other)) }
			h, err := tw.AcquireAs(ctx, patientLock(name, false), "w.1", "w", 1)
			require.NoError(t, err, "the second run, first in the queue, did not take the lock freed after the first run")
			assert.Equal(t, "w.1", holder(name))
			require.NoError(t, plain.Release(ctx, h))
		})
		each("extend", func(t *testing.T, name string) {
			h, err := plain.Acquire(ctx, patientLock(name, false))
			require.NoError(t, err)
			_, err = tw.Extend(ctx, h)
			require.NoError(t, err)
			require.NoError(t, plain.Release(ctx, h))
		})
		each("raise", func(t *testing.T, name string) {
			l := patientLock(name, false)
			h, err := plain.Acquire(ctx, l)
			require.NoError(t, err)
			extend := core.Scripts()[1] // the raise is an extension that carries the fence
			require.Equal(t, "extend", extend.Name())
			vals, err := node.Eval(ctx, extend, []string{l.Keys.Lock, l.Keys.Fence}, h.Token(), "10000", "w", "5000000000000000")
			require.NoError(t, err)
			assert.Equal(t, []int64{1}, vals)
			assert.Equal(t, "5000000000000000", get(t, s, l.Keys.Fence))
			require.NoError(t, plain.Release(ctx, h))
		})
		each("release", func(t *testing.T, name string) {
			h, err := plain.Acquire(ctx, patientLock(name, false))
			require.NoError(t, err)
			require.NoError(t, tw.Release(ctx, h), "the second run finds the lock gone: it was released")
			assert.Empty(t, holder(name))
		})
		each("release/waking a waiter", func(t *testing.T, name string) {
			h, err := plain.Acquire(ctx, patientLock(name, false))
			require.NoError(t, err)
			_, err = plain.AcquireAs(ctx, patientLock(name, false), "w.1", "w", 1)
			require.ErrorIs(t, err, core.ErrHeld)
			require.NoError(t, tw.Release(ctx, h), "the second run finds the lock gone: it was released")
			assert.Empty(t, holder(name), "a release gave the lock to someone")
			assert.Equal(t, []int64{1}, queued(t, []server{s}, h.Keys), "the woken waiter left the queue")
		})
		each("release/of a waiter, waking the next", func(t *testing.T, name string) {
			h, err := plain.AcquireAs(ctx, patientLock(name, false), "a.1", "a", 1)
			require.NoError(t, err)
			_, err = plain.AcquireAs(ctx, patientLock(name, false), "b.1", "b", 2)
			require.ErrorIs(t, err, core.ErrHeld)
			require.NoError(t, tw.Release(ctx, h))
			assert.Empty(t, holder(name), "a release gave the lock to someone")
			assert.Equal(t, []int64{1}, queued(t, []server{s}, h.Keys), "b is in the queue")
		})
		each("release/taken by another", func(t *testing.T, name string) {
			h, err := plain.Acquire(ctx, patientLock(name, false))
			require.NoError(t, err)
			_, err = s.do("SET", h.Keys.Lock, "other", "PX", "10000")
			require.NoError(t, err)
			require.ErrorIs(t, tw.Release(ctx, h), core.ErrNotHeld, "another owner's key is not a release of ours")
		})
		each("release/after the validity", func(t *testing.T, name string) {
			h, err := plain.Acquire(ctx, patientLock(name, false))
			require.NoError(t, err)
			h.Until = time.Now().Add(-time.Millisecond)
			_, err = s.do("DEL", h.Keys.Lock) // as its TTL would
			require.NoError(t, err)
			require.ErrorIs(t, tw.Release(ctx, h), core.ErrNotHeld, "a lock gone after its validity had expired")
		})

		each("rlock/free", func(t *testing.T, name string) {
			r, err := tw.Acquire(ctx, patientLock(name, true))
			require.NoError(t, err)
			assert.Equal(t, []int64{1}, readers(t, []server{s}, r.Keys))
			require.NoError(t, plain.Release(ctx, r))
			assert.Empty(t, holder(name))
		})
		each("rlock/a writer queues between the runs", func(t *testing.T, name string) {
			node.between["acquire"] = func() {
				_, err := plain.AcquireAs(ctx, patientLock(name, false), "w.1", "w", 1)
				assert.ErrorIs(t, err, core.ErrHeld)
			}
			r, err := tw.Acquire(ctx, patientLock(name, true))
			require.NoError(t, err, "the share the first run took is the second run's")
			assert.Equal(t, []int64{1}, readers(t, []server{s}, r.Keys))
			require.NoError(t, plain.Release(ctx, r))
			assert.Empty(t, holder(name), "the reader's release gave the lock to someone")
			w, err := plain.AcquireAs(ctx, patientLock(name, false), "w.2", "w", 1)
			require.NoError(t, err, "the writer, woken, could not take the lock")
			require.NoError(t, plain.Release(ctx, w))
		})
		each("rlock/a writer holds", func(t *testing.T, name string) {
			w, err := plain.Acquire(ctx, patientLock(name, false))
			require.NoError(t, err)
			_, err = tw.AcquireAs(ctx, patientLock(name, true), "r.1", "r", 1)
			require.ErrorIs(t, err, core.ErrHeld)
			assert.Equal(t, []int64{1}, queued(t, []server{s}, w.Keys))
			assert.Equal(t, []int64{0}, readers(t, []server{s}, w.Keys))
			require.NoError(t, plain.Release(ctx, w))
		})
		each("rextend", func(t *testing.T, name string) {
			r, err := plain.Acquire(ctx, patientLock(name, true))
			require.NoError(t, err)
			_, err = tw.Extend(ctx, r)
			require.NoError(t, err)
			require.NoError(t, plain.Release(ctx, r))
		})
		each("runlock", func(t *testing.T, name string) {
			r, err := plain.Acquire(ctx, patientLock(name, true))
			require.NoError(t, err)
			require.NoError(t, tw.Release(ctx, r))
			assert.Empty(t, holder(name))
		})
		each("runlock/waking a writer", func(t *testing.T, name string) {
			r, err := plain.Acquire(ctx, patientLock(name, true))
			require.NoError(t, err)
			_, err = plain.AcquireAs(ctx, patientLock(name, false), "w.1", "w", 1)
			require.ErrorIs(t, err, core.ErrHeld)
			require.NoError(t, tw.Release(ctx, r), "the second run finds the lock gone: it was released")
			assert.Empty(t, holder(name))
		})

		each("semaphore", func(t *testing.T, name string) {
			l := patientLock(name, false)
			l.Keys = core.NewSemaphoreKeys("q:", name, 2)
			h, err := tw.Acquire(ctx, l)
			require.NoError(t, err, "the second run finds the permit that the first took")
			o, err := plain.Acquire(ctx, l)
			require.NoError(t, err, "the other permit is free")
			_, err = plain.Acquire(ctx, l)
			require.ErrorIs(t, err, core.ErrHeld)
			other := *l
			other.Keys = core.NewSemaphoreKeys("q:", name, 3)
			_, err = tw.Acquire(ctx, &other)
			require.ErrorIs(t, err, core.ErrInvalid, "the record says 2 permits, held")
			require.NoError(t, tw.Release(ctx, h))
			require.NoError(t, plain.Release(ctx, o))
		})
		each("proclaim and leader", func(t *testing.T, name string) {
			l := patientLock(name, false)
			h, err := plain.Acquire(ctx, l)
			require.NoError(t, err)
			require.NoError(t, tw.Proclaim(ctx, h, "me"))
			token, value, ok, err := tw.Leader(ctx, l.Keys, l.NodeTimeout)
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, h.Token(), token)
			assert.Equal(t, "me", value)
			require.NoError(t, plain.Release(ctx, h))
		})
		requireEveryKeyExpires(t, s)
	})
}

// inFlight is a Node whose acquire calls reach the server only once open is closed, and
// that, like a driver, gives up on a call when its context ends, though the request, sent,
// still runs on the server: landed is closed once it did.
type inFlight struct {
	core.Node
	sent   chan struct{} // closed when an acquire call starts
	open   chan struct{}
	landed chan struct{}
}

func (n *inFlight) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if s.Name() != "acquire" {
		return n.Node.Eval(ctx, s, keys, args...)
	}
	type result struct {
		vals []int64
		err  error
	}
	out := make(chan result, 1)
	close(n.sent)
	go func() {
		<-n.open
		vals, err := n.Node.Eval(context.Background(), s, keys, args...)
		close(n.landed)
		out <- result{vals, err}
	}()
	select {
	case r := <-out:
		return r.vals, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestCancelledAttemptIsReleasedAfterItLands: at N = 1, an acquisition whose caller gives up
// while its request is on the way returns at once, and its release follows the request's
// landing, as at N > 1: it never overtakes it and leaves the lock to its TTL.
func TestCancelledAttemptIsReleasedAfterItLands(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		n := &inFlight{Node: nodeOf(t, s.addr), sent: make(chan struct{}), open: make(chan struct{}), landed: make(chan struct{})}
		cl, err := core.NewCluster([]core.Node{n})
		require.NoError(t, err)
		l := patientLock("cancelled", false)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-n.sent; cancel() }()
		_, err = cl.Acquire(ctx, l)
		require.ErrorIs(t, err, context.Canceled)
		close(n.open) // the request lands after the caller gave up
		<-n.landed
		require.Eventually(t, func() bool { return get(t, s, l.Keys.Lock) == "" }, 10*time.Second, time.Millisecond,
			"the cancelled attempt's key stands: its release overtook it")
	})
}

// TestLateCallAfterTheLastLeaveIsRefused: a waiter that retried (attempt 2) got the lock
// where no queue existed, and let go of it, leaving; a call of its attempt 1, held up on the
// way, lands after that leave: it neither takes the free lock nor queues the departed
// waiter, whether it is an acquisition or the release of a failed attempt that keeps the
// waiter's place.
func TestLateCallAfterTheLastLeaveIsRefused(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		ctx := context.Background()
		cl := newCluster(t, []server{s})
		l := patientLock("late", false)
		h, err := cl.AcquireAs(ctx, l, "w.2", "w", 1)
		require.NoError(t, err)
		require.NoError(t, cl.Release(ctx, h))
		_, err = cl.AcquireAs(ctx, l, "w.1", "w", 1)
		require.Error(t, err, "a late call of a departed waiter took the free lock")
		assert.Empty(t, get(t, s, l.Keys.Lock))
		assert.Equal(t, []int64{0}, queued(t, []server{s}, l.Keys), "a late call queued a departed waiter")
		requireEveryKeyExpires(t, s)
	})
}

// TestReleaseRunTwiceRepliesAsTheFirstOrGone: a release run again with the same arguments
// replies as its first run did, or "gone" ({0, woken, 1}) where the first let go (core/doc.go,
// invariant 3): also a release "stay" whose first run handed the lock to a waiter ahead, and
// a release whose hand-over to a reader emptied the queue; and a leave that let go of nothing,
// where another owner holds the lock and another waiter queues, says "not ours" again,
// never "gone", as does a leave under the token of a stay that handed the lock on.
func TestReleaseRunTwiceRepliesAsTheFirstOrGone(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		ctx := context.Background()
		node := nodeOf(t, s.addr)
		eval := func(name string, k core.Keys, args ...string) []int64 {
			r, err := node.Eval(ctx, script(t, name), k.ScriptKeys(), args...)
			require.NoError(t, err)
			return r
		}
		release := func(k core.Keys, token, waiter, mode string) []int64 {
			args := []string{token, "w", "PUBLISH", waiter, mode, "", ""}
			if mode == "stay" {
				args[5], args[6] = "2", "1000"
			}
			return eval("release", k, args...)
		}
		gone := []int64{0, 0, 1}

		k := core.NewKeys("e:", "stay")
		require.Equal(t, int64(1), eval("acquire", k, acquireArgs("w.1", "0", "w", 2)...)[0])
		require.Equal(t, int64(0), eval("acquire", k, acquireArgs("x.1", "0", "x", 1)...)[0])
		require.Equal(t, []int64{1, 0}, release(k, "w.1", "w", "stay"), "w's failed attempt lets go, x is ahead")
		require.Equal(t, int64(1), eval("acquire", k, acquireArgs("x.2", "0", "x", 1)...)[0], "x, woken, takes it")
		assert.Equal(t, gone, release(k, "w.1", "w", "stay"), "the stay, run again, after another took the lock")
		assert.Equal(t, []int64{0, 0}, release(k, "w.1", "w", "leave"), "a leave of the same token: the lock is x's")

		k = core.NewKeys("e:", "reader")
		_, err := s.do("SET", k.Lock, "t", "PX", "10000")
		require.NoError(t, err)
		reader := func(token string) []string {
			args := acquireArgs(token, "0", "r", 1)
			args[8] = "r"
			return args
		}
		require.Equal(t, int64(0), eval("acquire", k, reader("r.1")...)[0])
		require.Equal(t, []int64{1, 0}, release(k, "t", "", "leave"))
		require.Equal(t, int64(1), eval("acquire", k, reader("r.2")...)[0], "the reader, woken, takes a share")
		require.Equal(t, "(readers)", get(t, s, k.Lock))
		assert.Equal(t, gone, release(k, "t", "", "leave"), "the release, run again, after a reader took the lock")

		k = core.NewKeys("e:", "other")
		_, err = s.do("SET", k.Lock, "o", "PX", "10000")
		require.NoError(t, err)
		require.Equal(t, int64(0), eval("acquire", k, acquireArgs("w.1", "0", "w", 1)...)[0])
		require.Equal(t, int64(0), eval("acquire", k, acquireArgs("v.1", "0", "v", 2)...)[0])
		require.Equal(t, []int64{0, 0}, release(k, "w.2", "w", "leave"), "w gives up: the lock is another's")
		assert.Equal(t, []int64{0, 0}, release(k, "w.2", "w", "leave"), "the leave, run again, let go of nothing either")
		requireEveryKeyExpires(t, s)
	})
}

// withoutCommonCase returns s with its common case (the block from "-- The common case
// first" to the first line "end" after it) cut out: the rest of the script alone.
func withoutCommonCase(t *testing.T, s *core.Script) *core.Script {
	src := s.Source()
	start := strings.Index(src, "-- The common case first")
	require.GreaterOrEqual(t, start, 0, "the %s script has no common case", s.Name())
	end := strings.Index(src[start:], "\nend\n")
	require.GreaterOrEqual(t, end, 0, "the %s script's common case has no end", s.Name())
	return core.NewScript(s.Name(), src[:start]+src[start+end+len("\nend\n"):])
}

// TestCommonCaseAsTheRest: acquire and release take their most frequent cases (a writer's,
// a reader's) before the rest of the script (see their heads). In each state, in that case or next to it, the
// script must reply as the rest of it alone does and leave the same keys, values and TTLs
// (two simulated servers, started together, in a bubble: their clocks agree; each starts
// as one up for an hour, saved when it started).
func TestCommonCaseAsTheRest(t *testing.T) {
	inBubble(t, 2, func(t *testing.T, servers []server) {
		scripts := core.Scripts()
		whole := map[string]*core.Script{"acquire": scripts[0], "release": scripts[2]}
		rest := map[string]*core.Script{"acquire": withoutCommonCase(t, scripts[0]), "release": withoutCommonCase(t, scripts[2])}
		nodes := []core.Node{nodeFor(t, servers[0]), nodeFor(t, servers[1])}
		acquire := func(token, guard, floor, waiter, identify, mode string) []string {
			return []string{token, "10000", guard, floor, waiter, "1000", "450", identify, mode, "-1"}
		}
		release := func(token, mode, waiter, how string) []string {
			return []string{token, mode, "PUBLISH", waiter, how, "1000", "450", "0"}
		}
		queued := [][]string{{"ZADD", "queue", "500", "w0"}, {"ZADD", "alive", "99999999999999", "w0"},
			{"HSET", "waiters", "w0", "w chan"}, {"PEXPIRE", "queue", "60000"}, {"PEXPIRE", "alive", "60000"}, {"PEXPIRE", "waiters", "60000"}}
		held := func(token string) [][]string { return [][]string{{"SET", "lock", token, "PX", "5000"}} }
		shares := func(scores ...string) [][]string { // readers hold: w1.1 (and x.1) with these scores
			cmds := [][]string{{"SET", "lock", "(readers)", "PX", "5000"}, {"PEXPIRE", "readers", "5000"}}
			for i, score := range scores {
				cmds = append([][]string{{"ZADD", "readers", score, []string{"w1.1", "x.1"}[i]}}, cmds...)
			}
			return cmds
		}
		for i, tc := range []struct {
			name   string
			setup  [][]string // commands on the name's keys, by their last part ("lock" is the lock key)
			script string
			args   []string
		}{
			{"acquire/free", nil, "acquire", acquire("w1.1", "30", "0", "w1", "0", "w")},
			{"acquire/free/guard-off", nil, "acquire", acquire("w1.1", "0", "0", "w1", "0", "w")},
			{"acquire/free/fenced", nil, "acquire", acquire("w1.1", "30", "1", "w1", "0", "w")},
			{"acquire/free/fence-counter-ahead", [][]string{{"SET", "fence", "99999999999999999", "PX", "60000"}}, "acquire", acquire("w1.1", "30", "1", "w1", "0", "w")},
			{"acquire/free/fence-floor", nil, "acquire", acquire("w1.1", "30", "99999999999999999", "w1", "0", "w")},
			{"acquire/free/no-waiter", nil, "acquire", acquire("t.1", "30", "0", "", "0", "w")},
			{"acquire/free/identify", nil, "acquire", acquire("w1.1", "30", "0", "w1", "1", "w")},
			{"acquire/free/reader", nil, "acquire", acquire("w1.1", "30", "0", "w1", "0", "r")},
			{"acquire/free/guard-within", nil, "acquire", acquire("w1.1", "7200", "0", "w1", "0", "w")}, // a simulated server starts up an hour
			{"acquire/held", held("x.1"), "acquire", acquire("w1.1", "30", "0", "w1", "0", "w")},
			{"acquire/own", held("w1.1"), "acquire", acquire("w1.1", "30", "1", "w1", "0", "w")},
			{"acquire/queued", queued, "acquire", acquire("w1.1", "30", "0", "w1", "0", "w")},
			{"acquire/left", [][]string{{"ZADD", "alive", "99999999999999", "!w1"}, {"PEXPIRE", "alive", "60000"}}, "acquire", acquire("w1.2", "30", "0", "w1", "0", "w")},
			{"acquire/reader/shared", shares("99999999999999"), "acquire", acquire("y.1", "30", "0", "y", "0", "r")},
			{"acquire/reader/stale-set-longer", [][]string{{"ZADD", "readers", "1", "x.1"}, {"PEXPIRE", "readers", "999999"}}, "acquire", acquire("w1.1", "30", "0", "w1", "0", "r")},
			{"acquire/reader/stale-set-shorter", [][]string{{"ZADD", "readers", "1", "x.1"}, {"PEXPIRE", "readers", "99"}}, "acquire", acquire("w1.1", "30", "0", "w1", "0", "r")},
			{"acquire/reader/held", held("x.1"), "acquire", acquire("w1.1", "30", "0", "w1", "0", "r")},
			{"acquire/reader/queued", queued, "acquire", acquire("w1.1", "30", "0", "w1", "0", "r")},
			{"release/reader/last", shares("99999999999999"), "release", release("w1.1", "r", "w1", "leave")},
			{"release/reader/with-another", shares("99999999999999", "99999999999999"), "release", release("w1.1", "r", "w1", "leave")},
			{"release/reader/lapsed", shares("1"), "release", release("w1.1", "r", "w1", "leave")},
			{"release/reader/stay", shares("99999999999999"), "release", release("w1.1", "r", "w1", "stay")},
			{"release/reader/queued", append(shares("99999999999999"), queued...), "release", release("w1.1", "r", "w1", "leave")},
			{"release/reader/writer-holds", held("x.1"), "release", release("w1.1", "r", "w1", "leave")},
			{"release/own", held("w1.1"), "release", release("w1.1", "w", "w1", "leave")},
			{"release/own/no-waiter", held("t.1"), "release", release("t.1", "w", "", "leave")},
			{"release/own/stay", held("w1.1"), "release", release("w1.1", "w", "w1", "stay")},
			{"release/own/second-attempt", held("w1.2"), "release", release("w1.2", "w", "w1", "leave")},
			{"release/own/queued", append(held("w1.1"), queued...), "release", release("w1.1", "w", "w1", "leave")},
			{"release/another's", held("x.1"), "release", release("w1.1", "w", "w1", "leave")},
			{"release/free", nil, "release", release("w1.1", "w", "w1", "leave")},
		} {
			keys := core.NewKeys("common:", fmt.Sprint(i)).ScriptKeys()
			byPart := map[string]string{"lock": keys[0], "fence": keys[1], "queue": keys[2], "alive": keys[3], "waiters": keys[4], "readers": keys[5]}
			var replies [2][]int64
			var states [2][]string
			for j, s := range servers {
				for _, cmd := range tc.setup {
					cmd = append([]string{cmd[0], byPart[cmd[1]]}, cmd[2:]...)
					_, err := s.do(cmd...)
					require.NoError(t, err, "%s: %v", tc.name, cmd)
				}
				script := whole[tc.script]
				if j == 1 {
					script = rest[tc.script]
				}
				var err error
				replies[j], err = nodes[j].Eval(context.Background(), script, keys, tc.args...)
				require.NoError(t, err, tc.name)
				states[j] = dumpKeys(t, s, keys)
			}
			if tc.script == "acquire" && tc.args[7] == "1" { // each server says its own run_id after {status, value, unguarded}
				replies[0], replies[1] = replies[0][:3], replies[1][:3]
			}
			assert.Equal(t, replies[1], replies[0], "%s: the reply differs from the rest of the script's", tc.name)
			assert.Equal(t, states[1], states[0], "%s: the keys differ from what the rest of the script leaves", tc.name)
		}
	})
}

// dumpKeys returns each of keys on s as its type, value and PTTL.
func dumpKeys(t *testing.T, s server, keys []string) []string {
	var out []string
	for _, k := range keys {
		typ, err := s.do("TYPE", k)
		require.NoError(t, err)
		var v any
		switch typ {
		case "string":
			v, err = s.do("GET", k)
		case "zset":
			v, err = s.do("ZRANGE", k, "0", "-1", "WITHSCORES")
		case "hash":
			v, err = s.do("HGETALL", k)
		}
		require.NoError(t, err)
		pttl, err := s.do("PTTL", k)
		require.NoError(t, err)
		out = append(out, fmt.Sprintf("%s %v %v %v", k, typ, v, pttl))
	}
	return out
}
