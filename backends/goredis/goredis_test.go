package goredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// servers are the Redis implementations every server test runs on. The real one skips,
// saying how to install it, when redis-server is not on PATH.
var servers = []struct {
	name  string
	start func(t *testing.T) string // returns the address of a fresh, empty server
}{
	{"miniredis", func(t *testing.T) string { return miniredis.RunT(t).Addr() }},
	{"redis-server", func(t *testing.T) string { return redistest.Start(t).Addr() }},
}

// onEachServer runs f in a subtest per server, with a go-redis client and its Node.
func onEachServer(t *testing.T, f func(t *testing.T, rdb *redis.Client, node *goredis.Node)) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			rdb := newClient(t, s.start(t))
			f(t, rdb, goredis.New(rdb))
		})
	}
}

func newClient(t *testing.T, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func script(t *testing.T, name string) *core.Script {
	for _, s := range core.Scripts() {
		if s.Name() == name {
			return s
		}
	}
	t.Fatalf("core.Scripts() has no %q script", name)
	return nil
}

// TestEvalScripts runs every core script through Node.Eval, on a lock that is missing and
// on one we hold, and checks the integer replies: the backend passes keys and args in
// order and converts the reply.
func TestEvalScripts(t *testing.T) {
	const token, ttl = "our-token", "10000"
	keys := core.NewKeys("test:", "scripts")
	type run struct {
		keys []string
		args []string
		want func(t *testing.T, got []int64)
	}
	equals := func(want ...int64) func(*testing.T, []int64) {
		return func(t *testing.T, got []int64) { assert.Equal(t, want, got) }
	}
	cases := map[string]struct{ missing, held run }{
		"acquire": {
			// A fresh lock is granted with a fence seeded from the server clock (> 0).
			missing: run{[]string{keys.Lock, keys.Fence}, []string{token, ttl}, func(t *testing.T, got []int64) {
				require.Len(t, got, 2)
				assert.Equal(t, int64(1), got[0])
				assert.Positive(t, got[1])
			}},
			// Our own token again (a retried acquire) is granted too.
			held: run{[]string{keys.Lock, keys.Fence}, []string{token, ttl}, func(t *testing.T, got []int64) {
				require.Len(t, got, 2)
				assert.Equal(t, int64(1), got[0])
			}},
		},
		"extend": {
			missing: run{[]string{keys.Lock}, []string{token, ttl}, equals(0)},
			held:    run{[]string{keys.Lock}, []string{token, ttl}, equals(1)},
		},
		"release": {
			missing: run{[]string{keys.Lock}, []string{token, keys.Channel}, equals(0, 0)},
			held:    run{[]string{keys.Lock}, []string{token, keys.Channel}, equals(1, 0)}, // 0 listeners
		},
		"raise": {
			missing: run{[]string{keys.Lock, keys.Fence}, []string{token, "5"}, equals(0)},
			held:    run{[]string{keys.Lock, keys.Fence}, []string{token, "5"}, equals(1)},
		},
	}
	for _, s := range core.Scripts() {
		if _, ok := cases[s.Name()]; !ok {
			t.Errorf("no test case for core script %q", s.Name())
		}
	}
	onEachServer(t, func(t *testing.T, rdb *redis.Client, node *goredis.Node) {
		ctx := context.Background()
		for _, s := range core.Scripts() {
			c := cases[s.Name()]
			t.Run(s.Name()+"/missing", func(t *testing.T) {
				require.NoError(t, rdb.FlushAll(ctx).Err())
				got, err := node.Eval(ctx, s, c.missing.keys, c.missing.args...)
				require.NoError(t, err)
				c.missing.want(t, got)
			})
			t.Run(s.Name()+"/held", func(t *testing.T) {
				require.NoError(t, rdb.FlushAll(ctx).Err())
				require.NoError(t, rdb.Set(ctx, keys.Lock, token, time.Minute).Err())
				got, err := node.Eval(ctx, s, c.held.keys, c.held.args...)
				require.NoError(t, err)
				c.held.want(t, got)
			})
		}
	})
}

// TestEvalReloadsFlushedScript: after SCRIPT FLUSH the server answers EVALSHA with NOSCRIPT;
// Eval falls back to EVAL, which loads the script again.
func TestEvalReloadsFlushedScript(t *testing.T) {
	keys := core.NewKeys("test:", "noscript")
	s := script(t, "release")
	onEachServer(t, func(t *testing.T, rdb *redis.Client, node *goredis.Node) {
		ctx := context.Background()
		loaded := func() bool {
			exists, err := rdb.ScriptExists(ctx, s.SHA1()).Result()
			require.NoError(t, err)
			return exists[0]
		}
		eval := func() {
			got, err := node.Eval(ctx, s, []string{keys.Lock}, "token", keys.Channel)
			require.NoError(t, err)
			assert.Equal(t, []int64{0, 0}, got)
		}

		require.NoError(t, rdb.ScriptFlush(ctx).Err())
		eval() // first run ever: NOSCRIPT, then EVAL
		assert.True(t, loaded(), "script loaded by the first Eval")

		require.NoError(t, rdb.ScriptFlush(ctx).Err())
		require.False(t, loaded(), "SCRIPT FLUSH forgot the script")
		eval()
		assert.True(t, loaded(), "script loaded again after SCRIPT FLUSH")
	})
}

// TestEvalHonoursContext: a node that accepts connections and never replies must not hold
// Eval past its context, though go-redis's own read timeout is 3s.
func TestEvalHonoursContext(t *testing.T) {
	s := script(t, "extend")
	keys := []string{core.NewKeys("test:", "hung").Lock}
	cases := []struct {
		name   string
		ctx    func() (context.Context, context.CancelFunc)
		wantIs error // nil: any error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, nil},
		{"cancelled while waiting", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			node := goredis.New(newClient(t, redistest.Hung(t)))
			ctx, cancel := c.ctx()
			defer cancel()
			start := time.Now()
			got, err := node.Eval(ctx, s, keys, "token", "10000")
			elapsed := time.Since(start)
			require.Error(t, err)
			assert.Nil(t, got)
			assert.Less(t, elapsed, 500*time.Millisecond, "Eval returned after %v: %v", elapsed, err)
			if c.wantIs != nil {
				assert.ErrorIs(t, err, c.wantIs)
			}
			t.Logf("after %v: %v", elapsed.Round(time.Millisecond), err)
		})
	}
}

