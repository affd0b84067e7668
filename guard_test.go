package redlock_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	miniserver "github.com/alicebob/miniredis/v2/server"
	"github.com/go-redlock/redlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRestartGuard: client A holds a lock on a bare majority of 3 servers (its client cannot
// reach the first), then the second server restarts without its data. With the guard, B
// cannot acquire until the guard has passed; without it, B gets the first two servers and
// holds the lock while A still does.
func TestRestartGuard(t *testing.T) {
	t.Parallel() // see bubble_test.go
	const guard = 2 * time.Second
	for _, tc := range []struct {
		name  string
		guard time.Duration
	}{{"guard on", guard}, {"guard off", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			servers := realServers(t, 3)
			opts := []redlock.Option{redlock.WithTTL(guard), redlock.WithRestartGuard(tc.guard), redlock.WithNodeTimeout(200 * time.Millisecond)}
			ab := nodesFor(t, servers)
			aNodes := []redlock.Node{hungNode(t), ab[1], ab[2]}
			a := newClient(t, aNodes, opts...)
			b := newClient(t, nodesFor(t, servers), opts...)

			la, err := a.Acquire(ctxT(t, 10*time.Second), "guarded") // fresh servers: waits out the guard
			require.NoError(t, err)
			// Before the restart: the guard counts from the new process's start, which comes
			// later by as long as the restart takes (long enough on a loaded machine that B,
			// timed from its end, seemed to get in before the guard passed).
			restarted := time.Now()
			servers[1].Restart() // forgets A's key

			lb, err := b.TryAcquire(ctxT(t, 5*time.Second), "guarded")
			if tc.guard == 0 {
				require.NoError(t, err, "without the guard, the restarted server lets B in")
				assert.True(t, time.Now().Before(la.Until()), "B got the lock while A's lease was valid: the violation the guard prevents")
				require.NoError(t, lb.Release(ctxT(t, 5*time.Second)))
				return
			}
			require.ErrorIs(t, err, redlock.ErrNoQuorum)
			require.ErrorIs(t, err, redlock.ErrRestarted, "the restarted server should abstain")
			assert.Contains(t, err.Error(), servers[1].Addr())

			lb, err = b.Acquire(ctxT(t, 3*guard), "guarded")
			require.NoError(t, err, "B never got the lock after the guard passed")
			assert.GreaterOrEqual(t, time.Since(restarted), guard-100*time.Millisecond, "B got in before the guard passed")
			assert.False(t, time.Now().Before(la.Until()), "B got in while A's lease was valid")
			require.NoError(t, lb.Release(ctxT(t, 5*time.Second)))
		})
	}
}

