package rueidis_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/go-redlock/redlock/backends/internal/backendtest"
	rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newClient connects a rueidis client to addr, closed at the end of the test. miniredis
// runs no command on a subscribed RESP3 connection, has no client-side caching, and would
// pass for a cluster, hence its options.
func newClient(t *testing.T, addr string, mini bool) rueidis.Client {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, AlwaysRESP2: mini, DisableCache: mini, ForceSingleClient: mini})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// newNode builds the Node over a fresh client, and closes both at the end of the test.
func newNode(t *testing.T, s *backendtest.Server) core.Node {
	node := rlrueidis.New(newClient(t, s.Addr, s.Kind == backendtest.Miniredis))
	t.Cleanup(func() { _ = node.Close() })
	return node
}

// pausedNode is a Node whose server stops answering (SIGSTOP) once the client connected:
// rueidis.NewClient itself would not return on a server that never answers.
func pausedNode(t *testing.T) core.Node {
	s := redistest.Start(t)
	node := rlrueidis.New(newClient(t, s.Addr(), false))
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
// context.
func TestEvalHonoursContext(t *testing.T) { backendtest.EvalHonoursContext(t, pausedNode) }

// TestSubscriber: the Subscriber contract on miniredis, redis-server and a one-node Redis
// Cluster (SSUBSCRIBE), with a leak check.
func TestSubscriber(t *testing.T) {
	backendtest.Subscriber(t, newNode, backendtest.Miniredis, backendtest.Redis, backendtest.Cluster)
}

// TestSubscribeHonoursContext: a server that stopped answering holds Subscribe no longer
// than its context.
func TestSubscribeHonoursContext(t *testing.T) { backendtest.SubscribeHonoursContext(t, pausedNode) }

// TestEvalServerErrorType: a server error reply is a *rueidis.RedisError: the extend script reads a
// lock key that holds a hash, and the server answers WRONGTYPE (the script's own error,
// not one about its arguments).
func TestEvalServerErrorType(t *testing.T) {
	for _, kind := range []backendtest.Kind{backendtest.Miniredis, backendtest.Redis} {
		s := backendtest.Start(t, kind)
		require.NoError(t, s.Admin.HSet(context.Background(), "lock", "field", "value").Err())
		_, err := newNode(t, s).Eval(context.Background(), backendtest.Script(t, "extend"), []string{"lock"}, "token", "10000")
		var rerr *rueidis.RedisError
		assert.True(t, errors.As(err, &rerr), "%T %v", err, err)
		assert.ErrorContains(t, err, "WRONGTYPE")
	}
}

// TestNew: the name and the sharded pub/sub choice follow the client's mode.
func TestNew(t *testing.T) {
	assert.Nil(t, rlrueidis.New(nil))
	single := backendtest.Start(t, backendtest.Redis)
	cluster := backendtest.Start(t, backendtest.Cluster)
	cases := []struct {
		name    string
		client  rueidis.Client
		want    string
		sharded bool
	}{
		{"standalone", newClient(t, single.Addr, false), single.Addr, false},
		{"cluster", newClient(t, cluster.Addr, false), "cluster(" + cluster.Addr + ")", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			node := rlrueidis.New(c.client)
			assert.Equal(t, c.want, node.String())
			assert.Equal(t, c.sharded, node.ShardedPubSub())
			require.NoError(t, node.Close())
		})
	}
}

// nameless is a client of the caller's own that names no server.
type nameless struct{ rueidis.Client }

func (*nameless) Nodes() map[string]rueidis.Client { return nil }
func (*nameless) Mode() rueidis.ClientMode         { return rueidis.ClientModeStandalone }

// TestNewNameless: Nodes over clients that name no server still have distinct names.
func TestNewNameless(t *testing.T) {
	a, b := rlrueidis.New(&nameless{}), rlrueidis.New(&nameless{})
	assert.Contains(t, a.String(), "nameless@0x")
	assert.NotEqual(t, a.String(), b.String())
}

// TestEvalSurvivesAReset: a call on the pipelined connection that the network resets is
// sent once more on the client's new connection.
func TestEvalSurvivesAReset(t *testing.T) {
	backendtest.EvalSurvivesAReset(t, func(t *testing.T, addr string) core.Node {
		node := rlrueidis.New(newClient(t, addr, false))
		t.Cleanup(func() { _ = node.Close() })
		return node
	})
}

// TestAlwaysPipeliningKeepsTheConnection: see New's doc on AlwaysPipelining.
func TestAlwaysPipeliningKeepsTheConnection(t *testing.T) {
	backendtest.TimeoutKeepsTheConnection(t, func(t *testing.T, addr string) core.Node {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, AlwaysPipelining: true})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		node := rlrueidis.New(c)
		t.Cleanup(func() { _ = node.Close() })
		return node
	})
}

// TestSubscribeOnClosedClient: once its rueidis client was closed, the Node's Subscribe fails
// with an error that matches core.ErrClosed, as Eval does.
func TestSubscribeOnClosedClient(t *testing.T) {
	s := backendtest.Start(t, backendtest.Miniredis)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, AlwaysRESP2: true, DisableCache: true, ForceSingleClient: true})
	require.NoError(t, err)
	node := rlrueidis.New(c)
	t.Cleanup(func() { _ = node.Close() })
	c.Close()
	_, err = node.Eval(context.Background(), backendtest.Script(t, "extend"), []string{"lock"}, "token", "1000")
	assert.ErrorIs(t, err, core.ErrClosed, "Eval on a closed client")
	_, err = node.Subscribe(context.Background(), "ch", func(string) {})
	assert.ErrorIs(t, err, core.ErrClosed, "Subscribe on a closed client")
}

// lateClient is a rueidis client whose first Do's command is built late: B() waits for
// release, and each command is reported on built.
type lateClient struct {
	rueidis.Client
	entered chan struct{} // closed when B is first called
	release chan struct{}
	first   sync.Once
	built   chan []string
}

func (c *lateClient) B() rueidis.Builder {
	c.first.Do(func() {
		close(c.entered)
		<-c.release
	})
	return c.Client.B()
}

func (c *lateClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
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
		node := rlrueidis.New(c)
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
