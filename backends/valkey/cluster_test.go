package valkey_test

import (
	"testing"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/internal/backendtest"
	rlvalkey "github.com/go-redlock/redlock/backends/valkey"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"
)

// newClusterNode returns the Node over a valkey-go client of c's masters, which finds by
// itself that c is a cluster; the Node and then the client close at the end of the test.
func newClusterNode(t *testing.T, c *redistest.Cluster) *rlvalkey.Node {
	t.Helper()
	vc, err := valkey.NewClient(valkey.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(vc.Close)
	node := rlvalkey.New(vc)
	require.True(t, node.ShardedPubSub(), "valkey.NewClient of a cluster's addresses is not a cluster client")
	t.Cleanup(func() { _ = node.Close() }) // runs first: the Node, then its client
	return node
}

// TestClusterLocks: locks of every kind of name, through a valkey-go cluster client, on a
// real 3-master Redis Cluster (see backendtest.ClusterLocks), a waiter woken over SSUBSCRIBE.
func TestClusterLocks(t *testing.T) {
	backendtest.ClusterLocks(t, func(t *testing.T, c *redistest.Cluster, opts ...redlock.Option) *redlock.Client {
		client, err := redlock.New([]redlock.Node{newClusterNode(t, c)}, opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = client.Close() }) // runs before the Node's and client's cleanups
		return client
	})
}

// TestClusterSharesConnections: one connection per master of a real 3-master Redis Cluster
// carries the shard subscriptions, whatever the number of channels and waiters (see
// backendtest.ClusterSharesConnections): valkey-go multiplexes them per node.
func TestClusterSharesConnections(t *testing.T) {
	t.Parallel() // beside the other tests: the package stays within a minute
	backendtest.ClusterSharesConnections(t, func(t *testing.T, c *redistest.Cluster) core.Node {
		return newClusterNode(t, c)
	})
}
