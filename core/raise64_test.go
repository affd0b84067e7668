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
