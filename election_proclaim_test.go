package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/simnet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failingProclaims fails the proclaim script while fails is above 0, counting it down.
type failingProclaims struct {
	redlock.Node
	fails *atomic.Int32
}

func (n failingProclaims) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if s.Name() == "proclaim" && n.fails.Add(-1) >= 0 {
		return nil, errors.New("connection reset")
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestCampaignRecordsItsValueThroughFailures: a candidate that took the lock, but whose
// first records of its value failed on too many nodes (a passing fault), records it
// again and leads, instead of resigning.
func TestCampaignRecordsItsValueThroughFailures(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, _ := simNodes(t, 3)
		var fails atomic.Int32
		fails.Store(4) // two nodes, twice: the first two records fail
		wrapped := make([]redlock.Node, len(nodes))
		for i, n := range nodes {
			wrapped[i] = n
			if i > 0 {
				wrapped[i] = failingProclaims{n, &fails}
			}
		}
		c := newClient(t, wrapped)
		defer c.Close()
		e := c.NewElection("vote")
		l, err := e.Campaign(t.Context(), "first")
		require.NoError(t, err)
		v, err := e.Leader(t.Context())
		require.NoError(t, err)
		assert.Equal(t, "first", v)
		require.NoError(t, l.Release(t.Context()))
	})
}

// TestCampaignResignsWhenItsContextEnds: a candidate whose records keep failing resigns
// when its context ends, and returns an error that says why.
func TestCampaignResignsWhenItsContextEnds(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 3)
		var fails atomic.Int32
		fails.Store(1 << 30)
		wrapped := make([]redlock.Node, len(nodes))
		for i, n := range nodes {
			wrapped[i] = failingProclaims{n, &fails}
		}
		c := newClient(t, wrapped)
		defer c.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err := c.NewElection("vote").Campaign(ctx, "first")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, redlock.ErrNoQuorum, "the last record's error")
		for i, s := range servers {
			assert.False(t, s.Miniredis().Exists(core.NewKeys("redlock:", "vote").Lock), "server %d: the candidate did not resign", i)
		}
	})
}

// TestLeaderKeepsItsRecordThroughFailures: a leader's records of its value that fail on
// too many nodes (a passing fault) are tried again, so the record does not lapse while it
// leads (a record lasts core.FenceIdle).
func TestLeaderKeepsItsRecordThroughFailures(t *testing.T) {
	t.Parallel() // see bubble_test.go
	bubble(t, func(t *testing.T) {
		nodes, _ := simNodes(t, 3)
		var fails atomic.Int32
		wrapped := []redlock.Node{nodes[0], failingProclaims{nodes[1], &fails}, failingProclaims{nodes[2], &fails}}
		c := newClient(t, wrapped)
		defer c.Close()
		e := c.NewElection("kept")
		l, err := e.Campaign(t.Context(), "leader")
		require.NoError(t, err)
		fails.Store(4) // both wrapped nodes, at two records in a row
		time.Sleep(core.FenceIdle + time.Minute)
		v, err := e.Leader(t.Context())
		require.NoError(t, err, "the leader's record lapsed while it led")
		assert.Equal(t, "leader", v)
		assert.LessOrEqual(t, fails.Load(), int32(0), "the refreshes met the failures")
		require.NoError(t, l.Release(t.Context()))
	})
}

// TestLeaderRecordStandsWhereTheLockStands: a leader whose first record missed a node (a
// passing fault) and then lost another node to a restart still holds its lock on a quorum,
// and Leader names it while it does, and Observe sends no other value: its record stands
// wherever its lock does (the leader records it again on the node that missed it), not
// only where it stood after Campaign.
func TestLeaderRecordStandsWhereTheLockStands(t *testing.T) {
	t.Parallel() // see bubble_test.go
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 3)
		var fails atomic.Int32
		fails.Store(2) // Campaign's record and the next fail on node 0 only: Campaign returns at a quorum
		wrapped := []redlock.Node{failingProclaims{nodes[0], &fails}, nodes[1], nodes[2]}
		c := newClient(t, wrapped, redlock.WithNodeTimeout(time.Second)) // Observe checks every 2.5 s
		defer c.Close()
		e := c.NewElection("standing")
		l, err := e.Campaign(t.Context(), "leader")
		require.NoError(t, err)
		octx, stop := context.WithCancel(t.Context())
		seen := e.Observe(octx)
		require.Equal(t, "leader", <-seen)
		var observed []string
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			for v := range seen {
				observed = append(observed, v)
			}
		}()
		time.Sleep(time.Second) // the second fault comes later: a restart
		servers[1].Crash()
		servers[1].Restart()         // node 1 loses the lock and the record; node 0 holds the lock alone beside node 2
		_, _ = e.Leader(t.Context()) // meets the connection the crash closed, which the pool then drops
		start := time.Now()
		for _, at := range []time.Duration{5 * time.Second, time.Minute, 10 * time.Minute} {
			time.Sleep(time.Until(start.Add(at)))
			require.NoError(t, l.Err(), "%v after the restart: the lease ended", at)
			v, err := e.Leader(t.Context())
			require.NoError(t, err, "%v after the restart: Leader while the leader holds its lock on a quorum", at)
			assert.Equal(t, "leader", v)
		}
		stop()
		<-watched
		assert.Empty(t, observed, "Observe said the leader changed while it led")
		require.NoError(t, l.Release(t.Context()))
	})
}

