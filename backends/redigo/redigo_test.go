package redigo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-redlock/redlock/backends/internal/backendtest"
	"github.com/go-redlock/redlock/backends/redigo"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newPool returns a redigo pool for addr, closed at the end of the test.
func newPool(t *testing.T, addr string) *redis.Pool {
	pool := &redis.Pool{
		MaxIdle: 10,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr)
		},
	}
	t.Cleanup(func() { _ = pool.Close() })
	return pool
}

// newNode builds the Node over a fresh pool, and closes both at the end of the test.
func newNode(t *testing.T, s *backendtest.Server) core.Node {
	pool := newPool(t, s.Addr)
	node := redigo.New(pool, s.Addr)
	t.Cleanup(func() { _ = node.Close() })
	return node
}

func hungNode(t *testing.T) core.Node {
	addr := redistest.Hung(t)
	node := redigo.New(newPool(t, addr), addr)
	t.Cleanup(func() { _ = node.Close() })
	return node
}

// TestEval: every core script's replies, NOSCRIPT fallback after SCRIPT FLUSH, a cancelled
// context, WRONGTYPE as an error, malformed replies as errors, 100 concurrent calls; on
// miniredis, redis-server and a one-node cluster.
func TestEval(t *testing.T) { backendtest.Eval(t, newNode) }

// TestEvalHonoursContext: a server that never answers holds Eval no longer than its context.
func TestEvalHonoursContext(t *testing.T) { backendtest.EvalHonoursContext(t, hungNode) }

// TestSubscriber: the Subscriber contract on miniredis and redis-server, with a leak check.
func TestSubscriber(t *testing.T) {
	backendtest.Subscriber(t, newNode, backendtest.Miniredis, backendtest.Redis)
}

// TestSubscribeHonoursContext: a server that never confirms holds Subscribe no longer than
// its context.
func TestSubscribeHonoursContext(t *testing.T) { backendtest.SubscribeHonoursContext(t, hungNode) }

// TestEvalServerErrorType: a server error reply is a redis.Error: the extend script reads a
// lock key that holds a hash, and the server answers WRONGTYPE (the script's own error,
// not one about its arguments).
func TestEvalServerErrorType(t *testing.T) {
	for _, kind := range []backendtest.Kind{backendtest.Miniredis, backendtest.Redis} {
		s := backendtest.Start(t, kind)
		require.NoError(t, s.Admin.HSet(context.Background(), "lock", "field", "value").Err())
		_, err := newNode(t, s).Eval(context.Background(), backendtest.Script(t, "extend"), []string{"lock"}, "token", "10000", "w")
		var rerr redis.Error
		assert.True(t, errors.As(err, &rerr), "%T %v", err, err)
		assert.ErrorContains(t, err, "WRONGTYPE")
	}
}

// TestPubSubConnectionLeavesPool: the pub/sub connection never goes back to the pool, in
// subscribed state or otherwise; Close gives it up, and the pool's connections stay usable.
func TestPubSubConnectionLeavesPool(t *testing.T) {
	s := backendtest.Start(t, backendtest.Redis)
	pool := newPool(t, s.Addr)
	node := redigo.New(pool, s.Addr)
	ctx := context.Background()
	unsubscribe, err := node.Subscribe(ctx, "ch", func(string) {})
	require.NoError(t, err)
	_, err = node.Eval(ctx, core.Scripts()[1], []string{"lock"}, "token", "1000", "w")
	require.NoError(t, err)
	assert.Equal(t, 2, pool.ActiveCount(), "one idle connection for Eval, one for pub/sub")
	assert.Equal(t, 1, pool.IdleCount())
	unsubscribe()
	require.NoError(t, node.Close())
	assert.Equal(t, 1, pool.ActiveCount(), "the pub/sub connection is gone")
	conn := pool.Get()
	defer conn.Close()
	_, err = redis.String(conn.Do("SET", "k", "v"))
	assert.NoError(t, err, "a pooled connection is not in subscribed state")
}

func TestNew(t *testing.T) {
	assert.Nil(t, redigo.New(nil, "x"))
	var pool *redis.Pool
	assert.Nil(t, redigo.New(pool, "x"), "a nil *redis.Pool")
	node := redigo.New(&redis.Pool{}, "10.0.0.1:6379")
	assert.Equal(t, "10.0.0.1:6379", node.String())
	_ = node.Close()
}

