package core_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFirstAttemptSetsNX: AcquireWait's first attempt takes a free lock with a plain SET NX
// PX on the nodes that are Setters, unless it asks for the restart guard or a fencing
// token; a single Acquire, and every later attempt, runs the acquire script.
func TestFirstAttemptSetsNX(t *testing.T) {
	cases := []struct {
		name     string
		setup    func(*core.Lock)
		wait     bool // AcquireWait, else Acquire
		wantSets bool
	}{
		{"plain", func(*core.Lock) {}, true, true},
		{"fenced", func(l *core.Lock) { l.Fence = true }, true, false},
		{"guarded", func(l *core.Lock) { l.Guard = time.Second }, true, false},
		{"single attempt", func(*core.Lock) {}, false, false},
		{"contended", func(l *core.Lock) { l.Contended = true }, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			servers := miniServers(t, 3)
			cl, counted := countedCluster(t, servers)
			identify(t, cl, counted...)
			l := lock("plain")
			c.setup(l)
			var g *core.Held
			var err error
			if c.wait {
				g, err = cl.AcquireWait(context.Background(), l, patient)
			} else {
				g, err = cl.Acquire(context.Background(), l)
			}
			require.NoError(t, err)
			assert.Equal(t, 1, g.Attempts, "attempts")
			for i, s := range servers { // Acquire returns at a quorum: wait for the last node
				require.Eventually(t, func() bool { return get(t, s, l.Keys.Lock) == g.Token() }, 5*time.Second, time.Millisecond,
					"server %d does not hold the lock", i)
				pttl, err := s.do("PTTL", l.Keys.Lock)
				require.NoError(t, err)
				assert.InDelta(t, l.TTL.Milliseconds(), pttl, 1000, "server %d: the lock's TTL", i)
				if c.wantSets {
					assert.Equal(t, int64(1), counted[i].sets.Load(), "server %d: SET NX calls", i)
					assert.Zero(t, counted[i].acquires.Load(), "server %d: acquire scripts run", i)
				} else {
					assert.Zero(t, counted[i].sets.Load(), "server %d: SET NX calls", i)
					assert.Equal(t, int64(1), counted[i].acquires.Load(), "server %d: acquire scripts run", i)
				}
			}
			if c.wait {
				assert.True(t, strings.HasSuffix(g.Token(), ".1"), "the first attempt's token: %s", g.Token())
			}
			require.NoError(t, cl.Release(context.Background(), g))
		})
	}
}

// identify makes cl's nodes known (a Cluster's first acquisition on a node runs the acquire
// script, which says which server the node reaches: see core's identity), with a lock of
// its own, and zeroes the counts of nodes.
func identify(t *testing.T, cl *core.Cluster, nodes ...*counted) {
	t.Helper()
	id := lock("identify")
	id.NodeTimeout = time.Second // a node whose call timed out is not known
	l, err := cl.Acquire(context.Background(), id)
	require.NoError(t, err)
	require.NoError(t, cl.Release(context.Background(), l))
	for _, n := range nodes {
		n.sets.Store(0)
		n.acquires.Store(0)
		n.raises.Store(0)
	}
}

// TestRefusedSetNXQueuesOnTheNextAttempt: a waiter whose SET NX finds the lock held
// queues on its next attempt, at once, and a release then hands it the lock; its SET NX
// was its only one. (Its script attempts take 300ms: see slowAcquires.)
func TestRefusedSetNXQueuesOnTheNextAttempt(t *testing.T) {
	for _, c := range setups {
		t.Run(c.name, func(t *testing.T) {
			servers := c.servers(t, c.n)
			cl, counted := countedCluster(t, servers)
			// Every node known first: an unknown node is sent the script (which says which
			// server it is), not SET NX, and the holder's Acquire returns before the last
			// node's reply has made it known.
			identify(t, cl, counted...)
			holder := hold(t, cl, servers, "refused")
			slowAcquires(counted, 300*time.Millisecond)

			l := lock("refused")
			l.NodeTimeout = 10 * time.Second // beyond the slowed attempts
			got := make(chan error, 1)
			var g *core.Held
			go func() {
				var err error
				g, err = cl.AcquireWait(context.Background(), l, patient)
				got <- err
			}()
			require.Eventually(t, func() bool { return allEqual(queued(t, servers, holder.Keys), 1) },
				5*time.Second, time.Millisecond, "the waiter is not queued: %v", queued(t, servers, holder.Keys))
			require.NoError(t, cl.Release(context.Background(), holder))
			select {
			case err := <-got:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter did not get the lock")
			}
			assert.Equal(t, 2, g.Attempts, "the hand-over goes to the second attempt, the first that queued")
			for i, s := range servers {
				assert.Equal(t, int64(1), counted[i].sets.Load(), "server %d: SET NX calls", i)
				assert.Equal(t, g.Token(), get(t, s, l.Keys.Lock), "server %d: the lock is not the waiter's", i)
			}
			require.NoError(t, cl.Release(context.Background(), g))
		})
	}
}

