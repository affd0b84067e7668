package rueidis_test

import (
	"testing"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/internal/backendtest"
	rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// newClusterClient returns a redlock Client over one Node: a rueidis client of c, which
// finds by itself that c is a cluster.
func newClusterClient(t *testing.T, c *redistest.Cluster, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	node := rlrueidis.New(rc)
	require.True(t, node.ShardedPubSub(), "rueidis.NewClient of a cluster's addresses is not a cluster client")
	client, err := redlock.New([]redlock.Node{node}, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() }) // runs first: the Client, then its rueidis client
	return client
}

// TestClusterLocks: locks of every kind of name, through a rueidis cluster client, on a real 3-master
// Redis Cluster (see backendtest.ClusterLocks).
func TestClusterLocks(t *testing.T) { backendtest.ClusterLocks(t, newClusterClient) }

// TestClusterSharesConnections: one connection per master of a real 3-master Redis Cluster
// carries the shard subscriptions, whatever the number of channels and waiters (see
// backendtest.ClusterSharesConnections): rueidis multiplexes them per node.
func TestClusterSharesConnections(t *testing.T) {
	t.Parallel() // beside the other tests: the package stays within a minute
	backendtest.ClusterSharesConnections(t, func(t *testing.T, c *redistest.Cluster) core.Node {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
		require.NoError(t, err)
		t.Cleanup(rc.Close)
		node := rlrueidis.New(rc)
		t.Cleanup(func() { _ = node.Close() }) // runs first: the Node, then its client
		return node
	})
}
