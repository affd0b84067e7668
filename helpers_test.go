package redlock_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the tests stop servers on purpose.
	redis.SetLogger(quietLogger{})
	// The parallel tests mostly wait (see bubble_test.go): unless -parallel is given, twice
	// as many as there are CPUs run at once.
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(2*runtime.GOMAXPROCS(0))); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// goredisNode returns a Node over a fresh go-redis client for addr, closed at cleanup. The
// client has dialled its first connection, as a running program's has: a dial and go-redis's
// handshake, on a loaded test machine, can outlast a short node timeout.
func goredisNode(t testing.TB, addr string) redlock.Node {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	_ = c.Ping(context.Background()).Err() // a server a test stops at once may not answer
	n := goredis.New(c)
	t.Cleanup(func() { _ = n.Close() }) // its pub/sub connection; runs before c.Close
	return n
}

// hungNode returns a Node over a go-redis client for a server that accepts connections and
// never answers (redistest.Hung).
func hungNode(t testing.TB) redlock.Node {
	c := redis.NewClient(&redis.Options{Addr: redistest.Hung(t)})
	t.Cleanup(func() { _ = c.Close() })
	n := goredis.New(c)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// miniNodes starts n miniredis servers and returns a Node for each.
func miniNodes(t testing.TB, n int) ([]redlock.Node, []*miniredis.Miniredis) {
	nodes := make([]redlock.Node, n)
	servers := make([]*miniredis.Miniredis, n)
	for i := range n {
		// On a reserved port: a test that closes one and starts it again on its address
		// must not find the port taken meanwhile by another test process.
		servers[i] = redistest.StartMiniredis(t)
		nodes[i] = goredisNode(t, servers[i].Addr())
	}
	return nodes, servers
}

// realNodes starts n redis-server processes and returns a Node for each.
func realNodes(t testing.TB, n int) ([]redlock.Node, []*redistest.Server) {
	servers := realServers(t, n)
	return nodesFor(t, servers), servers
}

// realServers starts n redis-server processes.
func realServers(t testing.TB, n int) []*redistest.Server { return redistest.StartN(t, n) }

// nodesFor returns a Node, with its own go-redis client, for each server.
func nodesFor(t testing.TB, servers []*redistest.Server) []redlock.Node {
	nodes := make([]redlock.Node, len(servers))
	for i, s := range servers {
		nodes[i] = goredisNode(t, s.Addr())
	}
	return nodes
}

// store is what a test needs of a server: read a key.
type store interface {
	exists(key string) bool
}

type miniStore struct{ m *miniredis.Miniredis }

func (s miniStore) exists(key string) bool { return s.m.Exists(key) }

type realStore struct{ s *redistest.Server }

func (s realStore) exists(key string) bool {
	v, err := s.s.Do("EXISTS", key)
	return err == nil && v == int64(1)
}

// kind is one way to run a test: on miniredis or on real servers.
type kind struct {
	name  string
	nodes func(t testing.TB, n int) ([]redlock.Node, []store)
}

var kinds = []kind{
	{"miniredis", func(t testing.TB, n int) ([]redlock.Node, []store) {
		nodes, servers := miniNodes(t, n)
		stores := make([]store, n)
		for i, s := range servers {
			stores[i] = miniStore{s}
		}
		return nodes, stores
	}},
	{"redis-server", func(t testing.TB, n int) ([]redlock.Node, []store) {
		nodes, servers := realNodes(t, n)
		stores := make([]store, n)
		for i, s := range servers {
			stores[i] = realStore{s}
		}
		return nodes, stores
	}},
}

// newClient returns a Client over nodes. The restart guard is off unless opts turn it on:
// the test servers are fresh, and the guard's own tests say what it does.
func newClient(t testing.TB, nodes []redlock.Node, opts ...redlock.Option) *redlock.Client {
	c, err := redlock.New(nodes, append([]redlock.Option{redlock.WithRestartGuard(0)}, opts...)...)
	require.NoError(t, err)
	return c
}

// patient is a node timeout that a loaded machine does not miss, for tests over miniredis
// that time nothing (the default, 100 ms, is missed now and then when two race-enabled test
// binaries share two cores). It must stay below the test's TTL.
var patient = redlock.WithNodeTimeout(2 * time.Second)

// ctxT returns a context that ends after d, or when the test ends.
func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// slowNode delays every call by delay (honouring ctx), like a distant server.
type slowNode struct {
	redlock.Node
	delay time.Duration
}

func (n slowNode) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	select {
	case <-time.After(n.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

func lockKey(name string) string { return fmt.Sprintf("redlock:{%s}", name) }
