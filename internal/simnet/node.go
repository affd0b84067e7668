package simnet

import (
	"testing"

	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Options returns go-redis options for a client of s: its Addr, Dial as the Dialer, what
// miniredis needs (RESP2, no CLIENT SETINFO, no maintenance notifications), and a pool that
// never runs out (PoolSize). Other fields keep go-redis's defaults, as a program's client
// would.
func Options(s *Server) *redis.Options {
	return &redis.Options{
		Addr:                     s.Addr(),
		Dialer:                   s.Dial,
		DisableIdentity:          true,
		Protocol:                 2,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		PoolSize:                 PoolSize,
	}
}

// PoolSize is the connection pool size of the clients of Options: more connections than a
// test has calls at once. A call that waits for a connection takes a timer from a pool that
// go-redis shares across the process; one made in a synctest bubble and taken later outside
// it (or in another bubble) panics when waited on.
const PoolSize = 1024

// Client returns a go-redis client for s (see Options), each of opts applied to its options
// first. It is closed when t's test ends.
func Client(t testing.TB, s *Server, opts ...func(*redis.Options)) *redis.Client {
	o := Options(s)
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Node returns the go-redis backend's Node over a new Client for s (opts as for Client).
// The Node and then the client are closed when t's test ends.
func Node(t testing.TB, s *Server, opts ...func(*redis.Options)) *goredis.Node {
	n := goredis.New(Client(t, s, opts...))
	t.Cleanup(func() { _ = n.Close() }) // registered after the client's: runs before it
	return n
}

// Nodes returns a Node for each server (see Node), as core.Node values (redlock.Node is
// the same type).
func Nodes(t testing.TB, servers []*Server, opts ...func(*redis.Options)) []core.Node {
	out := make([]core.Node, len(servers))
	for i, s := range servers {
		out[i] = Node(t, s, opts...)
	}
	return out
}
