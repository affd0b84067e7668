package valkey_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/internal/backendtest"
	rlvalkey "github.com/go-redlock/redlock/backends/valkey"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"
)

// newClient connects a valkey-go client to addr, closed at the end of the test. miniredis
// runs no command on a subscribed RESP3 connection, has no client-side caching, and would
// be probed as a cluster, hence its options.
func newClient(t *testing.T, addr string, mini bool) valkey.Client {
	t.Helper()
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, AlwaysRESP2: mini, DisableCache: mini, ForceSingleClient: mini})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// newNode builds the Node over a fresh client, and closes both at the end of the test.
func newNode(t *testing.T, s *backendtest.Server) core.Node {
	node := rlvalkey.New(newClient(t, s.Addr, s.Kind == backendtest.Miniredis))
	t.Cleanup(func() { _ = node.Close() })
	return node
}

// pausedNode is a Node whose server stops answering (SIGSTOP) once the client connected:
// valkey.NewClient itself would not return on a server that never answers.
func pausedNode(t *testing.T) core.Node {
	s := redistest.Start(t)
	node := rlvalkey.New(newClient(t, s.Addr(), false))
	t.Cleanup(func() { _ = node.Close() })
	s.Pause()
	t.Cleanup(s.Resume) // runs first: the client closes against a live server
	return node
}

// TestEval: every core script's replies, NOSCRIPT fallback after SCRIPT FLUSH, a cancelled
// context, WRONGTYPE as an error, malformed replies as errors, 100 concurrent calls; on
// miniredis, redis-server and a one-node cluster.
func TestEval(t *testing.T) { backendtest.Eval(t, newNode) }

// TestEvalHonoursContext: a server that stopped answering holds Eval no longer than its
// context, whether it ends by a deadline or by a cancellation.
func TestEvalHonoursContext(t *testing.T) { backendtest.EvalHonoursContext(t, pausedNode) }

// TestSubscriber: the Subscriber contract on miniredis, redis-server and a one-node Redis
// Cluster (SSUBSCRIBE), with a goroutine leak check.
func TestSubscriber(t *testing.T) {
	backendtest.Subscriber(t, func(t *testing.T, s *backendtest.Server) core.Node {
		// Registered first, so run last: after the client closed (see delayedRefreshes).
		t.Cleanup(func() { delayedRefreshes(t) })
		return newNode(t, s)
	}, backendtest.Miniredis, backendtest.Redis, backendtest.Cluster)
}

// delayedRefreshes waits until no goroutine of valkey-go's delayed cluster refresh is left.
// A cluster client whose connection broke schedules a topology refresh after a random delay
// of up to a second, in a goroutine that sleeps it out even after the client closed; the
// leak check of backendtest.Subscriber knows rueidis's goroutine of that kind, not
// valkey-go's, so the test waits here for the sleep to end. A goroutine still there after
// 3 s is left to the leak check, which then reports it.
func delayedRefreshes(t *testing.T) {
	const fn = "github.com/valkey-io/valkey-go.(*call).DelayDo.func1"
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n := runtime.Stack(buf, true); !strings.Contains(string(buf[:n]), fn) {
			return
		}
	}
	t.Logf("a goroutine of valkey-go's delayed cluster refresh (%s) outlived its client by 3 s", fn)
}

// TestSubscribeHonoursContext: a server that stopped answering holds Subscribe no longer
// than its context.
func TestSubscribeHonoursContext(t *testing.T) { backendtest.SubscribeHonoursContext(t, pausedNode) }

// TestEvalServerErrorType: a server error reply is a *valkey.ValkeyError. The extend script
// reads a lock key that holds a hash, and the server answers WRONGTYPE: the script's own
// error, not one about its arguments.
func TestEvalServerErrorType(t *testing.T) {
	for _, kind := range []backendtest.Kind{backendtest.Miniredis, backendtest.Redis} {
		t.Run(kind.String(), func(t *testing.T) {
			s := backendtest.Start(t, kind)
			require.NoError(t, s.Admin.HSet(context.Background(), "lock", "field", "value").Err())
			_, err := newNode(t, s).Eval(context.Background(), backendtest.Script(t, "extend"), []string{"lock"}, "token", "10000")
			var verr *valkey.ValkeyError
			assert.True(t, errors.As(err, &verr), "%T %v", err, err)
			assert.ErrorContains(t, err, "WRONGTYPE")
		})
	}
}

