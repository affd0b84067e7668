package core

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestQuorumErrorListsEveryNode: a QuorumError says what every node answered, the healthy
// ones too: yes, no, not heard before the outcome was decided, or its error. In virtual time
// node0 answers at once, node1, node2 and node3 a millisecond later (which decides the
// outcome: node4's refusal could not make it ErrHeld), and node4 only after the test.
func TestQuorumErrorListsEveryNode(t *testing.T) {
	bubble(t, func(t *testing.T) {
		late := make(chan struct{})
		defer close(late)
		after := func(f func(context.Context, *Script) ([]int64, error)) func(context.Context, *Script) ([]int64, error) {
			return func(ctx context.Context, s *Script) ([]int64, error) {
				time.Sleep(time.Millisecond)
				return f(ctx, s)
			}
		}
		c, _ := cluster(t, grants(1), after(failing), after(held(1000)), after(failing),
			func(context.Context, *Script) ([]int64, error) { <-late; return []int64{1, 1}, nil })
		l := testLock()
		l.NodeTimeout = 10 * time.Second
		_, err := c.Acquire(context.Background(), l)
		var q *QuorumError
		require.True(t, errors.As(err, &q), "%v", err)
		assert.Equal(t, []string{"node0"}, q.Yes)
		assert.Equal(t, []string{"node2"}, q.No)
		assert.Equal(t, []string{"node4"}, q.Unheard)
		require.Len(t, q.Errs, 2)
		for _, want := range []string{`acquire "x": no quorum: 1 of 5 nodes said yes, 3 needed, 1 said no`,
			"node0: yes", "node2: no", "node4: not heard", "node1: connection refused", "node3: connection refused"} {
			assert.Contains(t, err.Error(), want)
		}
	})
}

// TestQuorumErrorNamesATimedOutNodeOnce: a node that did not answer by the deadline is
// listed with its timeout, not also as one not heard.
func TestQuorumErrorNamesATimedOutNodeOnce(t *testing.T) {
	bubble(t, func(t *testing.T) {
		c, _ := cluster(t, grants(1), hangs, hangs)
		l := testLock()
		_, err := c.Acquire(context.Background(), l)
		var q *QuorumError
		require.True(t, errors.As(err, &q), "%v", err)
		assert.Empty(t, q.Unheard)
		require.Len(t, q.Errs, 2)
		assert.ErrorIs(t, err, ErrNodeTimeout)
	})
}

// TestAttemptTimeOfAnInstantAnswer: an attempt's time is the time to hear the last node that
// answered, also when that is no time at all (virtual time), not the whole attempt.
func TestAttemptTimeOfAnInstantAnswer(t *testing.T) {
	bubble(t, func(t *testing.T) {
		c, _ := cluster(t, held(1000), hangs, hangs)
		l := testLock()
		_, o, err := c.acquire(context.Background(), claimOf(l))
		require.Error(t, err)
		assert.Zero(t, o.took, "the attempt's time counted the nodes that timed out")
	})
}

// TestQuorumErrorOfAReleaseNamesEachNodeOnce: a release that fails hears every node out
// for its error, after the deadline too: a node that did not answer is listed once, past
// the 64th node too.
func TestQuorumErrorOfAReleaseNamesEachNodeOnce(t *testing.T) {
	for _, n := range []int{3, 67} {
		t.Run(fmt.Sprint("N=", n), func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				evals := []func(context.Context, *Script) ([]int64, error){grants(1)}
				var want []string
				for i := 1; i < n; i++ {
					evals = append(evals, hangs)
					want = append(want, fmt.Sprint("node", i))
				}
				c, _ := cluster(t, evals...)
				err := c.Release(context.Background(), testHeld(testLock()))
				var q *QuorumError
				require.True(t, errors.As(err, &q), "%v", err)
				var named []string
				for _, e := range q.Errs {
					named = append(named, e.Node)
				}
				assert.ElementsMatch(t, want, named)
			})
		})
	}
}
