package core_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// get returns the value of key on s, or "" if it has none.
func get(t *testing.T, s server, key string) string {
	t.Helper()
	v, err := s.do("GET", key)
	if err == redis.Nil {
		return ""
	}
	require.NoError(t, err)
	return v.(string)
}

// listen subscribes to channel on s and returns the payloads it receives.
func listen(t *testing.T, s server, channel string) <-chan string {
	t.Helper()
	ps := clientFor(t, s).Subscribe(context.Background(), channel)
	_, err := ps.Receive(context.Background()) // the confirmation
	require.NoError(t, err)
	t.Cleanup(func() { _ = ps.Close() })
	out := make(chan string, 16)
	go func() {
		for m := range ps.Channel() {
			out <- m.Payload
		}
	}()
	return out
}

// TestReleaseHandsTheLockToTheFirstWaiter: a release sets the lock to the first waiter's
// latest attempt's token, with that attempt's TTL, advances the fence if the waiter asked
// for one, and says so on the waiter's channel; where the waiter's restart guard abstains,
// it only wakes the waiter; where the server cannot report its uptime, it hands the lock
// over and says that the node is not guarded.
func TestReleaseHandsTheLockToTheFirstWaiter(t *testing.T) {
	for _, c := range []struct {
		name string
		real bool
		info bool // the server reports its uptime
	}{{"sim", false, true}, {"sim/no-uptime", false, false}, {"redis-server", true, true}} {
		simSetup{c.name, 1, c.real}.run(t, func(t *testing.T, servers []server) {
			s := servers[0]
			if s.sim != nil {
				s.sim.SetInfo(c.info)
			}
			cl := newCluster(t, []server{s})
			holder := hold(t, cl, []server{s}, "handover")

			w := lockOn(servers, "handover")
			w.TTL, w.Fence = 7*time.Second, true
			for _, attempt := range []string{"w.1", "w.2"} {
				_, err := cl.AcquireAs(context.Background(), w, attempt, "w", 1)
				require.ErrorIs(t, err, core.ErrHeld)
			}
			msgs := listen(t, s, holder.Keys.Wake("w"))

			released := time.Now()
			require.NoError(t, cl.Release(context.Background(), holder))
			assert.Equal(t, "w.2", get(t, s, holder.Keys.Lock), "the lock is not the waiter's latest attempt's")
			pttl, err := s.do("PTTL", holder.Keys.Lock)
			require.NoError(t, err)
			if s.sim != nil {
				assert.Equal(t, int64(7000), pttl, "the lock does not have the waiter's TTL")
			} else {
				assert.InDelta(t, 7000, pttl.(int64), 1000, "the lock does not have the waiter's TTL")
			}
			token, fence, ok := strings.Cut(next(t, []server{s}, msgs), " ")
			require.True(t, ok, "the message is not a hand-over")
			assert.Equal(t, "w.2", token)
			assert.Equal(t, get(t, s, holder.Keys.Fence), fence, "the message does not carry the fence counter")
			n, err := strconv.ParseInt(fence, 10, 64)
			require.NoError(t, err)
			if s.sim != nil {
				assert.Equal(t, released.UnixMicro(), n, "the fence did not advance to the server clock")
			} else {
				assert.Greater(t, n, time.Now().Add(-time.Hour).UnixMicro(), "the fence did not advance to at least the server clock")
			}

			// The waiter's release hands the lock on. The next waiter asked for a restart guard
			// of an hour: a server up for less (redis-server, fresh; a simulated one, up an hour
			// exactly: only an uptime above the guard counts) abstains, so the waiter is only
			// woken; one that cannot report its uptime hands the lock over and says that it is
			// not guarded.
			_, err = cl.AcquireAs(context.Background(), lockOn(servers, "handover"), "x.1", "x", 2)
			require.ErrorIs(t, err, core.ErrHeld)
			_, err = s.do("HSET", holder.Keys.Waiters, "x", "x.1 5000 0 3600")
			require.NoError(t, err)
			woken := listen(t, s, holder.Keys.Wake("x"))
			require.NoError(t, cl.Release(context.Background(), core.HeldAs(w, "w.2", "w", 1)))
			if !c.info {
				assert.Equal(t, "x.1", get(t, s, holder.Keys.Lock))
				assert.Equal(t, "x.1 0 u", next(t, []server{s}, woken), "the hand-over does not say that the node is not guarded")
				return
			}
			assert.Equal(t, "", get(t, s, holder.Keys.Lock), "a release handed the lock over where the guard abstains")
			assert.Equal(t, "", next(t, []server{s}, woken), "where the guard abstains, the waiter is only woken")
		})
	}
}

