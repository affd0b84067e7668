package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEvenNodesAreWarnedOf: an even N tolerates no more failures than N - 1, so New says
// so on the logger; an odd N says nothing.
func TestEvenNodesAreWarnedOf(t *testing.T) {
	nodes, _ := miniNodes(t, 4)
	for _, n := range []int{1, 2, 3, 4} {
		logger, logs := logBuffer()
		c, err := redlock.New(nodes[:n], redlock.WithRestartGuard(0), redlock.WithLogger(logger))
		require.NoError(t, err, "an even N is allowed")
		_ = c.Close()
		if n%2 == 0 {
			assert.Contains(t, logs.String(), "even number of nodes", "N = %d", n)
			assert.Contains(t, logs.String(), "tolerate", "N = %d", n)
		} else {
			assert.Empty(t, logs.String(), "N = %d", n)
		}
	}
}

// TestDoSaysTheCauseOnce: fn that returns its context's cause, as a function that stops when
// told should, gets an error that says the lease's end once.
func TestDoSaysTheCauseOnce(t *testing.T) {
	nodes, _ := miniNodes(t, 3)
	c, err := redlock.New(nodes, redlock.WithRestartGuard(0), patient)
	require.NoError(t, err)
	err = c.Do(ctxT(t, time.Minute), "job", func(ctx context.Context) error {
		go func() { _ = c.Close() }() // ends the lease with ErrClosed
		<-ctx.Done()
		return context.Cause(ctx)
	})
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	require.ErrorIs(t, err, redlock.ErrClosed)
	assert.Equal(t, 1, strings.Count(err.Error(), "client is closed"), "the cause said more than once: %v", err)
	assert.Contains(t, err.Error(), `"job"`)
}

// TestAWaiterThatGivesUpLeavesNothing: a waiter whose context ends at any moment of its
// attempts (here from 0 to 3 ms in, before, during or after its first calls land) leaves
// no place and no lock behind: once the holder releases, a newcomer takes the lock in its
// first attempt.
func TestAWaiterThatGivesUpLeavesNothing(t *testing.T) {
	nodes, servers := miniNodes(t, 3)
	opts := []redlock.Option{redlock.WithNodeTimeout(5 * time.Second)} // nothing here waits for one
	holder, newcomer := newClient(t, nodes, opts...), newClient(t, nodes, opts...)
	for i := range 100 {
		name := fmt.Sprintf("quitter:%d", i)
		l, err := holder.Acquire(ctxT(t, 10*time.Second), name)
		require.NoError(t, err)
		quitter := newClient(t, nodesOf(t, servers), opts...)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%30)*100*time.Microsecond)
		_, err = quitter.Acquire(ctx, name)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NoError(t, l.Release(ctxT(t, 10*time.Second)))
		require.NoError(t, quitter.Close()) // which waits for its leaves

		l, err = newcomer.TryAcquire(ctxT(t, 10*time.Second), name)
		if err != nil {
			for j, s := range servers {
				for _, k := range s.Keys() {
					v := s.Type(k)
					switch v {
					case "string":
						v, _ = s.Get(k)
					case "zset":
						m, _ := s.ZMembers(k)
						v = fmt.Sprint(m)
					}
					t.Logf("node %d: %s = %s", j, k, v)
				}
			}
			t.Fatalf("round %d: the newcomer found the lock taken: %v", i, err)
		}
		require.NoError(t, l.Release(ctxT(t, 10*time.Second)))
	}
}
