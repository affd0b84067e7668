package redigo_test

import (
	"context"
	"sync"
	"testing"

	"github.com/go-redlock/redlock/backends/redigo"
	"github.com/go-redlock/redlock/conformance"
	"github.com/go-redlock/redlock/core"
	"github.com/gomodule/redigo/redis"
)

// TestConformance runs the shared conformance suite on the redigo Node, on miniredis and on
// real redis-server processes.
func TestConformance(t *testing.T) {
	var clients sync.Map // core.Node → the func that closes its driver client
	conformance.Run(t, conformance.Harness{
		CloseClient: func(_ testing.TB, n core.Node) {
			close, _ := clients.Load(n)
			close.(func())()
		},
		NewNode: func(t testing.TB, addr string) core.Node {
			pool := &redis.Pool{
				MaxIdle: 10,
				// A bounded pool that waits: context/deadline/behind-others checks that a call
				// waiting for a connection still ends at its context's deadline.
				MaxActive: 20, Wait: true,
				DialContext: func(ctx context.Context) (redis.Conn, error) {
					return redis.DialContext(ctx, "tcp", addr)
				},
			}
			t.Cleanup(func() { _ = pool.Close() })
			node := redigo.New(pool, addr)
			t.Cleanup(func() { _ = node.Close() }) // runs first: the Node before its pool
			clients.Store(node, func() { _ = pool.Close() })
			return node
		},
	})
}
