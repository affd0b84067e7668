package backendtest

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Eval runs the Eval tests on miniredis and on redis-server (and the script replies on a
// one-node cluster too, where the cluster client routes by the keys' slot).
func Eval(t *testing.T, newNode NewNode) {
	t.Run("scripts", func(t *testing.T) { evalScripts(t, newNode) })
	t.Run("noscript", func(t *testing.T) { evalNoScript(t, newNode) })
	t.Run("cancelled", func(t *testing.T) { evalCancelled(t, newNode) })
	t.Run("server error", func(t *testing.T) { evalServerError(t, newNode) })
	t.Run("bad reply", func(t *testing.T) { evalBadReply(t, newNode) })
	t.Run("concurrent", func(t *testing.T) { evalConcurrent(t, newNode) })
}

// evalScripts runs every core script through Node.Eval, on a lock that is missing and on
// one we hold, and checks the integer replies: the backend passes keys and args in order
// and converts the reply.
func evalScripts(t *testing.T, newNode NewNode) {
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
	granted := func(t *testing.T, got []int64) {
		require.Len(t, got, 2)
		assert.Equal(t, int64(1), got[0])
		assert.Positive(t, got[1], "fence seeded from the server clock")
	}
	// Each case runs the core script called script ("" for name): a reader's calls are
	// acquire, extend and release in mode "r".
	cases := map[string]struct {
		script        string
		missing, held run
	}{
		"acquire": {
			missing: run{acquireKeys(keys), acquireArgs(token, ttl), granted},
			held:    run{acquireKeys(keys), acquireArgs(token, ttl), granted}, // a retried acquire
		},
		"extend": {
			missing: run{[]string{keys.Lock, keys.Fence}, []string{token, ttl, "w"}, equals(0)},
			held:    run{[]string{keys.Lock, keys.Fence}, []string{token, ttl, "w"}, equals(1)},
		},
		"release": {
			missing: run{releaseKeys(keys), releaseArgs(token, "w", "PUBLISH"), equals(0, 0, 1)}, // nothing of ours, no other owner
			held:    run{releaseKeys(keys), releaseArgs(token, "w", "PUBLISH"), equals(1, 0)},    // no waiter woken
		},
		// A reader's calls: "held" is a writer's lock here, with our token.
		"acquire-reader": {script: "acquire",
			missing: run{acquireKeys(keys), readArgs(token, ttl), equals(1, 0)},
			held: run{acquireKeys(keys), readArgs(token, ttl), func(t *testing.T, got []int64) {
				require.Len(t, got, 2)
				assert.Equal(t, int64(0), got[0], "a reader is refused while a writer holds the lock")
				assert.True(t, got[1] > 0 && got[1] <= 60000, "the writer's remaining time, got %d", got[1])
			}},
		},
		"extend-reader": {script: "extend",
			missing: run{[]string{keys.Lock, keys.Readers}, []string{token, ttl, "r"}, equals(0)},
			held:    run{[]string{keys.Lock, keys.Readers}, []string{token, ttl, "r"}, equals(0)},
		},
		"release-reader": {script: "release",
			missing: run{releaseKeys(keys), releaseArgs(token, "r", "PUBLISH"), equals(0, 0, 1)}, // nothing of ours, no other owner
			held:    run{releaseKeys(keys), releaseArgs(token, "r", "PUBLISH"), equals(0, 0)},
		},
		"proclaim": {
			missing: run{[]string{keys.Lock, keys.Leader}, []string{token, keys.LeaderChannel(), "PUBLISH", "v", ttl}, equals(0)},
			held:    run{[]string{keys.Lock, keys.Leader}, []string{token, keys.LeaderChannel(), "PUBLISH", "v", ttl}, equals(1, 0)},
		},
		"leader": {
			missing: run{[]string{keys.Lock, keys.Leader}, nil, equals(0)},
			held:    run{[]string{keys.Lock, keys.Leader}, nil, equals(0)}, // held, but nothing proclaimed
		},
	}
	for _, s := range core.Scripts() {
		if _, ok := cases[s.Name()]; !ok && s.Name() != "status" { // status: statusCase
			t.Errorf("no test case for core script %q", s.Name())
		}
	}
	onEach(t, newNode, []Kind{Miniredis, Redis, Cluster}, nil, func(t *testing.T, srv *Server, node core.Node) {
		ctx := context.Background()
		statusCase(t, srv, node, Script(t, "status"), keys, token)
		for _, name := range slices.Sorted(maps.Keys(cases)) {
			c := cases[name]
			s := Script(t, cmp.Or(c.script, name))
			t.Run(name+"/missing", func(t *testing.T) {
				flush(t, srv)
				got, err := node.Eval(ctx, s, c.missing.keys, c.missing.args...)
				require.NoError(t, err)
				c.missing.want(t, got)
			})
			t.Run(name+"/held", func(t *testing.T) {
				flush(t, srv)
				require.NoError(t, srv.Admin.Set(ctx, keys.Lock, token, time.Minute).Err())
				got, err := node.Eval(ctx, s, c.held.keys, c.held.args...)
				require.NoError(t, err)
				c.held.want(t, got)
			})
		}
	})
}

// evalNoScript: after SCRIPT FLUSH the server answers EVALSHA with NOSCRIPT; Eval falls back
// to EVAL, which loads the script again.
func evalNoScript(t *testing.T, newNode NewNode) {
	keys := core.NewKeys("test:", "noscript")
	s := Script(t, "release")
	onEach(t, newNode, []Kind{Miniredis, Redis}, nil, func(t *testing.T, srv *Server, node core.Node) {
		ctx := context.Background()
		loaded := func() bool {
			exists, err := srv.Admin.ScriptExists(ctx, s.SHA1()).Result()
			require.NoError(t, err)
			return exists[0]
		}
		eval := func() {
			got, err := node.Eval(ctx, s, releaseKeys(keys), releaseArgs("token", "w", "PUBLISH")...)
			require.NoError(t, err)
			assert.Equal(t, []int64{0, 0, 1}, got) // a release that finds nothing
		}
		require.NoError(t, srv.Admin.ScriptFlush(ctx).Err())
		eval() // first run ever: NOSCRIPT, then EVAL
		assert.True(t, loaded(), "script loaded by the first Eval")
		eval() // EVALSHA
		require.NoError(t, srv.Admin.ScriptFlush(ctx).Err())
		require.False(t, loaded(), "SCRIPT FLUSH forgot the script")
		eval()
		assert.True(t, loaded(), "script loaded again after SCRIPT FLUSH")
	})
}

// evalCancelled: a context cancelled before the call gives context.Canceled, and no reply.
func evalCancelled(t *testing.T, newNode NewNode) {
	s := Script(t, "extend")
	keys := []string{core.NewKeys("test:", "cancelled").Lock}
	onEach(t, newNode, []Kind{Miniredis, Redis}, nil, func(t *testing.T, _ *Server, node core.Node) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		got, err := node.Eval(ctx, s, keys, "token", "10000")
		assert.ErrorIs(t, err, context.Canceled)
		assert.Nil(t, got)
	})
}

