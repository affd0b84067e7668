package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReleaseDuringHungExtension: a Release that comes while the lease's automatic
// extension waits on a majority of hung nodes waits for that extension (the two run one at
// a time), and then returns the release's *QuorumError, within two node timeouts of virtual
// time: one for the extension, one for its own calls. The extension holds the Lease's lock
// while it waits for the clock, so the release must wait in a way that lets the bubble's
// clock move on.
func TestReleaseDuringHungExtension(t *testing.T) {
	const (
		ttl         = 3 * time.Second
		nodeTimeout = 200 * time.Millisecond
	)
	// A bubble whose clock stops never ends, and no bound in virtual time fires: fail in
	// real time instead, long before the test binary's -timeout.
	stop := watchdog(30*time.Second, "TestReleaseDuringHungExtension: the bubble's clock stopped (a Release waiting for the extension is not durably blocked)")
	defer stop()
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 3)
		var rec recorder
		c := closingClient(t, nodes, redlock.WithTTL(ttl), redlock.WithNodeTimeout(nodeTimeout),
			redlock.WithAutoExtend(true), redlock.WithObserver(&rec))
		ctx := ctxT(t, time.Minute)
		start := time.Now()
		l, err := c.TryAcquire(ctx, "job")
		require.NoError(t, err)
		servers[1].Hang()
		servers[2].Hang()

		// The extension is due when a third of the validity is left, and then waits a node
		// timeout for the hung nodes: release in the middle of that wait.
		due := l.Until().Add(-l.Until().Sub(start) / 3)
		time.Sleep(time.Until(due) + nodeTimeout/2)
		require.Empty(t, rec.snapshot().extended, "the extension returned before the release")

		released := make(chan error, 1)
		called := time.Now()
		go func() { released <- l.Release(context.Background()) }()
		var rerr error
		select {
		case rerr = <-released:
		case <-time.After(2 * nodeTimeout):
			t.Fatalf("Release did not return within %v of virtual time", 2*nodeTimeout)
		}
		took := time.Since(called)

		var qe *redlock.QuorumError
		require.ErrorAs(t, rerr, &qe, "release with 2 of 3 nodes hung")
		assert.NotErrorIs(t, rerr, redlock.ErrNotHeld)
		assert.ErrorIs(t, l.Err(), redlock.ErrReleased)
		select {
		case <-l.Done():
		default:
			t.Error("Done not closed after Release")
		}
		// The release waited for the extension, which failed on the hung nodes first.
		ext := rec.snapshot().extended
		require.Len(t, ext, 1, "extensions")
		assert.True(t, ext[0].Auto)
		assert.Error(t, ext[0].Err)
		assert.False(t, ext[0].Start.Add(ext[0].Duration).After(called.Add(took)), "the extension ended after the release")
		assert.GreaterOrEqual(t, took, nodeTimeout/2, "the release did not wait for the extension")
		t.Logf("release returned %v after it was called: %v", took, rerr)
	})
}

// watchdog panics if stop is not called within d of real time: for a test whose bubble
// would otherwise hang until the binary's -timeout.
func watchdog(d time.Duration, msg string) (stop func()) {
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(d):
			panic(errors.New(msg))
		}
	}()
	return func() { close(done) }
}
