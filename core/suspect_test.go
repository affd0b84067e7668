package core

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hangsWhile is a node that hangs until ctx ends while hang is set, and grants otherwise.
func hangsWhile(hang *atomic.Bool) func(context.Context, *Script) ([]int64, error) {
	return func(ctx context.Context, s *Script) ([]int64, error) {
		if hang.Load() {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return []int64{1, 1}, nil
	}
}

// TestSuspectedNodesAreNotWaitedFor: once a node's call failed (here: it hung past the node
// timeout), an attempt that cannot win without it gives up as soon as the others answered,
// and lets go at once of the key it got; the node is still called, and once it answers it
// counts again.
func TestSuspectedNodesAreNotWaitedFor(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var hang atomic.Bool
		hang.Store(true)
		hanging := hangsWhile(&hang)
		c, fakes := cluster(t, grants(1), held(60_000), held(60_000), hanging, hanging)
		ctx := context.Background()
		attempt := func() (time.Duration, error) {
			l := testLock()
			l.NodeTimeout = 300 * time.Millisecond
			start := time.Now()
			_, err := c.Acquire(ctx, l)
			return time.Since(start), err
		}

		took, err := attempt()
		require.Error(t, err)
		// The first attempt waits for the silent nodes: their calls end at the node timeout
		// from the end of the millisecond they share, when the attempt's own wait for them ends
		// too. Whichever comes first decides: if their calls' failures, the attempt waits for
		// the releases of the keys they may hold (abandon waits for the nodes that answered),
		// which hang as long; else it releases them in the background.
		assert.Contains(t, []time.Duration{301 * time.Millisecond, 602 * time.Millisecond}, took, "the first attempt waits for the silent nodes")
		synctest.Wait()
		require.Equal(t, uint64(0b11000), c.suspects(), "the silent nodes' calls ended without marking them")

		took, err = attempt()
		require.ErrorIs(t, err, ErrNoQuorum)
		assert.ErrorIs(t, err, errSuspect)
		assert.Equal(t, time.Duration(0), took, "the next attempt waited for nodes whose last call failed")
		// The granting node is released at once: before the attempt returns if its grant was
		// in by then, else as soon as it comes (the refusals may have decided the outcome first).
		synctest.Wait()
		assert.Equal(t, []string{"acquire", "release", "acquire", "release"}, fakes[0].scripts(), "the granting node was not released")

		// Once the calls under way end, the nodes are called again; an attempt may decide
		// before they answer (a suspect is not waited for), but one that answered is no
		// longer a suspect, and the next attempt waits for it.
		hang.Store(false)
		idle := func() bool { return c.calls[3].Load() == 0 && c.calls[4].Load() == 0 }
		until(t, time.Second, idle, "the calls under way did not end")
		if _, err := attempt(); err != nil {
			synctest.Wait()
			_, err = attempt()
			require.NoError(t, err, "nodes that answer again do not count again")
		}
	})
}

// TestTooManySuspectsAreWaitedFor: when the nodes not suspected are too few for a quorum,
// an attempt waits for the suspected ones too, and wins once they answer again: giving up
// at once could only fail.
func TestTooManySuspectsAreWaitedFor(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var hang atomic.Bool
		hang.Store(true)
		hanging := hangsWhile(&hang)
		c, _ := cluster(t, grants(1), grants(1), hanging, hanging, hanging)
		l := testLock()
		l.NodeTimeout = 300 * time.Millisecond
		_, err := c.Acquire(context.Background(), l)
		require.ErrorIs(t, err, ErrNoQuorum)
		synctest.Wait()
		require.Equal(t, uint64(0b11100), c.suspects(), "the silent nodes' calls ended without marking them")

		hang.Store(false)
		start := time.Now()
		h, err := c.Acquire(context.Background(), l)
		require.NoError(t, err, "the attempt gave up on three suspects that answer again")
		assert.NotNil(t, h)
		assert.Equal(t, time.Duration(0), time.Since(start))
		// The attempt returned on a quorum; the other two answer at the same instant.
		synctest.Wait()
		assert.Zero(t, c.suspects(), "nodes that answered are still suspected")
	})
}

