package redlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// silentSubscriber is a Node whose Subscribe never answers before its context ends, as a
// node behind a partition.
type silentSubscriber struct{ redlock.Node }

func (n silentSubscriber) Subscribe(ctx context.Context, _ string, _ func(string)) (func(), error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestObserveSubscribesToTheNodesAtOnce: Observe subscribes to every node at once, as a
// waiter does, and does not wait for a node that does not answer once a quorum has
// confirmed: with one of three nodes silent, its channel gives the current leader with no
// time passed, and a new leader's record wakes it at once.
func TestObserveSubscribesToTheNodesAtOnce(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, _ := simNodes(t, 3)
		wrapped := []redlock.Node{silentSubscriber{nodes[0]}, nodes[1], nodes[2]}
		c := newClient(t, wrapped, redlock.WithNodeTimeout(time.Second))
		defer c.Close()
		e := c.NewElection("watched")
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		start := time.Now()
		seen := e.Observe(ctx)
		require.Equal(t, "", <-seen)
		assert.Equal(t, time.Duration(0), time.Since(start), "Observe waited for the silent node")

		l, err := e.Campaign(t.Context(), "first")
		require.NoError(t, err)
		campaigned := time.Now()
		require.Equal(t, "first", <-seen)
		assert.Equal(t, time.Duration(0), time.Since(campaigned), "the record's notification did not wake Observe")
		require.NoError(t, l.Release(t.Context()))
		stop()
		for range seen {
		}
	})
}

var _ core.Subscriber = silentSubscriber{}

// closedDriver is a Node whose driver client was closed: every call fails with an error
// that matches core.ErrClosed, which no retry can fix.
type closedDriver struct{ redlock.Node }

func (closedDriver) EvalStrings(context.Context, *core.Script, []string, ...string) ([]string, error) {
	return nil, core.ErrClosed
}

// TestObserveEndsAtAnErrorNoRetryCanFix: Observe's channel closes at once when reading the
// leader fails for good (every node's driver client closed), instead of checking again
// until its context ends.
func TestObserveEndsAtAnErrorNoRetryCanFix(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, _ := simNodes(t, 3)
		wrapped := make([]redlock.Node, len(nodes))
		for i, n := range nodes {
			wrapped[i] = closedDriver{n}
		}
		c := newClient(t, wrapped)
		defer c.Close()
		ctx, stop := context.WithTimeout(t.Context(), time.Minute)
		defer stop()
		start := time.Now()
		_, open := <-c.NewElection("gone").Observe(ctx)
		assert.False(t, open)
		assert.Less(t, time.Since(start), time.Second, "Observe kept checking a leader that no node can report")
	})
}

// TestObserveSendsANewLeaderWithTheSameValue: a leader handed over to another candidate
// that campaigns with the same value is a new leader, and Observe sends its value.
func TestObserveSendsANewLeaderWithTheSameValue(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, _ := simNodes(t, 3)
		a, b := closingClient(t, nodes), closingClient(t, nodes)
		ctx := ctxT(t, time.Minute)
		octx, stop := context.WithCancel(ctx)
		defer stop()
		seen := a.NewElection("same").Observe(octx)
		require.Equal(t, "", <-seen)
		first, err := a.NewElection("same").Campaign(ctx, "svc")
		require.NoError(t, err)
		require.Equal(t, "svc", <-seen)
		next := make(chan *redlock.Lease, 1)
		go func() {
			l, err := b.NewElection("same").Campaign(ctx, "svc")
			assert.NoError(t, err)
			next <- l
		}()
		synctest.Wait() // the second candidate waits
		require.NoError(t, first.Release(ctx))
		second := <-next // handed over: no check of Observe's came between
		require.NotNil(t, second)
		timeout := time.After(time.Second) // four refresh intervals
		for {
			select {
			case v := <-seen:
				if v == "" { // a check between the two leaders
					continue
				}
				assert.Equal(t, "svc", v)
			case <-timeout:
				t.Fatal("Observe did not send the new leader")
			}
			break
		}
		require.NoError(t, second.Release(ctx))
	})
}