// next returns the next message of msgs, which a subscriber on servers received: in a
// bubble at once (after synctest.Wait), on real servers within a generous time.
func next(t *testing.T, servers []server, msgs <-chan string) string {
	t.Helper()
	if simulated(servers) {
		synctest.Wait()
		select {
		case p := <-msgs:
			return p
		default:
			t.Fatal("no message")
			return ""
		}
	}
	return await(t, servers, msgs, "a message")
}

// TestAttemptsOfOneWaiter: a waiter's attempt counts a lock held by an earlier attempt of
// the same waiter as its own, never a later one's; a release of an attempt lets go of the
// lock held by it or an earlier attempt, never a later one; and a late attempt does not
// replace the later attempt that a release would hand the lock to.
func TestAttemptsOfOneWaiter(t *testing.T) {
	inBubble(t, 1, func(t *testing.T, servers []server) { attemptsOfOneWaiter(t, servers[0]) })
}

func attemptsOfOneWaiter(t *testing.T, s server) {
	cl := newCluster(t, []server{s})
	k := core.NewKeys("q:", "attempts")
	w := func(attempt string) *core.Held { return core.HeldAs(lock("attempts"), attempt, "w", 1) }
	acquire := func(attempt string) error {
		_, err := cl.AcquireAs(context.Background(), lock("attempts"), attempt, "w", 1)
		return err
	}

	err := acquire("w.1")
	require.NoError(t, err)
	err = acquire("w.3")
	require.NoError(t, err, "an attempt did not take the lock from an earlier attempt of its waiter")
	assert.Equal(t, "w.3", get(t, s, k.Lock))
	err = acquire("w.2")
	require.ErrorIs(t, err, core.ErrHeld, "a late attempt took the lock from a later attempt")
	assert.Equal(t, "w.3", get(t, s, k.Lock))

	require.ErrorIs(t, cl.Release(context.Background(), w("w.2")), core.ErrNotHeld, "a release of an earlier attempt let go of a later one's lock")
	assert.Equal(t, "w.3", get(t, s, k.Lock))
	require.NoError(t, cl.Release(context.Background(), w("w.4")))
	assert.Equal(t, "", get(t, s, k.Lock), "a release did not let go of an earlier attempt's lock")

	// While another owner holds it, the queue records the latest attempt, not a late one.
	// (Another waiter: w left the queue with its release, and a node refuses the calls of
	// a waiter that left; see TestLateCallOfAWaiterThatLeftIsRefused.)
	_, err = cl.Acquire(context.Background(), lock("attempts"))
	require.NoError(t, err)
	for _, attempt := range []string{"u.5", "u.4"} {
		_, err = cl.AcquireAs(context.Background(), lock("attempts"), attempt, "u", 1)
		require.ErrorIs(t, err, core.ErrHeld)
	}
	v, err := s.do("HGET", k.Waiters, "u")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(v.(string), "u.5 "), "the queue records %q, want the latest attempt u.5", v)
}

// hold takes the lock called name through cl for a holder that never waits, and returns
// once every server holds it: Acquire returns at a quorum, and the last node's SET may land
// a moment later (after a waiter's first attempt, which would then find that node free).
func hold(t *testing.T, cl *core.Cluster, servers []server, name string) *core.Held {
	t.Helper()
	l, err := cl.Acquire(context.Background(), lockOn(servers, name))
	require.NoError(t, err)
	for i, s := range servers {
		settle(t, servers, func() bool { return get(t, s, l.Keys.Lock) == l.Token() }, "server %d does not hold the lock", i)
	}
	return l
}