// evalServerError: an error raised inside the script (WRONGTYPE: the lock key holds a hash)
// is an error, not a reply.
func evalServerError(t *testing.T, newNode NewNode) {
	keys := core.NewKeys("test:", "wrongtype")
	s := Script(t, "acquire")
	onEach(t, newNode, []Kind{Miniredis, Redis}, nil, func(t *testing.T, srv *Server, node core.Node) {
		require.NoError(t, srv.Admin.HSet(context.Background(), keys.Lock, "field", "value").Err())
		got, err := node.Eval(context.Background(), s, acquireKeys(keys), acquireArgs("token", "10000")...)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "WRONGTYPE")
		assert.Nil(t, got)
	})
}

// evalBadReply: a reply that is not an array of integers is an error, never a reply.
func evalBadReply(t *testing.T, newNode NewNode) {
	cases := []struct{ name, src string }{
		{"string", "return 'x'"},
		{"integer", "return 1"},
		{"array with a string", "return {1, 'x'}"},
		{"nested array", "return {1, {2}}"},
		{"nil", "return nil"},
		{"status", "return redis.status_reply('OK')"},
	}
	onEach(t, newNode, []Kind{Miniredis, Redis}, nil, func(t *testing.T, _ *Server, node core.Node) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				got, err := node.Eval(context.Background(), core.NewScript("bad", c.src), []string{"k"})
				require.Error(t, err)
				assert.Nil(t, got)
			})
		}
	})
}

// evalConcurrent: 100 goroutines at once on one node, each on its own lock, all answered.
func evalConcurrent(t *testing.T, newNode NewNode) {
	s := Script(t, "acquire")
	onEach(t, newNode, []Kind{Miniredis, Redis}, nil, func(t *testing.T, _ *Server, node core.Node) {
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				keys := core.NewKeys("test:", strings.Repeat("n", i+1))
				got, err := node.Eval(context.Background(), s, acquireKeys(keys), acquireArgs("token", "10000")...)
				if err == nil && (len(got) < 2 || got[0] != 1) {
					err = errors.New("not granted")
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			assert.NoError(t, err)
		}
	})
}

// EvalHonoursContext: a node that accepts connections and never replies must not hold Eval
// past its context's deadline or cancellation. hung builds such a node.
func EvalHonoursContext(t *testing.T, hung func(t *testing.T) core.Node) {
	s := Script(t, "extend")
	keys := []string{core.NewKeys("test:", "hung").Lock}
	for _, c := range honourCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			node := hung(t)
			ctx, cancel := c.ctx()
			defer cancel()
			start := time.Now()
			got, err := node.Eval(ctx, s, keys, "token", "10000")
			elapsed := time.Since(start)
			require.Error(t, err)
			assert.Nil(t, got)
			assert.Less(t, elapsed, 500*time.Millisecond, "Eval returned after %v: %v", elapsed, err)
			assert.ErrorIs(t, err, c.wantIs)
			t.Logf("after %v: %v", elapsed.Round(time.Millisecond), err)
		})
	}
}

