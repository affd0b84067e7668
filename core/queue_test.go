package core_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/go-redlock/redlock/internal/simnet"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests run core's real scripts, through the go-redis backend, on miniredis and on
// redis-server processes.

// server is what a queue test needs of a server: its address and a way to run a command.
type server struct {
	addr string
	do   func(args ...string) (any, error)
	mini bool           // a miniredis server, which cannot report its uptime
	sim  *simnet.Server // a simulated server (see simServers), in a bubble; nil for the others
}

func miniServers(t *testing.T, n int) []server {
	s := make([]server, n)
	for i := range s {
		s[i] = miniServer(t, miniredis.RunT(t))
	}
	return s
}

// miniServer returns the server of m.
func miniServer(t *testing.T, m *miniredis.Miniredis) server {
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return server{addr: m.Addr(), mini: true, do: func(args ...string) (any, error) {
		a := make([]any, len(args))
		for i, v := range args {
			a[i] = v
		}
		return c.Do(context.Background(), a...).Result()
	}}
}

func realServers(t *testing.T, n int) []server {
	s := make([]server, n)
	for i, r := range redistest.StartN(t, n) {
		s[i] = server{addr: r.Addr(), do: func(args ...string) (any, error) {
			v, err := r.Do(args...)
			if err == nil && v == nil {
				err = redis.Nil
			}
			return v, err
		}}
	}
	return s
}

// newCluster returns a Cluster of go-redis Nodes over servers.
func newCluster(t *testing.T, servers []server) *core.Cluster {
	nodes := make([]core.Node, len(servers))
	for i, s := range servers {
		nodes[i] = nodeFor(t, s)
	}
	c, err := core.NewCluster(nodes)
	require.NoError(t, err)
	return c
}

// counted is a go-redis Node (a Subscriber) that counts the calls that reach it: the
// acquire scripts that ran (counted once the server answered, before the reply is held
// back: a test that sees the count knows the calls landed), and the raises (extensions
// that carry the fence).
type counted struct {
	*goredis.Node
	acquires, raises atomic.Int64
	slow             atomic.Int64 // nanoseconds each acquire script's reply is held back
}

