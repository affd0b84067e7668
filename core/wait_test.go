package core_test

import (
	"context"
	"errors"
	"strconv"
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

// TestReleaseWakesTheFirstWaiter: a release leaves the lock free and wakes the first live
// waiter with an empty message on its channel; the waiter then takes the lock itself, with
// the acquire script, its fence advanced as an uncontended caller's is.
func TestReleaseWakesTheFirstWaiter(t *testing.T) {
	for _, c := range []struct {
		name string
		real bool
	}{{"sim", false}, {"redis-server", true}} {
		simSetup{c.name, 1, c.real}.run(t, func(t *testing.T, servers []server) {
			s := servers[0]
			cl := newCluster(t, []server{s})
			holder := hold(t, cl, []server{s}, "wake")
			w := lockOn(servers, "wake")
			w.Fence = true
			_, err := cl.AcquireAs(context.Background(), w, "w.1", "w", 1)
			require.ErrorIs(t, err, core.ErrHeld)
			msgs := listen(t, s, holder.Keys.Wake("w"))

			require.NoError(t, cl.Release(context.Background(), holder))
			assert.Equal(t, "", get(t, s, holder.Keys.Lock), "a release gave the lock to someone")
			assert.Equal(t, "", next(t, []server{s}, msgs), "the message is not a wake-up")
			h, err := cl.AcquireAs(context.Background(), w, "w.2", "w", 1)
			require.NoError(t, err, "the woken waiter could not take the lock")
			assert.Equal(t, "w.2", get(t, s, holder.Keys.Lock))
			assert.Equal(t, strconv.FormatUint(h.Fence, 10), get(t, s, holder.Keys.Fence), "the fence did not advance")
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
// the same waiter as its own, never a later one's; and a release of an attempt lets go of
// the lock held by it or an earlier attempt, never a later one.
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

// TestWokenWaiterTakesTheLock: a waiter whose refresh interval and backoff are far longer
// than the test gets the lock when the holder lets go: the release wakes it, and it takes
// the lock with one more attempt, at once (its attempts take 300ms: see slowAcquires), with
// a validity counted from that attempt's start.
func TestWokenWaiterTakesTheLock(t *testing.T) {
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
		go func() { g, err := cl.AcquireWait(context.Background(), w, patient); got <- result{g, err} }()
		// Wait until the waiter made its second attempt, the one after it subscribed (the
		// holder's was the first call), and heard it: then it waits, and calls no more for
		// 25 s.
		until(t, servers, time.Second, func() bool { return calls() == 3*int64(len(servers)) }, "the waiter did not call twice")
		if simulated(servers) {
			advance(300 * time.Millisecond)
		}
		before := calls()

		released := time.Now()
		require.NoError(t, cl.Release(context.Background(), holder))
		r := await(t, servers, got, "the woken waiter's lock")
		require.NoError(t, r.err)
		if simulated(servers) {
			assert.Equal(t, 300*time.Millisecond, time.Since(released), "the waiter did not call at once when woken")
			assert.Equal(t, released, r.g.Start, "the validity does not count from the taking attempt's start")
		}
		assert.Equal(t, before+int64(len(servers)), calls(), "the woken waiter did not take the lock in one attempt")
		assert.Equal(t, w.TTL-w.Drift(), r.g.Until.Sub(r.g.Start))
		require.NoError(t, cl.Release(context.Background(), r.g))
		assert.True(t, allEqual(queued(t, servers, holder.Keys), 0), "the queue is not empty")
	})
}

// plainNode hides a Node's other methods, Subscribe among them: its waiters poll.
type plainNode struct{ core.Node }

// TestWaiterThatGivesUpWakesTheNext: a first waiter that does not hear the release (it
// polls) keeps the free lock from the waiters behind it while its place lives; when it
// gives up, its leave wakes the next waiter, which takes the lock at once.
func TestWaiterThatGivesUpWakesTheNext(t *testing.T) {
	inBubble(t, 3, waiterThatGivesUpWakesTheNext)
}

func waiterThatGivesUpWakesTheNext(t *testing.T, servers []server) {
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
	time.Sleep(time.Millisecond) // a later ticket: in the bubble the clock stands still meanwhile
	got := make(chan error, 1)
	var next *core.Held
	go func() {
		var err error
		next, err = cl.AcquireWait(context.Background(), lock("gives-up"), patient)
		got <- err
	}()
	settle(t, servers, func() bool { return allEqual(queued(t, servers, holder.Keys), 2) }, "the next waiter is not queued")

	require.NoError(t, cl.Release(context.Background(), holder))
	synctest.Wait()
	for i, s := range servers {
		assert.Equal(t, "", get(t, s, holder.Keys.Lock), "server %d: the lock went past the first waiter", i)
	}
	cancel()
	require.ErrorIs(t, <-quit, context.Canceled)
	gaveUp := time.Now()
	require.NoError(t, <-got, "the next waiter did not get the lock that the first one gave up")
	assert.Equal(t, time.Duration(0), time.Since(gaveUp), "the next waiter waited for the clock")
	require.NoError(t, cl.Release(context.Background(), next))
}

// heldUp is a node whose first acquire call is held up on its way (a partition, a stopped
// server's socket): the caller hears its deadline pass, and the call lands later.
type heldUp struct {
	core.Node
	delay time.Duration
	once  atomic.Bool
}

func (n *heldUp) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if s.Name() != "acquire" || n.once.Swap(true) {
		return n.Node.Eval(ctx, s, keys, args...)
	}
	go func() {
		time.Sleep(n.delay)
		_, _ = n.Node.Eval(context.Background(), s, keys, args...)
	}()
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestHeldUpFirstAttemptAfterTheLeave: a waiter that gives up during its first attempt,
// whose call to a node is held up and lands after its leave there, does not take the free
// lock in its name (the package doc, invariant 7: a leave is final).
func TestHeldUpFirstAttemptAfterTheLeave(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := simServers(t, 1)[0]
		c, err := core.NewCluster([]core.Node{&heldUp{Node: nodeFor(t, s), delay: time.Second}})
		require.NoError(t, err)
		l := &core.Lock{Keys: core.NewKeys("t:", "heldup"), TTL: 10 * time.Second, NodeTimeout: 100 * time.Millisecond,
			DriftFactor: 0.01}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err = c.AcquireWait(ctx, l, core.Backoff{Min: time.Millisecond, Max: time.Millisecond})
		require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
		advance(2 * time.Second) // the leave, then the held-up call, have landed
		_, err = s.do("GET", l.Keys.Lock)
		assert.ErrorIs(t, err, redis.Nil, "the held-up first attempt took the lock for a waiter that left")
	})
}