// TestRestartGuardReadsInfoOnlyAfterASave: under the guard, an acquisition on a server whose
// last save (its start, on a server that does not save) is more than the guard and a second
// ago reads no INFO: LASTSAVE proves the uptime. After a save the acquisitions read INFO
// again, and still get the lock; after a restart the server abstains.
func TestRestartGuardReadsInfoOnlyAfterASave(t *testing.T) {
	t.Parallel() // see bubble_test.go
	const guard = 2 * time.Second
	servers := realServers(t, 1)
	rdb := redis.NewClient(&redis.Options{Addr: servers[0].Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := ctxT(t, 2*time.Minute)
	c := newClient(t, nodesFor(t, servers), redlock.WithTTL(guard), redlock.WithRestartGuard(guard), redlock.WithNodeTimeout(500*time.Millisecond))
	// savedLongAgo reports whether LASTSAVE proves the uptime (false if it cannot be read):
	// it runs in Eventually's goroutine too, where a test may not stop.
	savedLongAgo := func() bool {
		saved, err := rdb.LastSave(ctx).Result()
		if err != nil {
			return false
		}
		now, err := rdb.Time(ctx).Result()
		return err == nil && now.Unix()-saved > int64(guard/time.Second)+1
	}
	require.Eventually(t, savedLongAgo, time.Minute, 10*time.Millisecond)
	// calls returns how many INFO and LASTSAVE the server has run (the INFO that asks is
	// counted only by the next).
	calls := func() (info, lastsave int) {
		stats, err := rdb.Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		count := func(cmd string) int {
			m := regexp.MustCompile(`cmdstat_` + cmd + `:calls=(\d+)`).FindStringSubmatch(stats)
			if m == nil {
				return 0
			}
			n, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			return n
		}
		return count("info"), count("lastsave")
	}
	cycles := func(n int) {
		for i := range n {
			l, err := c.TryAcquire(ctx, "guarded")
			require.NoError(t, err, "acquisition %d", i)
			require.NoError(t, l.Release(ctx))
		}
	}
	cycles(1) // the Client's first call also asks the server who it is, with INFO

	info, lastsave := calls()
	cycles(5)
	info2, lastsave2 := calls()
	assert.Equal(t, info+1, info2, "an acquisition read INFO (the one more is the count's own)")
	assert.Equal(t, lastsave+5, lastsave2, "each acquisition reads LASTSAVE")

	require.NoError(t, rdb.Save(ctx).Err())
	require.False(t, savedLongAgo())
	info, _ = calls()
	cycles(5)
	info2, _ = calls()
	assert.Equal(t, info+1+5, info2, "after a save, each acquisition reads INFO")

	servers[0].Restart()
	_, err := c.TryAcquire(ctx, "guarded")
	require.ErrorIs(t, err, redlock.ErrRestarted, "the restarted server abstains")
}

// TestFencingAcrossRestarts: tokens strictly increase over 200 acquisitions on 5 real
// servers while servers are killed and restarted without their data at random, with a
// short restart guard.
func TestFencingAcrossRestarts(t *testing.T) {
	const guard = time.Second
	servers := realServers(t, 5) // fresh: the first Acquire waits out the guard
	c := newClient(t, nodesFor(t, servers), redlock.WithTTL(guard), redlock.WithRestartGuard(guard), redlock.WithNodeTimeout(200*time.Millisecond))
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	ctx := ctxT(t, 3*time.Minute)

	var prev uint64
	restarts := 0
	for i := range 200 {
		if rng.IntN(8) == 0 {
			servers[rng.IntN(len(servers))].Restart()
			restarts++
		}
		l, err := c.Acquire(ctxT(t, 10*time.Second), "fenced")
		require.NoError(t, err, "acquisition %d", i)
		require.Greater(t, l.Token(), prev, "acquisition %d: token did not increase", i)
		prev = l.Token()
		if err := l.Release(ctx); err != nil {
			// On a loaded machine a release can miss its quorum (node timeouts): the lock
			// then expires by its TTL, which the next Acquire waits out. Tokens are this
			// test's subject, and they must increase all the same.
			require.ErrorIs(t, err, redlock.ErrNoQuorum, "release %d", i)
			t.Logf("release %d: %v", i, err)
		}
	}
	t.Logf("%d restarts", restarts)
}

// TestUnguardedNodesAreReported: miniredis cannot report its uptime; with the guard on, the
// client lists those nodes and logs each once.
func TestUnguardedNodesAreReported(t *testing.T) {
	nodes, _ := miniNodes(t, 3)
	var logs bytes.Buffer
	c := newClient(t, nodes, redlock.WithRestartGuard(time.Minute), redlock.WithNodeTimeout(time.Second),
		redlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	assert.Empty(t, c.Unguarded())
	for range 3 {
		l, err := c.TryAcquire(ctxT(t, 5*time.Second), "job")
		require.NoError(t, err)
		require.NoError(t, l.Release(ctxT(t, 5*time.Second)))
	}
	require.Eventually(t, func() bool { return len(c.Unguarded()) == 3 }, 2*time.Second, time.Millisecond)
	for _, n := range nodes {
		assert.Contains(t, c.Unguarded(), n.String())
		assert.Equal(t, 1, strings.Count(logs.String(), n.String()), "each node is logged once")
	}
	assert.Contains(t, logs.String(), "restart guard is off")

	off := newClient(t, nodes, patient)
	l, err := off.TryAcquire(ctxT(t, 5*time.Second), "other")
	require.NoError(t, err)
	require.NoError(t, l.Release(ctxT(t, 5*time.Second)))
	assert.Empty(t, off.Unguarded(), "with the guard off nothing is unguarded")
}

// TestRestartGuardDefaults: on by default at every N (a TTL above 30s is refused); bad
// values are refused.
func TestRestartGuardDefaults(t *testing.T) {
	nodes, _ := miniNodes(t, 3)
	_, err := redlock.New(nodes, redlock.WithTTL(time.Minute))
	require.ErrorIs(t, err, redlock.ErrInvalid, "N=3: the default guard of 30s must cover the TTL")
	assert.Contains(t, err.Error(), "above the restart guard")
	_, err = redlock.New(nodes, redlock.WithTTL(time.Minute), redlock.WithRestartGuard(time.Minute))
	require.NoError(t, err)
	_, err = redlock.New(nodes[:1], redlock.WithTTL(time.Minute))
	require.ErrorIs(t, err, redlock.ErrInvalid, "N=1: the default guard of 30s must cover the TTL too")
	_, err = redlock.New(nodes[:1], redlock.WithTTL(time.Minute), redlock.WithRestartGuard(0))
	require.NoError(t, err, "the guard turned off")
	_, err = redlock.New(nodes, redlock.WithRestartGuard(-time.Second))
	require.ErrorIs(t, err, redlock.ErrInvalid)
	assert.Contains(t, err.Error(), "must not be negative")

	c, err := redlock.New(nodes)
	require.NoError(t, err)
	_, err = c.TryAcquire(ctxT(t, 5*time.Second), "job", redlock.WithTTL(31*time.Second))
	require.ErrorIs(t, err, redlock.ErrInvalid, "a per-call TTL above the guard")
}

// TestRestartGuardIsOnAtOneNode: with the default options and a single node, a server
// that restarted empty abstains: B does not get the lock that A holds, which the server
// forgot.
func TestRestartGuardIsOnAtOneNode(t *testing.T) {
	m := miniredis.RunT(t)
	var uptime atomic.Int64
	uptime.Store(1000)
	m.Server().SetPreHook(func(c *miniserver.Peer, cmd string, args ...string) bool {
		if !strings.EqualFold(cmd, "INFO") {
			return false
		}
		c.WriteBulk(fmt.Sprintf("# Server\r\nuptime_in_seconds:%d\r\n", uptime.Load()))
		return true
	})
	client := func() *redlock.Client { // the default options, but a node timeout no load misses
		c, err := redlock.New([]redlock.Node{goredisNode(t, m.Addr())}, redlock.WithNodeTimeout(5*time.Second))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a, b := client(), client()
	la, err := a.TryAcquire(ctxT(t, 10*time.Second), "one")
	require.NoError(t, err)
	m.FlushAll() // the server restarts without its data
	uptime.Store(0)
	_, err = b.TryAcquire(ctxT(t, 10*time.Second), "one")
	require.ErrorIs(t, err, redlock.ErrRestarted, "a server that restarted empty let a second owner in while the first holds")
	assert.NoError(t, la.Err())
}

// TestTokensAcrossRestartsNeedTheGuardToCoverTheSkew: a token drawn from a server whose
// clock runs skew ahead of the others', then the two others restart empty and form the
// next quorum (the fast one out of reach): their counters start again from their own
// clocks, a guard later. The next token is larger while the guard exceeds 2 s plus the
// skew (WithRestartGuard's contract), and smaller when the skew outruns the guard.
func TestTokensAcrossRestartsNeedTheGuardToCoverTheSkew(t *testing.T) {
	t.Parallel() // see bubble_test.go
	const guard = 30 * time.Second
	for _, tc := range []struct {
		skew     time.Duration
		increase bool
	}{{0, true}, {guard - 2*time.Second - time.Second, true}, {guard + 10*time.Second, false}} {
		t.Run(fmt.Sprint("skew ", tc.skew), func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				nodes, servers := simNodes(t, 3)
				servers[0].SetClockOffset(tc.skew)
				c := closingClient(t, nodes, redlock.WithTTL(5*time.Second), redlock.WithRestartGuard(guard), redlock.WithNodeTimeout(100*time.Millisecond))
				ctx := t.Context()

				first, err := c.Acquire(ctx, "skewed") // fresh servers: waits out the guard
				require.NoError(t, err)
				require.NoError(t, first.Release(ctx))

				servers[0].Hang() // the fast server out of reach
				t.Cleanup(servers[0].Resume)
				servers[1].Crash()
				servers[2].Crash()
				servers[1].Restart()
				servers[2].Restart()
				next, err := c.Acquire(ctx, "skewed") // waits out the guard again
				require.NoError(t, err)
				require.NoError(t, next.Release(ctx))

				if tc.increase {
					assert.Greater(t, next.Token(), first.Token(), "the token went back across the restarts")
				} else {
					assert.Less(t, next.Token(), first.Token(), "a skew beyond the guard should let the token go back")
				}
			})
		})
	}
}

// TestFirstAbstentionIsLogged: a lock over a freshly started redis-server waits for the
// restart guard; the first abstention says so at once, on slog's default logger when no
// logger was given (else on that one), naming the node, the seconds left and
// WithRestartGuard; the next abstentions of that node say nothing until it has granted again.
func TestFirstAbstentionIsLogged(t *testing.T) {
	servers := realServers(t, 1)
	addr := servers[0].Addr()
	logs := defaultLog(t)
	c, err := redlock.New(nodesFor(t, servers), patient) // the default guard, 30 s
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	for range 2 {
		_, err = c.TryAcquire(ctxT(t, time.Minute), "fresh")
		require.ErrorIs(t, err, redlock.ErrRestarted, "a server up for less than 30 s abstains")
	}
	require.Equal(t, 1, strings.Count(logs.String(), "abstains"), "the first abstention is logged, once: %s", logs)
	assert.Contains(t, logs.String(), addr)
	assert.Contains(t, logs.String(), "WithRestartGuard")
	m := regexp.MustCompile(`abstains for (\d+)s more`).FindStringSubmatch(logs.String())
	require.NotNil(t, m, "the seconds left: %s", logs)
	left, _ := strconv.Atoi(m[1])
	assert.True(t, left >= 1 && left <= 31, "%d seconds left of a 30 s guard", left)

	given, buf := logBuffer() // a logger given: the notice goes there
	other, err := redlock.New(nodesFor(t, servers), patient, redlock.WithLogger(given))
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	_, err = other.TryAcquire(ctxT(t, time.Minute), "fresh")
	require.ErrorIs(t, err, redlock.ErrRestarted)
	assert.Contains(t, buf.String(), "abstains")
	assert.Contains(t, buf.String(), addr)
	assert.Equal(t, 1, strings.Count(logs.String(), "abstains"), "nothing more on slog's default logger")
}

// TestAbstentionAfterAGrantIsLoggedAgain: a node that granted, then restarted, abstains
// again, and that is logged again (once).
func TestAbstentionAfterAGrantIsLoggedAgain(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 1)
		logger, logs := logBuffer()
		c := closingClient(t, nodes, redlock.WithTTL(time.Second), redlock.WithRestartGuard(2*time.Second), redlock.WithLogger(logger))
		ctx := t.Context()
		abstentions := func() int { return strings.Count(logs.String(), "abstains") }
		for round := 1; round <= 2; round++ {
			servers[0].Crash()
			servers[0].Restart()
			abstained := 0
			for i := 0; i < 10 && abstained < 2; i++ { // the first calls may meet the connection that the crash broke
				if _, err := c.TryAcquire(ctx, "restarted"); errors.Is(err, redlock.ErrRestarted) {
					abstained++
				}
			}
			require.Equal(t, 2, abstained, "round %d: the restarted server abstains", round)
			assert.Equal(t, round, abstentions(), "round %d: %s", round, logs)
			l, err := c.Acquire(ctx, "restarted") // waits out the guard
			require.NoError(t, err)
			require.NoError(t, l.Release(ctx))
		}
	})
}