// TestLeaderRecordOnANodeBackEmpty: a node that was down when the leader took its lock and
// recorded its value, and that comes back empty, is not taken by the leader's extensions
// (an extension renews only what holds the caller's token): the lock and the record stand
// on the two other nodes, and the leader is named. Once one of those also comes back
// empty, the lock stands on one node: the lease ends with ErrLost, and the election has
// no leader.
func TestLeaderRecordOnANodeBackEmpty(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 3)
		c := newClient(t, nodes)
		defer c.Close()
		servers[0].Crash()
		e := c.NewElection("taken")
		l, err := e.Campaign(t.Context(), "leader")
		require.NoError(t, err)
		time.Sleep(time.Second)
		servers[0].Restart() // empty
		lock := core.NewKeys("redlock:", "taken").Lock
		start := time.Now()
		for _, at := range []time.Duration{5 * time.Second, time.Minute} {
			time.Sleep(time.Until(start.Add(at)))
			require.NoError(t, l.Err(), "%v after the restart: the lease ended", at)
			assert.False(t, servers[0].Miniredis().Exists(lock), "%v after the restart: an extension took the empty node", at)
			v, err := e.Leader(t.Context())
			require.NoError(t, err, "%v after the restart: Leader while the leader holds its lock on a quorum", at)
			assert.Equal(t, "leader", v)
		}
		servers[1].Crash()
		servers[1].Restart() // the lock stands on node 2 only
		until(t, time.Minute, "the lease's end", func() bool {
			select {
			case <-l.Done():
				return true
			default:
				return false
			}
		})
		require.ErrorIs(t, l.Err(), redlock.ErrLost)
		_, err = e.Leader(t.Context())
		require.ErrorIs(t, err, redlock.ErrNoLeader)
	})
}

// scriptCounter counts the calls of each script run through it.
type scriptCounter struct {
	redlock.Node
	mu    *sync.Mutex
	calls map[string]int
}

func (n scriptCounter) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	n.mu.Lock()
	n.calls[s.Name()]++
	n.mu.Unlock()
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestLeaderRecordCost: what keeping the record where the lock stands costs a leader over
// healthy nodes: one proclaim per node per extension (and one more as it begins, which
// hears out the nodes that Campaign's record did not wait for), and one publish per node
// in all (a record kept again is no news to Observe).
func TestLeaderRecordCost(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 3)
		var mu sync.Mutex
		counted := make([]scriptCounter, len(nodes))
		wrapped := make([]redlock.Node, len(nodes))
		for i, n := range nodes {
			counted[i] = scriptCounter{n, &mu, map[string]int{}}
			wrapped[i] = counted[i]
		}
		keys := core.NewKeys("redlock:", "cost")
		heard := make([]atomic.Int32, len(servers))
		for i, s := range servers {
			sub := simnet.Client(t, s).Subscribe(t.Context(), keys.LeaderChannel())
			_, err := sub.Receive(t.Context()) // the subscription is active
			require.NoError(t, err)
			go func() {
				for range sub.Channel() {
					heard[i].Add(1)
				}
			}()
			t.Cleanup(func() { _ = sub.Close() })
		}
		c := newClient(t, wrapped)
		defer c.Close()
		l, err := c.NewElection("cost").Campaign(t.Context(), "leader")
		require.NoError(t, err)
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		for i, n := range counted {
			t.Logf("node %d: %d extensions, %d proclaims", i, n.calls["extend"], n.calls["proclaim"])
			assert.GreaterOrEqual(t, n.calls["extend"], 8, "node %d: the lease extended when a third of its validity was left", i)
			assert.Equal(t, n.calls["extend"]+2, n.calls["proclaim"], "node %d: proclaims beside extensions", i)
			assert.Equal(t, int32(1), heard[i].Load(), "node %d: publishes of the record", i)
		}
		mu.Unlock()
		require.NoError(t, l.Release(t.Context()))
	})
}

// TestElectionProclaim: a leader changes its value without a new election: Leader returns
// the new value, Observe sends it (the same token), and the leader's records after its
// extensions keep the new value, not Campaign's. A value too long, a Lease that is not this
// Election's leader, and a leader that resigned are refused.
func TestElectionProclaim(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, _ := simNodes(t, 3)
		c := closingClient(t, nodes, redlock.WithTTL(time.Second))
		e := c.NewElection("office")
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		l, err := e.Campaign(ctx, "first")
		require.NoError(t, err)
		seen := e.Observe(ctx)
		require.Equal(t, "first", <-seen)
		token := l.Token()

		require.NoError(t, e.Proclaim(ctx, l, "second"))
		v, err := e.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, "second", v)
		assert.Equal(t, "second", <-seen, "Observe sends a leader's new value")
		assert.Equal(t, token, l.Token(), "the same leader")

		time.Sleep(5 * time.Second) // several extensions, each followed by a record
		synctest.Wait()
		v, err = e.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, "second", v, "the records after the extensions put back Campaign's value")
		select {
		case v := <-seen:
			t.Fatalf("Observe sent %q while the leader and its value stayed", v)
		default:
		}

		assert.ErrorIs(t, e.Proclaim(ctx, l, strings.Repeat("x", core.MaxValueLen+1)), redlock.ErrInvalid)
		other, err := c.Acquire(ctx, "office-lock")
		require.NoError(t, err)
		assert.ErrorIs(t, e.Proclaim(ctx, other, "x"), redlock.ErrInvalid, "a Lease of Acquire")
		assert.ErrorIs(t, c.NewElection("elsewhere").Proclaim(ctx, l, "x"), redlock.ErrInvalid, "another Election's leader")
		assert.ErrorIs(t, e.Proclaim(ctx, nil, "x"), redlock.ErrInvalid, "no leader")
		require.NoError(t, l.Release(ctx))
		err = e.Proclaim(ctx, l, "third")
		assert.ErrorIs(t, err, redlock.ErrNotHeld, "a leader that resigned")
		assert.ErrorContains(t, err, `"office"`)
	})
}