// TestWaiterTakesTheHandOver: a waiter whose refresh interval and backoff are far longer
// than the test gets the lock when the holder lets go, at that instant and without calling
// again: it holds the lock under the token of the attempt the nodes refused, on every node,
// with a validity counted from that attempt's start. (Its attempts take 300ms: see
// slowAcquires.)
func TestWaiterTakesTheHandOver(t *testing.T) {
	onEachSetup(t, func(t *testing.T, servers []server) {
		cl, counts := countedCluster(t, servers)
		calls := func() int64 { return sum(counts, func(n *counted) *atomic.Int64 { return &n.acquires }) }
		holder := hold(t, cl, servers, "take")
		slowAcquires(counts, 300*time.Millisecond)

		w := lock("take")
		w.NodeTimeout = 10 * time.Second // a refresh every 25 s
		type result struct {
			g   *core.Held
			err error
		}
		got := make(chan result, 1)
		start := time.Now()
		go func() { g, err := cl.AcquireWait(context.Background(), w, patient); got <- result{g, err} }()
		// Wait until the waiter is queued everywhere under its second attempt, the one after
		// it subscribed: then it waits, and calls no more for 25 s.
		var attempt string
		took := until(t, servers, time.Second, func() bool {
			var tokens []string
			for _, s := range servers {
				v, err := s.do("HVALS", holder.Keys.Waiters)
				require.NoError(t, err)
				if vals, _ := v.([]any); len(vals) == 1 {
					token, _, _ := strings.Cut(vals[0].(string), " ")
					tokens = append(tokens, token)
				}
			}
			if len(tokens) != len(servers) || len(slices.Compact(slices.Clone(tokens))) != 1 || !strings.HasSuffix(tokens[0], ".2") {
				return false
			}
			attempt = tokens[0]
			return true
		}, "the waiter is not queued under one attempt on every node")
		if simulated(servers) {
			// The first attempt is a plain SET NX, the second the script, which runs at once;
			// its replies come back 300 ms later, and then the waiter only waits.
			assert.Equal(t, time.Duration(0), took, "the second attempt's calls landed at %v", took)
			advance(300 * time.Millisecond)
		}
		before := calls()

		released := time.Now()
		require.NoError(t, cl.Release(context.Background(), holder))
		r := await(t, servers, got, "the waiter's hand-over")
		require.NoError(t, r.err)
		if simulated(servers) {
			assert.Equal(t, time.Duration(0), time.Since(released), "the waiter did not take the hand-over at once")
			assert.Equal(t, start, r.g.Start, "the validity does not count from the refused attempt's start")
		}
		assert.Equal(t, before, calls(), "the waiter called again instead of taking the hand-over")
		assert.Equal(t, attempt, r.g.Token(), "the waiter holds the lock under another token than the attempt the nodes refused")
		for i, s := range servers {
			settle(t, servers, func() bool { return get(t, s, holder.Keys.Lock) == attempt }, "server %d does not hold the lock for the waiter", i)
		}
		assert.True(t, r.g.Start.Before(released), "the validity does not count from the refused attempt's start")
		assert.Equal(t, w.TTL-w.Drift(), r.g.Until.Sub(r.g.Start))
		require.NoError(t, cl.Release(context.Background(), r.g))
		assert.True(t, allEqual(queued(t, servers, holder.Keys), 0), "the queue is not empty")
	})
}

// plainNode hides a Node's other methods, Subscribe among them: its waiters poll.
type plainNode struct{ core.Node }

// TestWaiterThatGivesUpLetsGoOfAHandOver: a release that hands the lock to a waiter whose
// ctx ends before it takes the hand-over does not keep the lock from the next waiter: the
// waiter that gives up lets go of it.
func TestWaiterThatGivesUpLetsGoOfAHandOver(t *testing.T) {
	inBubble(t, 3, waiterThatGivesUpLetsGoOfAHandOver)
}

func waiterThatGivesUpLetsGoOfAHandOver(t *testing.T, servers []server) {
	cl := newCluster(t, servers)
	nodes := make([]core.Node, len(servers))
	for i, s := range servers {
		nodes[i] = plainNode{nodeFor(t, s)}
	}
	polling, err := core.NewCluster(nodes)
	require.NoError(t, err)

	holder := hold(t, cl, servers, "gives-up")
	// A waiter that polls every 25 s (its refresh interval): it hears no hand-over.
	quitter := lock("gives-up")
	quitter.NodeTimeout = 10 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	quit := make(chan error, 1)
	go func() { _, err := polling.AcquireWait(ctx, quitter, patient); quit <- err }()
	settle(t, servers, func() bool { return allEqual(queued(t, servers, holder.Keys), 1) }, "the first waiter is not queued")
	got := make(chan error, 1)
	var next *core.Held
	go func() {
		var err error
		next, err = cl.AcquireWait(context.Background(), lock("gives-up"), patient)
		got <- err
	}()
	settle(t, servers, func() bool { return allEqual(queued(t, servers, holder.Keys), 2) }, "the next waiter is not queued")

	require.NoError(t, cl.Release(context.Background(), holder))
	for i, s := range servers {
		settle(t, servers, func() bool { // the first waiter's id, read from the queue
			head, err := s.do("ZRANGE", holder.Keys.Queue, "0", "0")
			ids, _ := head.([]any)
			return err == nil && len(ids) == 1 && strings.HasPrefix(get(t, s, holder.Keys.Lock), ids[0].(string)+".")
		}, "server %d did not hand the lock to the first waiter", i)
	}
	cancel()
	require.ErrorIs(t, <-quit, context.Canceled)
	gaveUp := time.Now()
	require.NoError(t, <-got, "the next waiter did not get the lock that the first one gave up")
	assert.Equal(t, time.Duration(0), time.Since(gaveUp), "the next waiter waited for the clock")
	require.NoError(t, cl.Release(context.Background(), next))
}