// TestNew: nil in, nil out; the name and the sharded pub/sub choice follow the client's
// mode.
func TestNew(t *testing.T) {
	assert.Nil(t, rlvalkey.New(nil))
	single := backendtest.Start(t, backendtest.Redis)
	cluster := backendtest.Start(t, backendtest.Cluster)
	cases := []struct {
		name    string
		client  valkey.Client
		want    string
		sharded bool
	}{
		{"standalone", newClient(t, single.Addr, false), single.Addr, false},
		{"cluster", newClient(t, cluster.Addr, false), "cluster(" + cluster.Addr + ")", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			node := rlvalkey.New(c.client)
			assert.Equal(t, c.want, node.String())
			assert.Equal(t, c.sharded, node.ShardedPubSub())
			require.NoError(t, node.Close())
		})
	}
}

// nameless is a client of the caller's own that names no server.
type nameless struct{ valkey.Client }

func (*nameless) Nodes() map[string]valkey.Client { return nil }
func (*nameless) Mode() valkey.ClientMode         { return valkey.ClientModeStandalone }

// TestNewNameless: Nodes over clients that name no server still have distinct names.
func TestNewNameless(t *testing.T) {
	a, b := rlvalkey.New(&nameless{}), rlvalkey.New(&nameless{})
	assert.Contains(t, a.String(), "nameless@0x")
	assert.NotEqual(t, a.String(), b.String())
}

// TestClosedClient: once its valkey-go client was closed, the Node's Eval and SetNX fail at
// once with an error that matches core.ErrClosed, so that a redlock Client over it gives up
// (Acquire and LockContext fail with redlock.ErrClosed, naming the node) instead of
// retrying until its context ends.
func TestClosedClient(t *testing.T) {
	s := redistest.Start(t)
	vc, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{s.Addr()}})
	require.NoError(t, err)
	node := rlvalkey.New(vc)
	// The server has just started: under the restart guard it would abstain for 30 s.
	client, err := redlock.New([]redlock.Node{node}, redlock.WithRestartGuard(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := client.Acquire(ctx, "closed")
	require.NoError(t, err)
	require.NoError(t, lease.Release(ctx))
	vc.Close()

	_, err = node.Eval(ctx, backendtest.Script(t, "extend"), []string{"lock"}, "token", "10000")
	assert.ErrorIs(t, err, core.ErrClosed, "Eval on a closed client")
	assert.ErrorIs(t, err, valkey.ErrClosing, "Eval on a closed client keeps valkey-go's error")
	set, err := node.SetNX(ctx, "lock", "token", time.Second)
	assert.ErrorIs(t, err, core.ErrClosed, "SetNX on a closed client")
	assert.False(t, set)

	start := time.Now()
	_, err = client.Acquire(ctx, "closed")
	assert.ErrorIs(t, err, redlock.ErrClosed)
	assert.ErrorContains(t, err, node.String())
	assert.ErrorIs(t, client.NewMutex("closed").LockContext(ctx), redlock.ErrClosed)
	assert.Less(t, time.Since(start), time.Second, "a closed client was retried")
}

// TestSetNXHonoursContext: a server that stopped answering holds SetNX no longer than its
// context, whether it ends by a deadline or by a cancellation (the latter runs the call in
// a goroutine of its own, as valkey-go honours a bare cancellation only once connected).
func TestSetNXHonoursContext(t *testing.T) {
	cases := []struct {
		name   string
		ctx    func() (context.Context, context.CancelFunc)
		wantIs error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancelled while waiting", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			setter := pausedNode(t).(core.Setter)
			ctx, cancel := c.ctx()
			defer cancel()
			start := time.Now()
			set, err := setter.SetNX(ctx, "lock", "token", time.Second)
			elapsed := time.Since(start)
			assert.False(t, set)
			assert.ErrorIs(t, err, c.wantIs)
			assert.Less(t, elapsed, 500*time.Millisecond, "SetNX returned after %v: %v", elapsed, err)
		})
	}
}