// TestSuspectWithACallUnderWayIsNotCalled: an attempt does not call a suspect (one it need
// not wait for) while an earlier call to it is still under way: that call finds out whether
// the node is back. The attempt counts the node as failed at once, sends it no release,
// and does not report it to NodeFailed; once the call under way ended, the node is called
// again.
func TestSuspectWithACallUnderWayIsNotCalled(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var hang atomic.Bool
		hang.Store(true)
		hanging := hangsWhile(&hang)
		c, fakes := cluster(t, grants(1), grants(1), held(60_000), hanging, hanging)
		var reported atomic.Int32
		attempt := func() (time.Duration, error) {
			l := testLock()
			l.NodeTimeout = 300 * time.Millisecond
			l.NodeFailed = func(_ string, e NodeError) {
				if errors.Is(e.Err, errNotCalled) {
					reported.Add(1)
				}
			}
			start := time.Now()
			_, err := c.Acquire(context.Background(), l)
			return time.Since(start), err
		}
		idle := func() bool { return c.calls[3].Load() == 0 && c.calls[4].Load() == 0 }

		// The first attempt makes the silent nodes suspects; the releases that follow its calls
		// to them end too.
		_, err := attempt()
		require.Error(t, err)
		calls := func() []int { return []int{len(fakes[3].scripts()), len(fakes[4].scripts())} }
		// (The attempt waited for the releases, or they run in the background: see
		// TestSuspectedNodesAreNotWaitedFor.)
		until(t, time.Second, func() bool { return c.suspects() == 0b11000 && slices.Equal(calls(), []int{2, 2}) && idle() },
			"the silent nodes' calls and releases did not end, or did not mark them")
		before := calls()

		// The second attempt calls them (their calls hang), and returns once the others answered.
		took, err := attempt()
		require.ErrorIs(t, err, ErrNoQuorum)
		assert.Equal(t, time.Duration(0), took)
		// The attempt may return before its calls to the suspects began: they are under way
		// once the nodes saw them.
		synctest.Wait()
		require.Equal(t, []int{before[0] + 1, before[1] + 1}, calls(), "the suspects were not called once their calls had ended")
		require.False(t, idle(), "the test needs the second attempt's calls still under way")

		// The third, with those calls under way, does not call them, nor release them.
		took, err = attempt()
		require.ErrorIs(t, err, ErrNoQuorum)
		assert.Equal(t, time.Duration(0), took)
		synctest.Wait()
		assert.Equal(t, []int{before[0] + 1, before[1] + 1}, calls(), "a suspect was called while a call to it was under way")
		assert.Zero(t, reported.Load(), "a node not called was reported as failed")

		// Once the calls under way ended (and the releases after them), the nodes are called
		// again, and count once they answer. An attempt may decide before they answer (a
		// suspect is not waited for: on a loaded machine its reply can come after the others'),
		// but one that answered is no longer a suspect, and the next attempt waits for it.
		hang.Store(false)
		until(t, time.Second, idle, "the calls under way did not end")
		if _, err := attempt(); err != nil {
			synctest.Wait()
			_, err = attempt()
			require.NoError(t, err, "nodes whose calls ended were not called again")
		}
	})
}

// down fails every call as a server that refuses connections does: its node becomes a
// suspect.
func down(context.Context, *Script) ([]int64, error) {
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
}

// TestHeldWithANodeDown: with one node of three down (a suspect after its first failure,
// not waited for), an attempt on a lock that the other two hold fails with ErrHeld, every
// time: the refusal heard first, with the suspect, puts a quorum out of reach, but only
// the second refusal says the lock is held, not the node failures.
func TestHeldWithANodeDown(t *testing.T) {
	bubble(t, func(t *testing.T) {
		c, _ := cluster(t, held(60_000), held(60_000), down)
		for i := range 5 {
			_, err := c.Acquire(context.Background(), testLock())
			require.ErrorIs(t, err, ErrHeld, "attempt %d", i)
			synctest.Wait()
			require.Equal(t, uint64(0b100), c.suspects(), "attempt %d", i)
		}
	})
}

// TestASuspectSingleNodeIsNotWaitedForPastTheTimeout: a single node is called in the
// caller's goroutine, but not once its last call failed in transit: a driver may overrun the
// deadline in the new connection's handshake (here the node ignores its ctx and hangs), and
// an attempt still ends at the node timeout.
func TestASuspectSingleNodeIsNotWaitedForPastTheTimeout(t *testing.T) {
	bubble(t, func(t *testing.T) {
		letGo := make(chan struct{})
		var hang atomic.Bool
		c, _ := cluster(t, func(ctx context.Context, s *Script) ([]int64, error) {
			switch {
			case !hang.Load():
				return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
			case s == acquireScript:
				<-letGo // ignores ctx
				return []int64{1, 1}, nil
			}
			return []int64{0, 0}, nil
		})
		l := testLock()
		l.NodeTimeout = 300 * time.Millisecond
		_, err := c.Acquire(context.Background(), l)
		require.Error(t, err)
		synctest.Wait()
		require.Equal(t, uint64(1), c.suspects(), "a call that failed in transit did not mark its node")

		hang.Store(true)
		start := time.Now()
		_, err = c.Acquire(context.Background(), l)
		assert.ErrorIs(t, err, ErrNodeTimeout)
		assert.LessOrEqual(t, time.Since(start), 301*time.Millisecond, "the attempt waited for a suspect past the node timeout")
		close(letGo)
	})
}