func (n *counted) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	switch s.Name() {
	case "acquire":
		vals, err := n.Node.Eval(ctx, s, keys, args...)
		n.acquires.Add(1)
		if d := n.slow.Load(); d > 0 {
			time.Sleep(time.Duration(d))
		}
		return vals, err
	case "extend":
		if len(args) > 2 { // an extension that carries the fence: the raise
			n.raises.Add(1)
		}
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// slowAcquires makes each of nodes hold back its acquire scripts' replies by d (0: not at
// all). A test that asserts a waiter takes a hand-over without calling again slows its
// attempts: a waiter that heard some hand-overs waits about twice its attempt's time for
// the rest before it calls again, and a test process under load can read the nodes'
// messages tens of milliseconds apart. The attempts' NodeTimeout must exceed d.
func slowAcquires(nodes []*counted, d time.Duration) {
	for _, n := range nodes {
		n.slow.Store(int64(d))
	}
}

// countedCluster returns a Cluster over servers whose nodes count their calls.
func countedCluster(t *testing.T, servers []server) (*core.Cluster, []*counted) {
	nodes := make([]core.Node, len(servers))
	counts := make([]*counted, len(servers))
	for i, s := range servers {
		counts[i] = &counted{Node: nodeFor(t, s)}
		nodes[i] = counts[i]
	}
	cl, err := core.NewCluster(nodes)
	require.NoError(t, err)
	return cl, counts
}

// sum adds up one count over nodes.
func sum(nodes []*counted, count func(*counted) *atomic.Int64) (n int64) {
	for _, c := range nodes {
		n += count(c).Load()
	}
	return n
}

// lock returns a Lock on name with timeouts generous enough for a loaded machine: a test
// that relies on a short node timeout (a refresh interval, how long a place lasts) sets it.
func lock(name string) *core.Lock {
	return &core.Lock{Keys: core.NewKeys("q:", name), TTL: 10 * time.Second, NodeTimeout: 2 * time.Second, DriftFactor: 0.01}
}

// queued returns how many waiters each server has queued for k.
func queued(t *testing.T, servers []server, k core.Keys) []int64 {
	n := make([]int64, len(servers))
	for i, s := range servers {
		v, err := s.do("ZCARD", k.Queue)
		require.NoError(t, err)
		n[i] = v.(int64)
	}
	return n
}

func allEqual(ns []int64, want int64) bool {
	for _, n := range ns {
		if n != want {
			return false
		}
	}
	return true
}

var patient = core.Backoff{Min: time.Minute, Max: time.Minute}

// setups are the servers the queue tests run on: one or three miniredis, three redis-server.
var setups = []struct {
	name    string
	servers func(*testing.T, int) []server
	n       int
}{{"miniredis/N=1", miniServers, 1}, {"miniredis/N=3", miniServers, 3}, {"redis-server/N=3", realServers, 3}}

// onOneOfEach runs f as a subtest on one miniredis server, and as another on one
// redis-server.
func onOneOfEach(t *testing.T, f func(t *testing.T, s server)) {
	for _, k := range []struct {
		name    string
		servers func(*testing.T, int) []server
	}{{"miniredis", miniServers}, {"redis-server", realServers}} {
		t.Run(k.name, func(t *testing.T) { f(t, k.servers(t, 1)[0]) })
	}
}

// TestWaitersTakeTurnsInOrder: waiters that queued one after another get the lock in that
// order, whatever the order in which their retries reach the nodes, each handed over at
// the instant the one before lets go.
func TestWaitersTakeTurnsInOrder(t *testing.T) {
	onEachSetup(t, func(t *testing.T, servers []server) {
		cl := newCluster(t, servers)
		holder := hold(t, cl, servers, "order")

		const waiters = 5
		order := make(chan int, waiters)
		var wg sync.WaitGroup
		for i := range waiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := cl.AcquireWait(context.Background(), lockOn(servers, "order"), patient)
				if err != nil {
					order <- -1
					return
				}
				order <- i
				assert.NoError(t, cl.Release(context.Background(), l))
			}()
			// The next waiter starts only once this one is queued everywhere.
			settle(t, servers, func() bool { return allEqual(queued(t, servers, holder.Keys), int64(i+1)) },
				"waiter %d is not queued", i)
			if simulated(servers) {
				// A ticket is the call's time in microseconds, and equal tickets go by the
				// waiters' random ids: the next waiter comes a microsecond later.
				advance(time.Microsecond)
			}
		}
		released := time.Now()
		require.NoError(t, cl.Release(context.Background(), holder))
		for want := range waiters {
			got := await(t, servers, order, fmt.Sprintf("waiter %d's turn", want))
			require.Equal(t, want, got, "the waiters did not take turns in the order they queued")
		}
		if simulated(servers) {
			assert.Equal(t, time.Duration(0), time.Since(released), "a turn waited for the clock")
		}
		wg.Wait()
		assert.True(t, allEqual(queued(t, servers, holder.Keys), 0), "the queue is not empty after every waiter had its turn")
	})
}