// TestSetNXTakesAFreeLockPastTheQueue: a plain SET NX does not look at the queue, so a
// waiter's first attempt takes a lock that is free while another waiter queues (a holder's
// TTL ran out, say), where the script's first attempt would have queued behind it.
func TestSetNXTakesAFreeLockPastTheQueue(t *testing.T) {
	servers := miniServers(t, 3)
	cl := newCluster(t, servers)
	identify(t, cl)
	k := core.NewKeys("q:", "past")
	for _, s := range servers {
		_, err := s.do("ZADD", k.Queue, "1", "other")
		require.NoError(t, err)
		_, err = s.do("ZADD", k.Alive, strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10), "other")
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l, err := cl.AcquireWait(ctx, lock("past"), patient)
	require.NoError(t, err, "the plain first attempt did not take the free lock")
	require.NoError(t, cl.Release(context.Background(), l))

	scripted := lock("past")
	scripted.Fence = true // every attempt of a fenced lock runs the script
	_, err = cl.AcquireWait(ctx, scripted, patient)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the script's attempt took a free lock past a live waiter")
}

// setterOnly is a go-redis Node that is a Setter but not a Subscriber: its waiters poll.
type setterOnly struct{ n *counted }

func (s setterOnly) Eval(ctx context.Context, sc *core.Script, keys []string, args ...string) ([]int64, error) {
	return s.n.Eval(ctx, sc, keys, args...)
}

func (s setterOnly) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return s.n.SetNX(ctx, key, value, ttl)
}

func (s setterOnly) String() string { return s.n.String() }

// TestRefusedSetNXWithoutSubscriberQueuesAtOnce: a waiter whose SET NX is refused calls
// again at once to queue, even where it cannot subscribe (its refresh interval here is
// 25 s, longer than the test).
func TestRefusedSetNXWithoutSubscriberQueuesAtOnce(t *testing.T) {
	servers := miniServers(t, 3)
	cl, counts := countedCluster(t, servers)
	holder := hold(t, cl, servers, "polls")
	nodes := make([]core.Node, len(counts))
	for i, c := range counts {
		nodes[i] = setterOnly{c}
	}
	polling, err := core.NewCluster(nodes)
	require.NoError(t, err)
	identify(t, polling, counts...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := lock("polls")
	w.NodeTimeout = 10 * time.Second
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = polling.AcquireWait(ctx, w, patient)
	}()
	require.Eventually(t, func() bool { return allEqual(queued(t, servers, holder.Keys), 1) },
		5*time.Second, time.Millisecond, "the waiter is not queued: %v", queued(t, servers, holder.Keys))
	assert.Equal(t, int64(3), sum(counts, func(n *counted) *atomic.Int64 { return &n.sets }), "the first attempt's SET NX")
	cancel()
	<-done
}

// TestMixedClusterFirstAttempt: where only some nodes are Setters, a plain first attempt
// sends SET NX to those and the acquire script to the others, and takes the lock on all;
// a waiter on such a cluster still queues and gets the lock by hand-over.
func TestMixedClusterFirstAttempt(t *testing.T) {
	servers := miniServers(t, 3)
	_, counts := countedCluster(t, servers)
	nodes := []core.Node{counts[0], counts[1], slowAcquire{Node: counts[2], Subscriber: counts[2]}} // the last is no Setter
	cl, err := core.NewCluster(nodes)
	require.NoError(t, err)
	identify(t, cl, counts...)

	l, err := cl.AcquireWait(context.Background(), lock("mixed"), patient)
	require.NoError(t, err)
	for i, s := range servers {
		require.Eventually(t, func() bool { return get(t, s, l.Keys.Lock) == l.Token() }, 5*time.Second, time.Millisecond,
			"server %d does not hold the lock", i)
	}
	assert.Equal(t, []int64{1, 1, 0}, []int64{counts[0].sets.Load(), counts[1].sets.Load(), counts[2].sets.Load()}, "SET NX calls")
	assert.Equal(t, []int64{0, 0, 1}, []int64{counts[0].acquires.Load(), counts[1].acquires.Load(), counts[2].acquires.Load()}, "acquire scripts")

	got := make(chan error, 1)
	var w *core.Held
	go func() {
		var err error
		w, err = cl.AcquireWait(context.Background(), lock("mixed"), patient)
		got <- err
	}()
	require.Eventually(t, func() bool { return allEqual(queued(t, servers, l.Keys), 1) },
		5*time.Second, time.Millisecond, "the waiter is not queued: %v", queued(t, servers, l.Keys))
	require.NoError(t, cl.Release(context.Background(), l))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock")
	}
	require.NoError(t, cl.Release(context.Background(), w))
}
