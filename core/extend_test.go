package core_test

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
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

// TestExtendTakesNoFreeKey: a holder granted while two of five servers refused it (another
// owner's key, since gone, stood there) renews the lock with its extension on the three that
// granted, and leaves the two free: an extension never takes a free key. Three of five
// holding it, it extends; once one of them lost it too, the extension fails (ErrNotHeld)
// and takes none of the free keys.
func TestExtendTakesNoFreeKey(t *testing.T) {
	bubble(t, func(t *testing.T) {
		servers := simServers(t, 5)
		c := newCluster(t, servers)
		ctx := context.Background()
		l := lock("back")
		l.TTL, l.Fence = time.Second, true
		for _, s := range servers[3:] {
			_, err := s.do("SET", l.Keys.Lock, "another", "PX", "60000")
			require.NoError(t, err)
		}
		h, err := c.Acquire(ctx, l)
		require.NoError(t, err)
		synctest.Wait() // the refusals the acquisition did not wait for have come
		for _, s := range servers[3:] {
			_, err := s.do("DEL", l.Keys.Lock)
			require.NoError(t, err)
		}
		// holding returns what each server's lock key holds ("" for none).
		holding := func() []string {
			synctest.Wait() // the nodes the extension did not wait for have answered
			v := make([]string, len(servers))
			for i, s := range servers {
				v[i] = get(t, s, l.Keys.Lock)
			}
			return v
		}
		time.Sleep(l.TTL / 2)
		until, err := c.Extend(ctx, h)
		require.NoError(t, err, "three of five hold it")
		assert.Equal(t, until, h.Until)
		tok := h.Token()
		assert.Equal(t, []string{tok, tok, tok, "", ""}, holding(), "an extension took a free key")
		for i, s := range servers[:3] {
			pttl, err := s.do("PTTL", l.Keys.Lock)
			require.NoError(t, err)
			assert.Equal(t, l.TTL.Milliseconds(), pttl, "node %d: the extension did not renew the lock", i)
		}

		_, err = servers[0].do("DEL", l.Keys.Lock)
		require.NoError(t, err)
		_, err = c.Extend(ctx, h)
		require.ErrorIs(t, err, core.ErrNotHeld, "two of five holding it counted as a quorum")
		assert.Equal(t, []string{"", tok, tok, "", ""}, holding(), "a failed extension took a free key")
	})
}

// TestExtendCountsALateGrant: a node whose grant came after the acquisition returned (a
// straggler's) holds the lock for its owner once that reply is read, as a node that granted
// in time does: when the lock is lost there and on another node, Extend says so (ErrNotHeld)
// rather than take the free key again on the straggler.
func TestExtendCountsALateGrant(t *testing.T) {
	bubble(t, func(t *testing.T) {
		servers := simServers(t, 3)
		nodes := make([]core.Node, len(servers))
		for i, s := range servers {
			nodes[i] = nodeFor(t, s)
		}
		slow := nodeFor(t, servers[2])
		nodes[2] = slowAcquire{Node: slow, Subscriber: slow, delay: 10 * time.Millisecond}
		c, err := core.NewCluster(nodes)
		require.NoError(t, err)
		ctx := context.Background()
		first, err := c.Acquire(ctx, lock("first")) // identifies the nodes: it hears them all
		require.NoError(t, err)
		require.NoError(t, c.Release(ctx, first))

		l := lock("late")
		h, err := c.Acquire(ctx, l)
		require.NoError(t, err)
		synctest.Wait()
		exists := func(s server) any {
			v, err := s.do("EXISTS", l.Keys.Lock)
			require.NoError(t, err)
			return v
		}
		require.Equal(t, int64(0), exists(servers[2]), "the test needs the third node's grant to come after the acquisition returned")
		advance(10 * time.Millisecond)
		v, err := servers[2].do("GET", l.Keys.Lock)
		require.NoError(t, err)
		require.Equal(t, h.Token(), v, "the third node did not grant late")

		for _, s := range servers[1:] { // lost on two nodes, one of them the straggler
			_, err := s.do("DEL", l.Keys.Lock)
			require.NoError(t, err)
		}
		_, err = c.Extend(ctx, h)
		require.ErrorIs(t, err, core.ErrNotHeld, "a node that granted late was taken again as one that never held the lock")
		synctest.Wait()
		assert.Equal(t, int64(0), exists(servers[2]), "the extension took the lost lock again on the straggler")
	})
}