// TestNoBargingPastALiveWaiter: while a waiter that queued first keeps its place, a free lock
// goes neither to a single attempt nor to a later waiter (whose attempts run the script:
// see TestSetNXTakesAFreeLockPastTheQueue for a plain first attempt); once its place lapses
// (it stopped calling: it crashed, say), the later waiter gets the lock, at its first
// attempt after the lapse.
func TestNoBargingPastALiveWaiter(t *testing.T) {
	inBubble(t, 3, func(t *testing.T, servers []server) {
		cl := newCluster(t, servers)
		k := core.NewKeys("q:", "barging")
		// A waiter that queued long ago and then went silent: its place lapses in 500 ms.
		lapse := time.Now().Add(500 * time.Millisecond)
		for _, s := range servers {
			_, err := s.do("ZADD", k.Queue, "1", "ghost")
			require.NoError(t, err)
			_, err = s.do("ZADD", k.Alive, strconv.FormatInt(lapse.UnixMilli(), 10), "ghost")
			require.NoError(t, err)
		}

		_, err := cl.Acquire(context.Background(), lock("barging"))
		require.ErrorIs(t, err, core.ErrHeld, "a single attempt took a free lock past a live waiter")

		l := lock("barging")
		l.Fence = true                         // every attempt runs the script
		l.NodeTimeout = 100 * time.Millisecond // a refresh interval of 250 ms
		_, err = cl.AcquireWait(context.Background(), l, patient)
		require.NoError(t, err)
		// Its attempts come a refresh interval (250 ms) apart: at 0, 250 and 500 ms, when
		// the place is gone (a place lapses at its stamp).
		assert.Equal(t, lapse, time.Now(), "the later waiter did not take the lock at its first attempt after the lapse")
		// Acquire returns at a quorum: the last node sees the attempt when its call lands.
		synctest.Wait()
		for i, s := range servers {
			_, err := s.do("ZSCORE", k.Queue, "ghost")
			assert.ErrorIs(t, err, redis.Nil, "server %d still queues the lapsed waiter", i)
		}
	})
}

// TestWaiterThatGivesUpLeavesTheQueue: a waiter whose ctx ends leaves the queue on every
// node at once, and a release wakes the next waiter by notification at once (its own
// refresh interval is 25 s).
func TestWaiterThatGivesUpLeavesTheQueue(t *testing.T) {
	inBubble(t, 3, func(t *testing.T, servers []server) {
		cl := newCluster(t, servers)
		holder := hold(t, cl, servers, "leave")

		quitter := lock("leave")
		// Its refresh interval (25 s) keeps it from calling again while it waits (a call under
		// way when its ctx ends is TestLateCallOfAQuitterDoesNotQueueIt's subject).
		quitter.NodeTimeout = 10 * time.Second
		ctx, cancel := context.WithCancel(context.Background())
		quit := make(chan error, 1)
		go func() { _, err := cl.AcquireWait(ctx, quitter, patient); quit <- err }()
		// Its second attempt (the one after it subscribed) has run on every node, so no call of
		// its is under way when it gives up: it waits, and the bubble is still.
		settle(t, servers, func() bool { return allEqual(queued(t, servers, holder.Keys), 1) }, "the quitter is not queued")
		synctest.Wait()

		stayer := lock("leave")
		stayer.NodeTimeout = 10 * time.Second // a refresh every 25 s: only a notification wakes it in time
		got := make(chan error, 1)
		var stayed *core.Held
		go func() {
			var err error
			stayed, err = cl.AcquireWait(context.Background(), stayer, patient)
			got <- err
		}()
		settle(t, servers, func() bool { return allEqual(queued(t, servers, holder.Keys), 2) }, "the stayer is not queued")

		cancel()
		require.ErrorIs(t, <-quit, context.Canceled)
		settle(t, servers, func() bool { return allEqual(queued(t, servers, holder.Keys), 1) }, "the waiter that gave up is still queued")

		start := time.Now()
		require.NoError(t, cl.Release(context.Background(), holder))
		require.NoError(t, <-got)
		assert.Equal(t, time.Duration(0), time.Since(start), "the remaining waiter was not woken by the release")
		require.NoError(t, cl.Release(context.Background(), stayed))
		assert.True(t, allEqual(queued(t, servers, holder.Keys), 0), fmt.Sprint("queues: ", queued(t, servers, holder.Keys)))
	})
}