// EvalSurvivesAReset: a call whose connection the network resets under it (the request
// never reaches the server) is sent again on a new connection, and answers. node builds the
// Node over addr, a proxy to a real redis-server that resets the connection of the first
// EVALSHA (or EVAL) it sees.
func EvalSurvivesAReset(t *testing.T, node func(t *testing.T, addr string) core.Node) {
	if !redistest.Available() {
		t.Skip("redis-server not on PATH")
	}
	srv := redistest.Start(t)
	addr, reset := redistest.ResetOnce(t, srv.Addr(), "eval")
	n := node(t, addr)
	k := core.NewKeys("test:", "reset")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := n.Eval(ctx, Script(t, "acquire"), k.ScriptKeys(), acquireArgs("token", "10000")...)
	require.True(t, reset(), "the proxy reset no call: the test proves nothing")
	require.NoError(t, err, "a call whose connection was reset failed instead of being sent again")
	assert.Equal(t, int64(1), got[0], "the acquisition was refused: %v", got)
}

// TimeoutKeepsTheConnection: a call that its deadline ended leaves the Node's connection
// open, so the next call costs one round trip, not a new connection's handshake first:
// after each of three timed-out calls the next one answers, and the server still has every
// client connection (by id) that it had before them. node builds the Node over addr, a
// proxy that delays every reply by 70 ms.
func TimeoutKeepsTheConnection(t *testing.T, node func(t *testing.T, addr string) core.Node) {
	if !redistest.Available() {
		t.Skip("redis-server not on PATH")
	}
	srv := redistest.Start(t)
	n := node(t, redistest.Slow(t, srv.Addr(), 70*time.Millisecond))
	k := core.NewKeys("test:", "timeout")
	release := Script(t, "release")
	call := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := n.Eval(ctx, release, k.ScriptKeys(), releaseArgs("token", "w", "PUBLISH")...)
		return err
	}
	// clients returns the ids of the server's client connections but the one asking.
	clients := func() []string {
		v, err := srv.Do("CLIENT", "LIST")
		require.NoError(t, err)
		list, _ := v.(string)
		var ids []string
		for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
			if strings.Contains(line, "cmd=client|list") {
				continue
			}
			for _, field := range strings.Fields(line) {
				if id, ok := strings.CutPrefix(field, "id="); ok {
					ids = append(ids, id)
				}
			}
		}
		return ids
	}
	require.NoError(t, call(5*time.Second)) // connected, and the script loaded
	before := clients()
	require.NotEmpty(t, before)
	for range 3 {
		require.ErrorIs(t, call(30*time.Millisecond), context.DeadlineExceeded)
		require.NoError(t, call(5*time.Second))
	}
	assert.Subset(t, clients(), before, "a call that timed out closed its connection: the next one made a new one")
}

// ServerErrorType: a server error reply is an error that errors.As finds an E in, the
// driver's error type. The extend script reads a lock key that holds a hash, and the server
// answers WRONGTYPE: the script's own error, not one about its arguments.
func ServerErrorType[E error](t *testing.T, newNode NewNode) {
	for _, kind := range []Kind{Miniredis, Redis} {
		t.Run(kind.String(), func(t *testing.T) {
			s := Start(t, kind)
			require.NoError(t, s.Admin.HSet(context.Background(), "lock", "field", "value").Err())
			_, err := newNode(t, s).Eval(context.Background(), Script(t, "extend"), []string{"lock"}, "token", "10000", "w")
			var driverErr E
			assert.True(t, errors.As(err, &driverErr), "%T %v", err, err)
			assert.ErrorContains(t, err, "WRONGTYPE")
		})
	}
}

// statusCase runs core's status script, which replies with strings (EvalStrings), on a
// free and a held lock: it reads the lock key and its PTTL after the server's time and
// run_id.
func statusCase(t *testing.T, srv *Server, node core.Node, s *core.Script, keys core.Keys, token string) {
	statusKeys := []string{keys.Lock, keys.Fence, keys.Queue, keys.Alive, keys.Waiters, keys.Readers, keys.Leader, keys.Lock + ":permits"}
	ctx := context.Background()
	t.Run("status/missing", func(t *testing.T) {
		flush(t, srv)
		got, err := node.EvalStrings(ctx, s, statusKeys)
		require.NoError(t, err)
		require.Greater(t, len(got), 4)
		assert.Equal(t, []string{"", "-2"}, got[2:4], "a free lock: no value, no key")
	})
	t.Run("status/held", func(t *testing.T) {
		flush(t, srv)
		require.NoError(t, srv.Admin.Set(ctx, keys.Lock, token, time.Minute).Err())
		got, err := node.EvalStrings(ctx, s, statusKeys)
		require.NoError(t, err)
		require.Greater(t, len(got), 4)
		assert.Equal(t, token, got[2], "the holder's token")
	})
}

// honourCase is a context that ends while a call waits for a server that never replies:
// by its deadline or by a cancellation.
type honourCase struct {
	name   string
	ctx    func() (context.Context, context.CancelFunc)
	wantIs error
}

func honourCases() []honourCase {
	return []honourCase{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancelled while waiting", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	}
}
