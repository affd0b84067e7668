package goredis_test

import (
	"testing"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/backends/internal/backendtest"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// newClusterClient returns a redlock Client over one Node: a go-redis ClusterClient of c.
func newClusterClient(t *testing.T, c *redistest.Cluster, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	client, err := redlock.New([]redlock.Node{goredis.New(rdb)}, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() }) // runs first: the Client, then its go-redis client
	return client
}

// TestClusterLocks: locks of every kind of name, through a go-redis ClusterClient, on a
// real 3-master Redis Cluster (see backendtest.ClusterLocks).
func TestClusterLocks(t *testing.T) { backendtest.ClusterLocks(t, newClusterClient) }

// TestClusterSharesConnections: one SSUBSCRIBE connection per master of a real 3-master
// Redis Cluster, whatever the number of channels and waiters (see
// backendtest.ClusterSharesConnections).
func TestClusterSharesConnections(t *testing.T) {
	t.Parallel() // beside the other tests: the package stays within a minute
	backendtest.ClusterSharesConnections(t, func(t *testing.T, c *redistest.Cluster) core.Node {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		node := goredis.New(rdb)
		t.Cleanup(func() { _ = node.Close() }) // runs first: the Node, then its client
		return node
	})
}
