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