// TestEvalCancelledContext: a context cancelled before the call gives context.Canceled.
func TestEvalCancelledContext(t *testing.T) {
	s := script(t, "extend")
	keys := []string{core.NewKeys("test:", "cancelled").Lock}
	onEachServer(t, func(t *testing.T, _ *redis.Client, node *goredis.Node) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		got, err := node.Eval(ctx, s, keys, "token", "10000")
		assert.ErrorIs(t, err, context.Canceled)
		assert.Nil(t, got)
	})
}

// TestEvalServerError: an error raised inside the script (WRONGTYPE: the lock key holds a
// hash) is an error, not a reply.
func TestEvalServerError(t *testing.T) {
	keys := core.NewKeys("test:", "wrongtype")
	s := script(t, "acquire")
	onEachServer(t, func(t *testing.T, rdb *redis.Client, node *goredis.Node) {
		ctx := context.Background()
		require.NoError(t, rdb.HSet(ctx, keys.Lock, "field", "value").Err())
		got, err := node.Eval(ctx, s, []string{keys.Lock, keys.Fence}, "token", "10000")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "WRONGTYPE")
		assert.Nil(t, got)
		var rerr redis.Error
		assert.True(t, errors.As(err, &rerr), "a redis.Error from the server: %T %v", err, err)
	})
}

// TestEvalBadReply: a reply that is not an array of integers is an error naming the script.
func TestEvalBadReply(t *testing.T) {
	cases := []struct{ name, src string }{
		{"string", "return 'x'"},
		{"integer", "return 1"},
		{"array with a string", "return {1, 'x'}"},
		{"nested array", "return {1, {2}}"},
		{"nil", "return nil"},
	}
	onEachServer(t, func(t *testing.T, _ *redis.Client, node *goredis.Node) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				got, err := node.Eval(context.Background(), core.NewScript("bad", c.src), []string{"k"})
				require.Error(t, err)
				assert.Nil(t, got)
				if c.name != "nil" { // go-redis reports a nil reply as redis.Nil
					assert.Contains(t, err.Error(), "bad script")
				}
			})
		}
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
}

func TestNewNil(t *testing.T) {
	assert.Nil(t, goredis.New(nil))
}
