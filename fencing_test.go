package redlock_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFencingTokensIncreaseOverRandomMajorities: 60 successive holders of one name on 5
// real servers, each able to reach only a random majority (the others killed or paused:
// stopped or hung), get strictly increasing tokens. Downed servers come back without their
// data, so restarted counters restart from the server clock.
func TestFencingTokensIncreaseOverRandomMajorities(t *testing.T) {
	t.Parallel() // see bubble_test.go
	nodes, servers := realNodes(t, 5)
	// A node timeout a loaded machine does not miss: a call to a paused server waits it out.
	c := newClient(t, nodes, redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(time.Second))
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	ctx := ctxT(t, 2*time.Minute)

	var prev uint64
	for i := range 60 {
		down := rng.Perm(len(servers))[:rng.IntN(3)] // a minority: 0, 1 or 2 servers
		for _, j := range down {
			if rng.IntN(2) == 0 {
				servers[j].Kill()
			} else {
				servers[j].Pause()
			}
		}
		l, err := c.Acquire(ctxT(t, 10*time.Second), "fenced")
		require.NoError(t, err, "acquisition %d with servers %v down", i, down)
		require.Greater(t, l.Token(), prev, "acquisition %d with servers %v down: token did not increase", i, down)
		prev = l.Token()
		require.NoError(t, l.Release(ctx))
		for _, j := range down {
			servers[j].Restart()
		}
	}
}

// TestFencingThreeNodesAcrossOverlappingMajorities is the case where the largest counter
// of each quorum repeats without the raise round: holders reach A,B then B,C then A,C.
func TestFencingThreeNodesAcrossOverlappingMajorities(t *testing.T) {
	majorities := [][]int{{0, 1}, {1, 2}, {0, 2}}
	// Counters far above the clock, so every acquisition adds exactly 1 and the arithmetic
	// of the example holds: A=B=C=F; A,B grant F+1; B,C grant F+2 (B) and F+1 (C); A,C grant
	// F+2 (A) and F+2 (C) without the raise, a repeat.
	const f = 1 << 52 // above the clock in microseconds, below 2^53 (exact in Lua)

	run := func(t *testing.T, acquire func(nodes []redlock.Node, majority []int) uint64) []uint64 {
		nodes, servers := miniNodes(t, 3)
		for _, s := range servers {
			require.NoError(t, s.Set(lockKey("abc")+":fence", "4503599627370496"))
		}
		var tokens []uint64
		for _, m := range majorities {
			for i, s := range servers {
				if i != m[0] && i != m[1] {
					s.Close()
				}
			}
			tokens = append(tokens, acquire(nodes, m))
			for i, s := range servers {
				if i != m[0] && i != m[1] {
					redistest.RestartMiniredis(t, s)
				}
			}
		}
		return tokens
	}

	t.Run("without raise the max repeats", func(t *testing.T) {
		// Each node of the majority on its own (N = 1 needs no raise), keeping the largest.
		tokens := run(t, func(nodes []redlock.Node, m []int) uint64 {
			var top uint64
			for _, i := range m {
				one, err := core.NewCluster(nodes[i : i+1])
				require.NoError(t, err)
				l := &core.Lock{Keys: core.NewKeys("redlock:", "abc"), TTL: time.Second, NodeTimeout: 200 * time.Millisecond, Fence: true}
				g, err := one.Acquire(ctxT(t, 5*time.Second), l)
				require.NoError(t, err)
				require.NoError(t, one.Release(ctxT(t, 5*time.Second), g))
				top = max(top, g.Fence)
			}
			return top
		})
		assert.Equal(t, []uint64{f + 1, f + 2, f + 2}, tokens)
	})
	t.Run("leases raise and increase", func(t *testing.T) {
		tokens := run(t, func(nodes []redlock.Node, _ []int) uint64 {
			c := newClient(t, nodes, redlock.WithNodeTimeout(200*time.Millisecond))
			l, err := c.TryAcquire(ctxT(t, 5*time.Second), "abc")
			require.NoError(t, err)
			require.NoError(t, l.Release(ctxT(t, 5*time.Second)))
			return l.Token()
		})
		assert.Equal(t, []uint64{f + 1, f + 2, f + 3}, tokens)
	})
}

// TestFencedHandoversIncrease: fenced leases that take turns through hand-overs (each
// release hands the lock to the next waiter, which raises the fence on a quorum) are
// exclusive and get strictly increasing tokens. Four Clients, each its own process in
// effect, take the lock ten times each on three real servers; their backoff and refresh
// interval are far longer than the test, so only hand-overs and wake-ups move the lock.
func TestFencedHandoversIncrease(t *testing.T) {
	nodes, _ := realNodes(t, 3)
	var mu sync.Mutex
	var tokens []uint64
	var inside atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		c := newClient(t, nodes, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(5*time.Second),
			redlock.WithRetry(time.Minute, time.Minute))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				l, err := c.Acquire(ctxT(t, 20*time.Second), "handover")
				if !assert.NoError(t, err) {
					return
				}
				assert.False(t, inside.Swap(true), "two holders at once")
				mu.Lock()
				tokens = append(tokens, l.Token())
				mu.Unlock()
				time.Sleep(time.Millisecond)
				inside.Store(false)
				assert.NoError(t, l.Release(context.Background()))
			}
		}()
	}
	wg.Wait()
	require.Len(t, tokens, 40)
	for i := 1; i < len(tokens); i++ {
		assert.Greater(t, tokens[i], tokens[i-1], "holder %d got a token no larger than the previous one", i)
	}
}
