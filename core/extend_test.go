package core_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRaiseBeyondExactCounters: the scripts count in Lua's numbers, doubles, exact to 2^53.
// Raise either puts a fence on the nodes that every later token exceeds, or refuses it
// (ErrInvalid); it never reports a raise that the nodes did not make.
func TestRaiseBeyondExactCounters(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		cl := newCluster(t, []server{s})
		ctx := context.Background()
		for _, fence := range []uint64{1<<53 + 1, math.MaxInt64, 1 << 63, math.MaxUint64} {
			l := lock("big")
			l.Fence = true
			h, err := cl.Acquire(ctx, l)
			require.NoError(t, err)
			err = cl.Raise(ctx, h, fence)
			require.NoError(t, cl.Release(ctx, h))
			if err != nil {
				assert.ErrorIs(t, err, core.ErrInvalid, "fence %d", fence)
				continue
			}
			last := fence
			for range 3 {
				h, err := cl.Acquire(ctx, l)
				require.NoError(t, err)
				require.NoError(t, cl.Release(ctx, h))
				require.Greater(t, h.Fence, last, "after a raise to %d", fence)
				last = h.Fence
			}
		}
	})
}

// TestRaiseAboveTheClocksStandsWhileTheCounterLives: Raise's doc. A fence that a counter
// gave (a token) keeps later tokens above it across the counter's expiry, FenceIdle after
// its last write; a fence raised past the server's clock (plus 2 s) stands only while the
// counter lives: after its expiry, or a restart that lost it (its server up again after a
// restart guard of 30 s), the counter starts again from the server's clock, and the next
// token is below it. (miniredis: the test sets the server's clock.)
func TestRaiseAboveTheClocksStandsWhileTheCounterLives(t *testing.T) {
	start := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	expires := func(m *miniredis.Miniredis) {
		m.SetTime(start.Add(core.FenceIdle))
		m.FastForward(core.FenceIdle)
	}
	restarts := func(m *miniredis.Miniredis) {
		m.FlushAll()
		m.SetTime(start.Add(31 * time.Second))
	}
	for _, c := range []struct {
		name  string
		ahead time.Duration // how far past the server's clock the fence is
		lose  func(m *miniredis.Miniredis)
		after bool // whether the token after the loss exceeds it
	}{
		{"a token, expired", 0, expires, true},
		{"a token, restarted", 0, restarts, true},
		{"two hours ahead, expired", 2 * time.Hour, expires, false},
		{"a minute ahead, restarted", time.Minute, restarts, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := miniredis.RunT(t)
			m.SetTime(start)
			cl, err := core.NewCluster([]core.Node{nodeOf(t, m.Addr())})
			require.NoError(t, err)
			ctx := context.Background()
			l := lock("raised")
			l.Fence = true
			token := func() uint64 {
				h, err := cl.Acquire(ctx, l)
				require.NoError(t, err)
				require.NoError(t, cl.Release(ctx, h))
				return h.Fence
			}
			fence := uint64(start.Add(c.ahead).UnixMicro())
			h, err := cl.Acquire(ctx, l)
			require.NoError(t, err)
			require.NoError(t, cl.Raise(ctx, h, fence))
			require.NoError(t, cl.Release(ctx, h))
			assert.Greater(t, token(), fence, "a token while the counter lives")

			c.lose(m)
			require.False(t, m.Exists(l.Keys.Fence), "the counter is still there")
			if next := token(); c.after {
				assert.Greater(t, next, fence, "a token after the counter was lost")
			} else {
				assert.Less(t, next, fence, "a token after the counter was lost (the doc says it falls below)")
			}
		})
	}
}
