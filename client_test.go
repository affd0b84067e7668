package redlock_test

import (
	"context"
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
