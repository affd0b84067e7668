package rueidis_test

import (
	"context"
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

// nodeOf builds the Node over c, closed at the end of the test (before c).
func nodeOf(t *testing.T, c rueidis.Client) *rlrueidis.Node {
	node := rlrueidis.New(c)
	t.Cleanup(func() { _ = node.Close() })
	return node
}

// newNode builds the Node over a fresh client, and closes both at the end of the test.
func newNode(t *testing.T, s *backendtest.Server) core.Node {
	return nodeOf(t, newClient(t, s.Addr, s.Kind == backendtest.Miniredis))
}

// pausedNode is a Node whose server stops answering (SIGSTOP) once the client connected:
// rueidis.NewClient itself would not return on a server that never answers.
func pausedNode(t *testing.T) core.Node {
	s := redistest.Start(t)
	node := nodeOf(t, newClient(t, s.Addr(), false))
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

// TestEvalServerErrorType: a server error reply is a *rueidis.RedisError.
func TestEvalServerErrorType(t *testing.T) {
	backendtest.ServerErrorType[*rueidis.RedisError](t, newNode)
}

// TestNew: nil in, nil out; the name and the sharded pub/sub choice follow the client's
// mode.
func TestNew(t *testing.T) {
	assert.Nil(t, rlrueidis.New(nil))
	backendtest.Names(t, func(t *testing.T, addr string) core.Node { return rlrueidis.New(newClient(t, addr, false)) })
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
		return nodeOf(t, newClient(t, addr, false))
	})
}

// TestAlwaysPipeliningKeepsTheConnection: see New's doc on AlwaysPipelining.
func TestAlwaysPipeliningKeepsTheConnection(t *testing.T) {
	backendtest.TimeoutKeepsTheConnection(t, func(t *testing.T, addr string) core.Node {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, AlwaysPipelining: true})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return nodeOf(t, c)
	})
}

// TestClosedClient: once its rueidis client was closed, the Node's calls fail with an error
// that matches core.ErrClosed and keeps rueidis.ErrClosing (see backendtest.ClosedClient).
func TestClosedClient(t *testing.T) {
	backendtest.ClosedClient(t, rueidis.ErrClosing, func(t *testing.T, addr string, mini bool) (core.Node, func()) {
		c := newClient(t, addr, mini)
		return nodeOf(t, c), c.Close
	})
}

// lateClient is a rueidis client whose first command is built late (see backendtest.Late).
type lateClient struct {
	rueidis.Client
	late *backendtest.Late
}

func (c *lateClient) B() rueidis.Builder {
	c.late.Hold()
	return c.Client.B()
}

func (c *lateClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.late.Built(cmd.Commands())
	return c.Client.Do(ctx, cmd)
}

// TestEvalKeepsNoArgumentsAfterItReturns: see backendtest.EvalKeepsNoArguments.
func TestEvalKeepsNoArgumentsAfterItReturns(t *testing.T) {
	backendtest.EvalKeepsNoArguments(t, func(t *testing.T, addr string, late *backendtest.Late) core.Node {
		return nodeOf(t, &lateClient{Client: newClient(t, addr, true), late: late})
	})
}