// TestEvalSurvivesAReset: a call on the pipelined connection that the network resets is
// sent once more on the client's new connection.
func TestEvalSurvivesAReset(t *testing.T) {
	backendtest.EvalSurvivesAReset(t, func(t *testing.T, addr string) core.Node {
		node := rlvalkey.New(newClient(t, addr, false))
		t.Cleanup(func() { _ = node.Close() })
		return node
	})
}

// TestAlwaysPipeliningKeepsTheConnection: see New's doc on AlwaysPipelining.
func TestAlwaysPipeliningKeepsTheConnection(t *testing.T) {
	backendtest.TimeoutKeepsTheConnection(t, func(t *testing.T, addr string) core.Node {
		c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, AlwaysPipelining: true})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		node := rlvalkey.New(c)
		t.Cleanup(func() { _ = node.Close() })
		return node
	})
}

// TestSubscribeOnClosedClient: once its valkey client was closed, the Node's Subscribe fails
// with an error that matches core.ErrClosed, as Eval does.
func TestSubscribeOnClosedClient(t *testing.T) {
	s := backendtest.Start(t, backendtest.Miniredis)
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{s.Addr}, AlwaysRESP2: true, DisableCache: true, ForceSingleClient: true})
	require.NoError(t, err)
	node := rlvalkey.New(c)
	t.Cleanup(func() { _ = node.Close() })
	c.Close()
	_, err = node.Eval(context.Background(), backendtest.Script(t, "extend"), []string{"lock"}, "token", "1000")
	assert.ErrorIs(t, err, core.ErrClosed, "Eval on a closed client")
	_, err = node.Subscribe(context.Background(), "ch", func(string) {})
	assert.ErrorIs(t, err, core.ErrClosed, "Subscribe on a closed client")
}

// lateClient is a valkey-go client whose first Do's command is built late: B() waits for
// release, and each command is reported on built.
type lateClient struct {
	valkey.Client
	entered chan struct{} // closed when B is first called
	release chan struct{}
	first   sync.Once
	built   chan []string
}

func (c *lateClient) B() valkey.Builder {
	c.first.Do(func() {
		close(c.entered)
		<-c.release
	})
	return c.Client.B()
}

func (c *lateClient) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	c.built <- slices.Clone(cmd.Commands())
	return c.Client.Do(ctx, cmd)
}

// TestEvalKeepsNoArgumentsAfterItReturns: under a context that can be cancelled and has no
// deadline, Eval runs the call on a goroutine of its own and returns when the context ends.
// That goroutine may build its command only afterwards (here it is held until then): it
// must not read keys and args, which the caller owns again once Eval returned.
func TestEvalKeepsNoArgumentsAfterItReturns(t *testing.T) {
	for _, strs := range []bool{false, true} {
		s := backendtest.Start(t, backendtest.Miniredis)
		c := &lateClient{Client: newClient(t, s.Addr, true), entered: make(chan struct{}), release: make(chan struct{}), built: make(chan []string, 4)}
		node := rlvalkey.New(c)
		t.Cleanup(func() { _ = node.Close() })
		ctx, cancel := context.WithCancel(context.Background())
		keys, args := []string{"lock"}, []string{"token", "1000"}
		returned := make(chan error, 1)
		go func() {
			var err error
			if strs {
				_, err = node.EvalStrings(ctx, backendtest.Script(t, "extend"), keys, args...)
			} else {
				_, err = node.Eval(ctx, backendtest.Script(t, "extend"), keys, args...)
			}
			returned <- err
		}()
		<-c.entered // the call's goroutine is about to build its command
		cancel()
		require.ErrorIs(t, <-returned, context.Canceled)
		keys[0], args[0], args[1] = "other", "mine", "9" // the caller's again
		close(c.release)
		cmd := <-c.built
		assert.Contains(t, cmd, "lock", "EvalStrings %v: %q", strs, cmd)
		assert.Contains(t, cmd, "token", "EvalStrings %v: %q", strs, cmd)
		assert.NotContains(t, cmd, "other", "EvalStrings %v: %q", strs, cmd)
	}
}