// TestQueueKeepsTheLongestPlace: a node keeps a waiter's place a refresh interval and two
// node timeouts after its call (450 ms with a 100 ms node timeout), and the queue's sets
// expire with the places they keep (within two places' time): a shorter place never
// shortens them below a longer one's.
func TestQueueKeepsTheLongestPlace(t *testing.T) {
	inBubble(t, 1, func(t *testing.T, servers []server) {
		cl := newCluster(t, servers)
		holder := hold(t, cl, servers, "keep")
		pttl := func(key string) int64 {
			v, err := servers[0].do("PTTL", key)
			require.NoError(t, err)
			return v.(int64)
		}
		const kept = 450 // ms: 250 ms refresh interval, and two node timeouts of 100 ms

		short, long := lock("keep"), lock("keep")
		short.NodeTimeout = 100 * time.Millisecond
		long.NodeTimeout = 10 * time.Second // 25 s + 10 s + 10 s; short's 450 ms
		now := time.Now().UnixMilli()
		_, err := cl.AcquireAs(context.Background(), short, "short.1", "short", 2)
		require.ErrorIs(t, err, core.ErrHeld)
		v, err := servers[0].do("ZSCORE", holder.Keys.Alive, "short")
		require.NoError(t, err)
		lapses := int64(v.(float64)) // go-redis reads RESP3 doubles
		assert.Equal(t, now+kept, lapses, "the place lapses %d ms after the call, want %d", lapses-now, kept)
		keys := []string{holder.Keys.Queue, holder.Keys.Alive, holder.Keys.Waiters}
		for _, key := range keys {
			ms := pttl(key)
			assert.GreaterOrEqual(t, now+ms, lapses, "%s expires %d ms before the place lapses", key, lapses-now-ms)
			assert.LessOrEqual(t, ms, int64(2*kept), "%s expires in %d ms, want within two places' time", key, ms)
		}

		_, err = cl.AcquireAs(context.Background(), long, "long.1", "long", 1)
		require.ErrorIs(t, err, core.ErrHeld)
		_, err = cl.AcquireAs(context.Background(), short, "short.2", "short", 2)
		require.ErrorIs(t, err, core.ErrHeld)
		for _, key := range keys {
			assert.GreaterOrEqual(t, pttl(key), int64(45_000), "%s expires before the longest-kept waiter's place (45 s) lapses", key)
		}
	})
}

// landing is a Node that holds back every other acquire script call of the waiter it is
// told of by most of a node timeout before sending it (the others go at once, so that one
// call lands as early and the next as late as a live waiter's can), and records, for each
// call about to be sent, whether the waiter's place on its server was still kept.
type landing struct {
	*goredis.Node
	do     func(args ...string) (any, error)
	keys   core.Keys
	waiter atomic.Pointer[string]
	hold   time.Duration
	mu     sync.Mutex
	calls  int
	lapsed []string // what was wrong, per call that found the place gone
}

