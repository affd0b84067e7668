package goredis_test

import (
	"sync"
	"testing"

	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/conformance"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
)

// TestConformance runs the shared conformance suite on the go-redis Node, on miniredis, on
// real redis-server processes, and on a real 3-master Redis Cluster through a ClusterClient.
func TestConformance(t *testing.T) {
	t.Parallel()         // beside the other tests: the package stays within a minute
	var clients sync.Map // core.Node → the func that closes its driver client
	conformance.Run(t, conformance.Harness{
		CloseClient: func(_ testing.TB, n core.Node) {
			close, _ := clients.Load(n)
			close.(func())()
		},
		NewNode: func(t testing.TB, addr string) core.Node {
			rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = rdb.Close() })
			node := goredis.New(rdb)
			t.Cleanup(func() { _ = node.Close() }) // runs first: the Node before its client
			clients.Store(node, func() { _ = rdb.Close() })
			return node
		},
		NewClusterNode: func(t testing.TB, addrs []string) core.Node {
			rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = rdb.Close() })
			node := goredis.New(rdb)
			t.Cleanup(func() { _ = node.Close() })
			clients.Store(node, func() { _ = rdb.Close() })
			return node
		},
	})
}
