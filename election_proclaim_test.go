package redlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
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

// TestLeaderKeepsItsRecordThroughFailures: a leader's refresh of its record that fails on
// too many nodes (a passing fault) is tried again, as Campaign's first record is, so the
// record does not lapse while it leads (its records last core.FenceIdle, refreshed every
// half of that).
func TestLeaderKeepsItsRecordThroughFailures(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, _ := simNodes(t, 3)
		var fails atomic.Int32
		wrapped := []redlock.Node{nodes[0], failingProclaims{nodes[1], &fails}, failingProclaims{nodes[2], &fails}}
		c := newClient(t, wrapped)
		defer c.Close()
		e := c.NewElection("kept")
		l, err := e.Campaign(t.Context(), "leader")
		require.NoError(t, err)
		fails.Store(4) // both wrapped nodes, at two refreshes in a row were they not tried again
		time.Sleep(core.FenceIdle + time.Minute)
		v, err := e.Leader(t.Context())
		require.NoError(t, err, "the leader's record lapsed while it led")
		assert.Equal(t, "leader", v)
		assert.LessOrEqual(t, fails.Load(), int32(0), "the refreshes met the failures")
		require.NoError(t, l.Release(t.Context()))
	})
}