// TestNewWithoutName: a Node made without a name still has one (core.Node's String), made
// from its pool: distinct for distinct pools, the same for one pool, and usable as a
// Cluster's node.
func TestNewWithoutName(t *testing.T) {
	p1, p2 := &redis.Pool{}, &redis.Pool{}
	a, b, again := redigo.New(p1, ""), redigo.New(p2, ""), redigo.New(p1, "")
	t.Cleanup(func() { _ = a.Close(); _ = b.Close(); _ = again.Close() })
	assert.NotEmpty(t, a.String())
	assert.NotEmpty(t, b.String())
	assert.NotEqual(t, a.String(), b.String(), "two pools")
	assert.Equal(t, a.String(), again.String(), "one pool")
	assert.Contains(t, a.String(), "redis.Pool", "names the pool")

	var f1, f2 poolFunc = func(context.Context) (redis.Conn, error) { return nil, errors.New("no") },
		func(context.Context) (redis.Conn, error) { return nil, errors.New("no") }
	c, d := redigo.New(f1, ""), redigo.New(f2, "")
	t.Cleanup(func() { _ = c.Close(); _ = d.Close() })
	assert.NotEmpty(t, c.String(), "a pool that is no pointer")
	assert.NotEqual(t, c.String(), d.String(), "two pools that are no pointers")

	_, err := core.NewCluster([]core.Node{a, b, c})
	require.NoError(t, err)
}

// poolFunc is a Pool that is a function, not a pointer.
type poolFunc func(ctx context.Context) (redis.Conn, error)

func (f poolFunc) GetContext(ctx context.Context) (redis.Conn, error) { return f(ctx) }

// TestEvalCancelledWhileWaitingForPool: a pool with no connection to spare makes Eval wait,
// and its context still ends the wait.
func TestEvalCancelledWhileWaitingForPool(t *testing.T) {
	s := backendtest.Start(t, backendtest.Miniredis)
	pool := newPool(t, s.Addr)
	pool.MaxActive, pool.Wait = 1, true
	held := pool.Get()
	defer held.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := redigo.New(pool, s.Addr).Eval(ctx, core.Scripts()[1], []string{"lock"}, "token", "1000", "w")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestEvalSurvivesAReset: a call whose pooled connection the network resets is sent again on
// another connection.
func TestEvalSurvivesAReset(t *testing.T) {
	backendtest.EvalSurvivesAReset(t, func(t *testing.T, addr string) core.Node {
		node := redigo.New(newPool(t, addr), addr)
		t.Cleanup(func() { _ = node.Close() })
		return node
	})
}

// TestStartsWithAServerDown: a redigo pool dials on first use, so its Node is made while
// its server is down (see backendtest.StartsWithAServerDown).
func TestStartsWithAServerDown(t *testing.T) {
	t.Parallel()
	backendtest.StartsWithAServerDown(t, func(t *testing.T, addr string) core.Node {
		pool := &redis.Pool{
			MaxIdle:     4,
			DialContext: func(ctx context.Context) (redis.Conn, error) { return redis.DialContext(ctx, "tcp", addr) },
		}
		node := redigo.New(pool, addr)
		t.Cleanup(func() { _ = node.Close(); _ = pool.Close() })
		return node
	})
}

// TestSubscribeOnClosedPool: once its pool was closed, the Node's Subscribe fails with an
// error that matches core.ErrClosed, as Eval does.
func TestSubscribeOnClosedPool(t *testing.T) {
	s := backendtest.Start(t, backendtest.Miniredis)
	pool := newPool(t, s.Addr)
	node := redigo.New(pool, s.Addr)
	t.Cleanup(func() { _ = node.Close() })
	require.NoError(t, pool.Close())
	_, err := node.Eval(context.Background(), backendtest.Script(t, "extend"), []string{"lock"}, "token", "1000", "w")
	assert.ErrorIs(t, err, core.ErrClosed, "Eval on a closed pool")
	_, err = node.Subscribe(context.Background(), "ch", func(string) {})
	assert.ErrorIs(t, err, core.ErrClosed, "Subscribe on a closed pool")
}