func (n *landing) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	w := n.waiter.Load()
	if s.Name() != "acquire" || w == nil || len(args) < 5 || args[4] != *w {
		return n.Node.Eval(ctx, s, keys, args...)
	}
	n.mu.Lock()
	n.calls++
	late := n.calls%2 == 0
	n.mu.Unlock()
	if late {
		time.Sleep(n.hold)
	}
	v, err := n.do("ZSCORE", n.keys.Alive, *w)
	now := time.Now().UnixMilli()
	if err == nil { // nil (redis.Nil) before the waiter's first queued call
		if lapses := int64(v.(float64)); lapses <= now {
			n.mu.Lock()
			n.lapsed = append(n.lapsed, fmt.Sprintf("place lapsed %d ms before the call", now-lapses))
			n.mu.Unlock()
		}
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestSlowWaiterKeepsItsPlace: a live waiter keeps its place on every node although its
// calls take up to most of a node timeout, landing far apart (one at once, the next 150 ms
// late, at a 200 ms node timeout), and its attempts wait for one another: the place (a
// refresh interval and two node timeouts) outlasts the longest gap between two of its
// calls (a refresh interval and a node timeout).
func TestSlowWaiterKeepsItsPlace(t *testing.T) {
	inBubble(t, 3, func(t *testing.T, servers []server) {
		cl := newCluster(t, servers)
		holder := hold(t, cl, servers, "slow")
		const nodeTimeout = 200 * time.Millisecond // refresh 500 ms, place 900 ms
		nodes := make([]core.Node, len(servers))
		lands := make([]*landing, len(servers))
		for i, s := range servers {
			lands[i] = &landing{Node: nodeFor(t, s), do: s.do, keys: holder.Keys, hold: nodeTimeout * 3 / 4}
			nodes[i] = lands[i]
		}
		slow, err := core.NewCluster(nodes)
		require.NoError(t, err)

		l := lock("slow")
		l.NodeTimeout = nodeTimeout
		// Its end falls between two calls (two timers due at one instant fire in either order).
		ctx, cancel := context.WithTimeout(context.Background(), 3750*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() { _, err := slow.AcquireWait(ctx, l, patient); done <- err }()
		// After its first attempt it is queued on every node: the queue tells its id, the
		// prefix of its tokens.
		var waiter string
		settle(t, servers, func() bool {
			v, err := servers[0].do("ZRANGE", holder.Keys.Queue, "0", "0")
			if ids, _ := v.([]any); err == nil && len(ids) == 1 {
				waiter = ids[0].(string)
				return true
			}
			return false
		}, "the waiter is not queued")
		for _, n := range lands {
			n.waiter.Store(&waiter)
		}
		require.ErrorIs(t, <-done, context.DeadlineExceeded)
		for i, n := range lands {
			n.mu.Lock()
			// A call every refresh interval (500 ms, from start to start) after the first,
			// at 0.5, 1, ..., 3.5 s.
			assert.Equal(t, 7, n.calls, "server %d: calls", i)
			assert.Empty(t, n.lapsed, "server %d: the live waiter lost its place", i)
			n.mu.Unlock()
		}
	})
}

// slowAcquire delays the acquire script on a Node (every attempt runs
// the script), so that a call of it is still under way when its caller gives up.
type slowAcquire struct {
	core.Node
	core.Subscriber
	delay time.Duration
}

func (n slowAcquire) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if s.Name() == "acquire" {
		select {
		case <-time.After(n.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestLateCallOfAQuitterDoesNotQueueIt: a waiter that gives up while its attempt is still
// under way on a slow node is out of that node's queue once the attempt lands there (its
// place would otherwise last a refresh interval and two node timeouts: 45 s here).
func TestLateCallOfAQuitterDoesNotQueueIt(t *testing.T) {
	inBubble(t, 3, func(t *testing.T, servers []server) {
		cl := newCluster(t, servers)
		holder := hold(t, cl, servers, "late")
		nodes := make([]core.Node, len(servers))
		for i, s := range servers {
			n := nodeFor(t, s)
			nodes[i] = slowAcquire{Node: n, Subscriber: n}
			if i == 2 {
				nodes[i] = slowAcquire{Node: n, Subscriber: n, delay: 300 * time.Millisecond}
			}
		}
		slow, err := core.NewCluster(nodes)
		require.NoError(t, err)

		w := lock("late")
		w.NodeTimeout = 10 * time.Second // refresh every 25 s: a place kept for 45 s
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		_, err = slow.AcquireWait(ctx, w, patient)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 150*time.Millisecond, time.Since(start))
		synctest.Wait()
		assert.Equal(t, []int64{0, 0, 0}, queued(t, servers, holder.Keys), "the quitter is still queued")
		advance(time.Until(start.Add(300 * time.Millisecond))) // the slow node's call lands
		assert.Equal(t, []int64{0, 0, 0}, queued(t, servers, holder.Keys), "the quitter's late call queued it")
	})
}

// TestWaitWaitsForTheLeaves: Cluster.Wait returns only once the leave of a waiter that
// gave up, with a call still under way on a slow node, has landed there after that call;
// a program that exits after it leaves no waiter queued.
func TestWaitWaitsForTheLeaves(t *testing.T) {
	inBubble(t, 3, func(t *testing.T, servers []server) {
		cl := newCluster(t, servers)
		holder := hold(t, cl, servers, "exit")
		slow, _ := slowThird(t, servers, 300*time.Millisecond)
		w := lock("exit")
		w.NodeTimeout = 10 * time.Second
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		_, err := slow.AcquireWait(ctx, w, patient)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		slow.Wait()
		assert.Equal(t, 300*time.Millisecond, time.Since(start), "Wait returned before the slow node's call landed")
		assert.Equal(t, []int64{0, 0, 0}, queued(t, servers, holder.Keys), "the waiter is still queued")
		slow.Wait() // nothing under way: at once
		assert.Equal(t, 300*time.Millisecond, time.Since(start))
	})
}

// hungRelease is slowAcquire whose release calls block, ignoring their context, until
// unblock is closed.
type hungRelease struct {
	slowAcquire
	unblock chan struct{}
}

func (n hungRelease) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if s.Name() == "release" {
		<-n.unblock
	}
	return n.slowAcquire.Eval(ctx, s, keys, args...)
}

// TestWaitIsBoundedByTheNodeTimeouts: a leave that a node holds for ever, ignoring its
// deadline, holds Cluster.Wait for three node timeouts, no longer.
func TestWaitIsBoundedByTheNodeTimeouts(t *testing.T) {
	inBubble(t, 3, func(t *testing.T, servers []server) {
		cl := newCluster(t, servers)
		hold(t, cl, servers, "hung")
		unblock := make(chan struct{})
		defer close(unblock)
		nodes := make([]core.Node, len(servers))
		for i, s := range servers {
			n := nodeFor(t, s)
			nodes[i] = slowAcquire{Node: n, Subscriber: n}
			if i == 2 {
				nodes[i] = hungRelease{slowAcquire{Node: n, Subscriber: n, delay: 300 * time.Millisecond}, unblock}
			}
		}
		hung, err := core.NewCluster(nodes)
		require.NoError(t, err)
		w := lock("hung")
		w.NodeTimeout = 10 * time.Second
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		_, err = hung.AcquireWait(ctx, w, patient)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		hung.Wait()
		assert.Equal(t, 150*time.Millisecond+3*w.NodeTimeout, time.Since(start))
	})
}

// countedSlow is slowAcquire that counts the acquire calls it sends.
type countedSlow struct {
	slowAcquire
	acquires *atomic.Int64
}

func (n countedSlow) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if s.Name() == "acquire" {
		n.acquires.Add(1)
	}
	return n.slowAcquire.Eval(ctx, s, keys, args...)
}

// slowThird returns a Cluster over servers (3) whose third node sends each acquire call
// delay late, and the count of acquire calls sent.
func slowThird(t *testing.T, servers []server, delay time.Duration) (*core.Cluster, *atomic.Int64) {
	return slowNodes(t, servers, 0, delay)
}

// slowNodes is slowThird with every other node's acquire calls sent base late.
func slowNodes(t *testing.T, servers []server, base, delay time.Duration) (*core.Cluster, *atomic.Int64) {
	var calls atomic.Int64
	nodes := make([]core.Node, len(servers))
	for i, s := range servers {
		n := nodeFor(t, s)
		slow := slowAcquire{Node: n, Subscriber: n, delay: base}
		if i == 2 {
			slow.delay = delay
		}
		nodes[i] = countedSlow{slow, &calls}
	}
	cl, err := core.NewCluster(nodes)
	require.NoError(t, err)
	return cl, &calls
}

// TestWaiterRefusedByAQuorumDoesNotWaitForTheRest: a waiter's attempt that a quorum refused
// returns at once, without waiting for a slow node (1 s late here) to answer; the slow
// node's call still lands, and queues the waiter there too.
func TestWaiterRefusedByAQuorumDoesNotWaitForTheRest(t *testing.T) {
	inBubble(t, 3, func(t *testing.T, servers []server) {
		cl := newCluster(t, servers)
		holder := hold(t, cl, servers, "quorum")
		slow, _ := slowThird(t, servers, time.Second)
		l := lock("quorum")
		l.NodeTimeout = 10 * time.Second
		start := time.Now()
		_, err := slow.AcquireAs(context.Background(), l, "w.1", "w", 1)
		require.ErrorIs(t, err, core.ErrHeld)
		assert.Equal(t, time.Duration(0), time.Since(start), "the attempt waited for the slow node")
		advance(time.Second - time.Nanosecond)
		assert.Equal(t, []int64{1, 1, 0}, queued(t, servers, holder.Keys), "the slow node's call landed early")
		advance(time.Nanosecond)
		assert.Equal(t, []int64{1, 1, 1}, queued(t, servers, holder.Keys), "the slow node's call did not land")
	})
}

// refusedNode fails every call as a server that refuses connections does.
type refusedNode struct{ core.Node }

func (refusedNode) Eval(context.Context, *core.Script, []string, ...string) ([]int64, error) {
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
}

// TestWaiterStopsWaitingOnceAQuorumRefused: a waiter's attempt that a suspected node (its
// last call failed) put out of reach after two refusals hears the other nodes out only
// until a third refuses: a slow node (1 s late here) does not hold it back.
func TestWaiterStopsWaitingOnceAQuorumRefused(t *testing.T) {
	inBubble(t, 5, func(t *testing.T, servers []server) {
		holder := hold(t, newCluster(t, servers), servers, "quorum-refused")
		nodes := make([]core.Node, len(servers))
		for i, s := range servers {
			n := nodeFor(t, s)
			switch i {
			case 2:
				nodes[i] = slowAcquire{Node: n, Subscriber: n, delay: time.Second}
			case 4:
				nodes[i] = refusedNode{n}
			default:
				nodes[i] = n
			}
		}
		cl, err := core.NewCluster(nodes)
		require.NoError(t, err)
		l := lock("quorum-refused")
		l.NodeTimeout = 10 * time.Second
		// The first attempt finds node 4 down; the second does not wait for it.
		_, err = cl.AcquireAs(context.Background(), l, "w.1", "w", 1)
		require.ErrorIs(t, err, core.ErrHeld)
		start := time.Now()
		_, err = cl.AcquireAs(context.Background(), l, "w.2", "w", 1)
		require.ErrorIs(t, err, core.ErrHeld, "three nodes refused")
		assert.Equal(t, time.Duration(0), time.Since(start), "the attempt waited for the slow node")
		require.NoError(t, cl.Release(context.Background(), holder))
	})
}

// lapsedAhead queues, on s, ghosts waiters for k with tickets from 1 whose places lapsed
// long ago (crashed waiters: their alive stamps are in 1970).
func lapsedAhead(t *testing.T, s server, k core.Keys, from, ghosts int) {
	t.Helper()
	for i := from; i < from+ghosts; i++ {
		id := fmt.Sprintf("ghost-%d", i)
		_, err := s.do("ZADD", k.Queue, strconv.Itoa(i), id)
		require.NoError(t, err)
		_, err = s.do("ZADD", k.Alive, "1", id)
		require.NoError(t, err)
	}
}

// TestLiveWaiterBehindManyLapsedKeepsItsTurn: a live waiter behind 70 waiters whose places
// lapsed (more than a call forgets: 64) keeps its turn. A caller that does not wait, and a
// waiter that came later, are refused while the scan has not reached it, and the live
// waiter takes the free lock at its next attempt, once the lapsed are forgotten.
func TestLiveWaiterBehindManyLapsedKeepsItsTurn(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		cl := newCluster(t, []server{s})
		l := lock("crowd")
		l.NodeTimeout = 10 * time.Second // a place kept 45 s: no waiter's lapses here
		k := l.Keys
		ctx := context.Background()
		_, err := s.do("SET", k.Lock, "another", "PX", "60000")
		require.NoError(t, err)
		_, err = cl.AcquireAs(ctx, l, "live.1", "live", 100)
		require.ErrorIs(t, err, core.ErrHeld)
		// The holder's TTL runs out; 70 crashed waiters came before the live one.
		_, err = s.do("DEL", k.Lock)
		require.NoError(t, err)
		lapsedAhead(t, s, k, 1, 70)

		_, err = cl.Acquire(ctx, l)
		require.ErrorIs(t, err, core.ErrHeld, "a caller that does not wait took the lock past a live waiter behind 70 lapsed ones")
		_, err = cl.AcquireAs(ctx, l, "later.1", "later", 200)
		require.ErrorIs(t, err, core.ErrHeld, "a later waiter took the lock past a live waiter behind lapsed ones")
		h, err := cl.AcquireAs(ctx, l, "live.2", "live", 100)
		require.NoError(t, err, "the live waiter did not take the free lock at its next attempt")
		assert.Equal(t, "live.2", get(t, s, k.Lock))
		v, err := s.do("ZRANGE", k.Queue, "0", "-1")
		require.NoError(t, err)
		// A holder is in no queue.
		assert.Equal(t, []any{"later"}, v, "the lapsed waiters are not all forgotten")
		require.NoError(t, cl.Release(ctx, h))
	})
}

