package core

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyNode holds one lock key in memory: acquisitions take it (with a counter of its own,
// so that no two nodes agree on the fence) or, if refuse, find it held; extend scripts with
// a fence take it where free, after a delay of raiseDelay (every extend script's).
type keyNode struct {
	fence      int64
	refuse     bool
	fail       bool // every call fails
	raiseDelay time.Duration
	mu         sync.Mutex
	held       bool
}

func (n *keyNode) String() string { return fmt.Sprintf("key%d", n.fence) }

func (n *keyNode) Eval(_ context.Context, s *Script, _ []string, args ...string) ([]int64, error) {
	if s == extendScript {
		time.Sleep(n.raiseDelay)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fail {
		return nil, fmt.Errorf("%s fails", n)
	}
	switch s {
	case acquireScript:
		if n.refuse {
			return asked(s, args, []int64{0, 0}), nil
		}
		n.held = true
		return asked(s, args, []int64{1, n.fence}), nil
	case extendScript:
		if !n.held && len(args) < 3 { // a free key is taken only with a fence (extend.lua)
			return []int64{0}, nil
		}
		took := !n.held
		n.held = true
		if took {
			return []int64{2}, nil
		}
		return []int64{1}, nil
	case releaseScript:
		was := n.held
		n.held = false
		if was {
			return []int64{1, 0}, nil
		}
		return []int64{0, 0, 1}, nil
	}
	return nil, fmt.Errorf("unexpected script %s", s.Name())
}

// TestReleaseFollowsALateRaisePast64Nodes: the raise of a fenced grant takes the lock where
// it is free; its call to a node past the 64th that had not answered when the grant was
// returned must land before the release's there, or it leaves the key held for a TTL.
func TestReleaseFollowsALateRaisePast64Nodes(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes := make([]Node, 65)
		fakes := make([]*keyNode, 65)
		for i := range nodes {
			fakes[i] = &keyNode{fence: int64(i + 1)}
			nodes[i] = fakes[i]
		}
		last := fakes[64]
		last.refuse, last.raiseDelay = true, 50*time.Millisecond
		c, err := NewCluster(nodes)
		require.NoError(t, err)
		l := testLock()
		h, err := c.Acquire(context.Background(), l)
		require.NoError(t, err)
		require.NoError(t, c.Release(context.Background(), h))
		time.Sleep(l.NodeTimeout) // the raise's call has landed by now
		synctest.Wait()
		last.mu.Lock()
		defer last.mu.Unlock()
		assert.False(t, last.held, "the late raise's key outlived the release")
	})
}

func (*keyNode) EvalStrings(context.Context, *Script, []string, ...string) ([]string, error) {
	return nil, fmt.Errorf("no EvalStrings")
}

// TestSemaphoreLetsGoOfOtherPermitsPast64Nodes: a semaphore's winner lets go at once of the
// permit each other node gave it, also on a node past the 64th.
func TestSemaphoreLetsGoOfOtherPermitsPast64Nodes(t *testing.T) {
	bubble(t, func(t *testing.T) {
		gives := func(permit int64) func(context.Context, *Script) ([]int64, error) {
			return func(_ context.Context, s *Script) ([]int64, error) {
				if s == acquireScript {
					return []int64{1, 0, 0, 3, permit}, nil // both permits free to us; took permit
				}
				return []int64{1, 0}, nil
			}
		}
		evals := make([]func(context.Context, *Script) ([]int64, error), 65)
		for i := range evals {
			evals[i] = gives(0)
			if i >= 40 {
				evals[i] = gives(1)
			}
		}
		c, fakes := cluster(t, evals...)
		l := testLock()
		l.Fence = false
		l.Keys = NewSemaphoreKeys("t:", "sem", 2)
		_, err := c.Acquire(context.Background(), l)
		require.NoError(t, err)
		synctest.Wait()
		for _, i := range []int{40, 63, 64} {
			assert.Equal(t, []string{"acquire", "release"}, fakes[i].scripts(), "node %d's other permit is kept", i)
		}
		assert.Equal(t, []string{"acquire"}, fakes[0].scripts())
	})
}

// TestRaisedNodesCountAsHolding: a node that a raise took (free at the acquisition, or at
// Raise) held the lock for its owner, so a later extension does not take it again once it
// lost the key: it counts as a node that no longer holds, and a lock lost on a quorum is
// reported as lost.
func TestRaisedNodesCountAsHolding(t *testing.T) {
	for _, public := range []bool{false, true} {
		t.Run(map[bool]string{false: "acquisition", true: "Raise"}[public], func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				fakes := []*keyNode{{fence: 1}, {fence: 2}, {fence: 3}}
				nodes := []Node{fakes[0], fakes[1], fakes[2]}
				fakes[2].refuse = true // another owner's key stands there at the acquisition
				// The third node answers the raise first, so that the raise reads its take.
				fakes[0].raiseDelay, fakes[1].raiseDelay = time.Millisecond, time.Millisecond
				c, err := NewCluster(nodes)
				require.NoError(t, err)
				l := testLock()
				l.Fence = !public // counters 1 and 2 disagree: the acquisition raises
				h, err := c.Acquire(context.Background(), l)
				require.NoError(t, err)
				if public {
					require.NoError(t, c.Raise(context.Background(), h, 7))
				}
				synctest.Wait()
				for i, n := range fakes {
					n.mu.Lock()
					require.True(t, n.held, "node %d", i)
					n.mu.Unlock()
				}
				for _, n := range []*keyNode{fakes[0], fakes[2]} { // lost behind the holder's back
					n.mu.Lock()
					n.held = false
					n.mu.Unlock()
				}
				_, err = c.Extend(context.Background(), h)
				require.ErrorIs(t, err, ErrNotHeld, "a node the raise took was taken again")
				fakes[2].mu.Lock()
				defer fakes[2].mu.Unlock()
				assert.False(t, fakes[2].held, "a node the raise took was taken again")
			})
		})
	}
}

// TestFailedExtensionsTakesCountAsHolding: a node that an extension took holds the lock for
// its owner even when that extension failed, so a later extension does not take it again
// once it lost the key.
func TestFailedExtensionsTakesCountAsHolding(t *testing.T) {
	bubble(t, func(t *testing.T) {
		// The third node answers first, so that the extension reads its take.
		fakes := []*keyNode{{fence: 1, raiseDelay: time.Millisecond}, {fence: 1, raiseDelay: time.Millisecond}, {fence: 1, refuse: true}}
		c, err := NewCluster([]Node{fakes[0], fakes[1], fakes[2]})
		require.NoError(t, err)
		set := func(n *keyNode, held, fail bool) {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.held, n.fail = held, fail
		}
		h, err := c.Acquire(context.Background(), testLock())
		require.NoError(t, err)
		synctest.Wait()
		set(fakes[0], false, false) // lost behind the holder's back
		set(fakes[1], true, true)
		_, err = c.Extend(context.Background(), h) // takes the third node, and fails
		var qe *QuorumError
		require.ErrorAs(t, err, &qe)
		set(fakes[1], true, false)
		set(fakes[2], false, false) // lost behind the holder's back
		_, err = c.Extend(context.Background(), h)
		require.ErrorIs(t, err, ErrNotHeld, "a node that the failed extension took was taken again")
	})
}
