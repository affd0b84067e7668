package goredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/backends/internal/backendtest"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEval: every core script's replies, NOSCRIPT fallback after SCRIPT FLUSH, a cancelled
// context, WRONGTYPE as an error, malformed replies as errors, 100 concurrent calls; on
// miniredis, redis-server and a one-node cluster.
func TestEval(t *testing.T) { backendtest.Eval(t, newNode) }

// TestEvalHonoursContext: a server that never answers holds Eval no longer than its context,
// although the client keeps go-redis's defaults (3 s read timeout, ContextTimeoutEnabled off).
func TestEvalHonoursContext(t *testing.T) {
	backendtest.EvalHonoursContext(t, func(t *testing.T) core.Node {
		rdb := redis.NewClient(&redis.Options{Addr: redistest.Hung(t)})
		node := goredis.New(rdb)
		t.Cleanup(func() { _ = node.Close(); _ = rdb.Close() })
		return node
	})
}

// TestEvalHonoursContextWithDeadlines: the same with ContextTimeoutEnabled, where Eval leaves
// a deadline to go-redis and calls it directly.
func TestEvalHonoursContextWithDeadlines(t *testing.T) {
	backendtest.EvalHonoursContext(t, func(t *testing.T) core.Node {
		rdb := redis.NewClient(&redis.Options{Addr: redistest.Hung(t), ContextTimeoutEnabled: true})
		node := goredis.New(rdb)
		t.Cleanup(func() { _ = node.Close(); _ = rdb.Close() })
		return node
	})
}

func TestString(t *testing.T) {
	single := redis.NewClient(&redis.Options{Addr: "10.1.2.3:6380"})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"10.0.0.1:7000", "10.0.0.2:7000"}})
	t.Cleanup(func() { _ = single.Close(); _ = cluster.Close() })
	cases := []struct {
		name   string
		client redis.UniversalClient
		want   string
	}{
		{"client", single, "10.1.2.3:6380"},
		{"cluster", cluster, "cluster(10.0.0.1:7000,10.0.0.2:7000)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, goredis.New(c.client).String())
		})
	}
	t.Run("failover clients", func(t *testing.T) { // no address of their own: distinct names
		for kind, newClient := range map[string]func(master string) redis.UniversalClient{
			"client": func(master string) redis.UniversalClient {
				return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: master, SentinelAddrs: []string{"10.0.0.9:26379"}})
			},
			"cluster": func(master string) redis.UniversalClient {
				return redis.NewFailoverClusterClient(&redis.FailoverOptions{MasterName: master, SentinelAddrs: []string{"10.0.0.9:26379"}})
			},
		} {
			a, b := newClient("master-a"), newClient("master-b")
			t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
			na, nb := goredis.New(a), goredis.New(b)
			t.Cleanup(func() { _ = na.Close(); _ = nb.Close() })
			assert.NotEmpty(t, na.String(), kind)
			assert.NotEqual(t, na.String(), nb.String(), "two %s Nodes of failover clients of different masters have the same name", kind)
			assert.Equal(t, na.String(), goredis.New(a).String(), kind)
		}
	})
	t.Run("other clients", func(t *testing.T) { // a wrapper of the caller's: distinct names
		a, b := &wrapped{single}, &wrapped{single}
		na, nb := goredis.New(a), goredis.New(b)
		assert.NotEmpty(t, na.String())
		assert.Contains(t, na.String(), "goredis_test.wrapped")
		assert.NotEqual(t, na.String(), nb.String())
		assert.Equal(t, na.String(), goredis.New(a).String())
	})
}

// wrapped is a client type of the caller's own.
type wrapped struct{ *redis.Client }

// TestNewNil: a nil client, even a typed nil, gives a nil Node, which redlock.New rejects.
func TestNewNil(t *testing.T) {
	assert.Nil(t, goredis.New(nil))
	assert.Nil(t, goredis.New((*redis.Client)(nil)))
}