// TestSemaphoreBehindManyLapsedSaysCallAgain: a waiter for a semaphore whose permits are
// free, behind more lapsed waiters than a call forgets (70 > 64), is refused and told to
// call again at once (the value 1), as a lock's waiter is: no release will wake it while
// the permits are free. Its next call forgets the rest and takes a permit.
func TestSemaphoreBehindManyLapsedSaysCallAgain(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		node := nodeFor(t, s)
		k := core.NewSemaphoreKeys("crowd:", "s", 2)
		keys := append(k.ScriptKeys(), k.Permits...)
		args := func(token string) []string {
			a := acquireArgs(token, "0", "live", 1000)
			a[8] = "2" // a semaphore of 2
			return a
		}
		lapsedAhead(t, s, k, 1, 70)
		ctx := context.Background()
		r, err := node.Eval(ctx, script(t, "acquire"), keys, args("live.1")...)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(r), 2)
		assert.Equal(t, []int64{0, 1}, r[:2], "refused behind 70 lapsed waiters, and told to call again")
		r, err = node.Eval(ctx, script(t, "acquire"), keys, args("live.2")...)
		require.NoError(t, err)
		assert.Equal(t, int64(1), r[0], "the next call forgot the rest and took a permit")
	})
}

// TestSemaphoreWaitersBeyondTheScanCount: with 2 permits free and two live waiters queued,
// one at the head and one behind 64 lapsed waiters (more than a call reads past the head:
// 64), a caller that does not wait is refused: the scan that ran out may have missed a live
// waiter ahead.
func TestSemaphoreWaitersBeyondTheScanCount(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		cl := newCluster(t, []server{s})
		l := semLock("crowd", 2)
		k := l.Keys
		ctx := context.Background()
		for _, p := range k.Permits {
			_, err := s.do("SET", p, "another", "PX", "60000")
			require.NoError(t, err)
		}
		for _, w := range []struct {
			id     string
			ticket int64
		}{{"first", 1}, {"live", 100}} {
			_, err := cl.AcquireAs(ctx, l, w.id+".1", w.id, w.ticket)
			require.ErrorIs(t, err, core.ErrHeld)
		}
		// Both holders' TTLs run out; 64 crashed waiters came between the live two.
		_, err := s.do(append([]string{"DEL"}, k.Permits...)...)
		require.NoError(t, err)
		lapsedAhead(t, s, k, 2, 64)

		_, err = cl.Acquire(ctx, l)
		require.ErrorIs(t, err, core.ErrHeld, "a caller that does not wait took one of 2 free permits past 2 live waiters")
	})
}
