package core_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAgreedFenceNeedsNoRaise: a fenced acquisition at N > 1 asks every node for the same
// floor, ahead of the clock; nodes whose counters are below it all take it, and when a
// quorum of the granting nodes agree on the largest counter, no raise round is needed.
// Nodes whose counters are past the floor disagree, and the raise brings a quorum up to the
// largest.
// Either way the tokens strictly increase, and a quorum holds a counter >= each token.
func TestAgreedFenceNeedsNoRaise(t *testing.T) {
	for _, c := range setups[1:] { // N > 1
		t.Run(c.name, func(t *testing.T) {
			servers := c.servers(t, c.n)
			cl, counts := countedCluster(t, servers)
			raises := func() int64 { return sum(counts, func(n *counted) *atomic.Int64 { return &n.raises }) }
			// atLeast checks that a quorum of the servers hold a counter >= fence.
			atLeast := func(k core.Keys, fence uint64) {
				t.Helper()
				require.Eventually(t, func() bool { // Acquire returns at a quorum
					n := 0
					for _, s := range servers {
						v, _ := strconv.ParseUint(get(t, s, k.Fence), 10, 64)
						if v >= fence {
							n++
						}
					}
					return n >= cl.Quorum()
				}, 5*time.Second, time.Millisecond, "no quorum holds a counter >= %d", fence)
			}
			fenced := func() core.Grant {
				t.Helper()
				l := lock("agreed")
				l.Fence = true
				l.NodeTimeout = time.Second // not a test of timeouts: a loaded machine's first dial can take 100 ms
				g, err := cl.Acquire(context.Background(), l)
				require.NoError(t, err)
				atLeast(l.Keys, g.Fence)
				require.NoError(t, cl.Release(context.Background(), g))
				return g.Grant
			}

			before := uint64(time.Now().UnixMicro())
			first := fenced()
			assert.Greater(t, first.Fence, before+uint64(500*time.Millisecond/time.Microsecond), "the token is not the floor ahead of the clock")
			second := fenced()
			assert.Greater(t, second.Fence, first.Fence)
			assert.Zero(t, raises(), "nodes that agreed on the fence were raised")

			// Two nodes' counters far past any floor, and apart: every quorum disagrees.
			const ahead = 1 << 52
			for i, v := range []int64{ahead, ahead + 5} {
				_, err := servers[i].do("SET", lock("agreed").Keys.Fence, strconv.FormatInt(v, 10))
				require.NoError(t, err)
			}
			third := fenced()
			assert.GreaterOrEqual(t, third.Fence, uint64(ahead+1), "the token is not the largest counter")
			assert.Positive(t, raises(), "disagreeing nodes were not raised")
		})
	}
}

// TestFenceFloorIsCapped: a node takes a proposed floor only up to 2 s past its own clock,
// so that a client whose clock runs fast cannot push the counters far ahead of the servers'
// time (a node that restarts without its data must still start above every token).
func TestFenceFloorIsCapped(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		servers := []server{s}
		_, counts := countedCluster(t, servers)
		k := core.NewKeys("q:", "capped")
		acquire := core.Scripts()[0]
		for _, tc := range []struct {
			name        string
			ahead       time.Duration // the floor, ahead of the clock
			least, most time.Duration // the fence's bounds, ahead of the clock
		}{
			{"within the cap", time.Second, 900 * time.Millisecond, 1100 * time.Millisecond},
			{"past the cap", time.Hour, 1900 * time.Millisecond, 2100 * time.Millisecond},
		} {
			floor := time.Now().Add(tc.ahead).UnixMicro()
			now := time.Now()
			got, err := counts[0].Eval(context.Background(), acquire, k.ScriptKeys(), core.NewToken(), "1000", "0", strconv.FormatInt(floor, 10), "", "0", "1000", "0", "w", "-1")
			require.NoError(t, err, tc.name)
			require.Len(t, got, 2, tc.name)
			assert.GreaterOrEqual(t, got[1], now.Add(tc.least).UnixMicro(), tc.name)
			assert.LessOrEqual(t, got[1], now.Add(tc.most).UnixMicro(), tc.name)
			_, err = servers[0].do("DEL", k.Lock, k.Fence)
			require.NoError(t, err)
		}
	})
}