// TestRingIsRefused: a *redis.Ring makes a Node whose every call fails with ErrInvalid and
// says why, so that an acquisition over it fails at once with that reason.
func TestRingIsRefused(t *testing.T) {
	addr := redistest.StartN(t, 1)[0].Addr()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}})
	t.Cleanup(func() { _ = ring.Close() })
	n := goredis.New(ring)
	_, err := n.Eval(context.Background(), core.Scripts()[1], []string{"lock"}, "token", "1000", "w")
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.ErrorContains(t, err, "Ring")

	c, err := redlock.New([]redlock.Node{n})
	require.NoError(t, err)
	start := time.Now()
	_, err = c.Acquire(context.Background(), "ring")
	require.ErrorIs(t, err, redlock.ErrInvalid)
	assert.ErrorContains(t, err, "Ring")
	assert.Less(t, time.Since(start), time.Second, "a refused node was retried")
}

// slowCalls returns a function that runs the release script, within timeout, through a
// go-redis Node (ContextTimeoutEnabled) to a real server whose replies come delay late.
func slowCalls(t *testing.T, delay time.Duration) func(timeout time.Duration) error {
	if !redistest.Available() {
		t.Skip("redis-server not on PATH")
	}
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Slow(t, srv.Addr(), delay), ContextTimeoutEnabled: true})
	node := goredis.New(rdb)
	t.Cleanup(func() { _ = node.Close(); _ = rdb.Close() })
	keys := core.NewKeys("t:", "slow")
	release := core.Scripts()[2]
	require.Equal(t, "release", release.Name())
	return func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := node.Eval(ctx, release, keys.ScriptKeys(), "token", "w", "PUBLISH", "", "leave", "", "")
		return err
	}
}

// TestReconnectsInTheBackground: a server 40ms away cannot be reached on a new go-redis
// connection within a 100ms node timeout (the connection, HELLO, CLIENT SETINFO and the
// command are four round trips), and go-redis closes the connection of a call that timed
// out. After such a call, the Node makes a connection in the background, so that a later
// call finds one ready and takes one round trip.
func TestReconnectsInTheBackground(t *testing.T) {
	call := slowCalls(t, 40*time.Millisecond)
	require.Error(t, call(100*time.Millisecond), "a new connection answered within the timeout: the test needs a slower one")
	var err error
	for range 40 {
		if err = call(100 * time.Millisecond); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, err, "no call succeeded in 40 within two seconds after the first timed out")
}

// TestBackgroundConnectionLeavesTheIdleOneAlone: a call that times out while the pool has
// a ready connection (here, the one made in the background after the first timeout) makes
// no connection in the background: a Ping there would hold the ready connection for a
// round trip, and a call made meanwhile, back to back, would start a connection of its
// own that cannot finish within the node timeout, and time out in turn, for ever. After
// the first timeout, calls every 10 ms to a server 50 ms away answer again within 4 s.
func TestBackgroundConnectionLeavesTheIdleOneAlone(t *testing.T) {
	call := slowCalls(t, 50*time.Millisecond)
	require.NoError(t, call(5*time.Second)) // a ready connection, and the script loaded
	require.Error(t, call(30*time.Millisecond))
	deadline := time.Now().Add(4 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = call(100 * time.Millisecond); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, err, "no call succeeded within 4 s after the first timed out")
}

// TestCloseStopsTheBackgroundConnection: Close ends a connection being made in the
// background (here to a server that never answers, within the client's 5 s DialTimeout)
// and waits for it, promptly.
func TestCloseStopsTheBackgroundConnection(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Hung(t), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	node := goredis.New(rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	keys := core.NewKeys("t:", "close")
	_, err := node.Eval(ctx, core.Scripts()[0], keys.ScriptKeys(), "token", "1000", "0", "0", "", "0", "1000")
	require.Error(t, err)
	start := time.Now()
	require.NoError(t, node.Close())
	assert.Less(t, time.Since(start), 2*time.Second, "Close waited out the background connection's DialTimeout")
}

// TestEvalSurvivesAReset: a call whose connection the network resets is sent again (go-redis
// retries it itself).
func TestEvalSurvivesAReset(t *testing.T) {
	backendtest.EvalSurvivesAReset(t, func(t *testing.T, addr string) core.Node {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		node := goredis.New(rdb)
		t.Cleanup(func() { _ = node.Close(); _ = rdb.Close() })
		return node
	})
}
