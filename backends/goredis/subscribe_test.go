package goredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/backends/internal/backendtest"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newNode builds the Node over a *redis.Client, or a *redis.ClusterClient on a cluster, and
// closes both at the end of the test.
func newNode(t *testing.T, s *backendtest.Server) core.Node {
	var rdb redis.UniversalClient
	if s.Kind == backendtest.Cluster {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{s.Addr}})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: s.Addr})
	}
	node := goredis.New(rdb)
	t.Cleanup(func() {
		_ = node.Close()
		_ = rdb.Close()
	})
	return node
}

// TestSubscriber runs the Subscriber contract tests on miniredis, redis-server and a
// one-node Redis Cluster (SSUBSCRIBE), with a goroutine leak check.
func TestSubscriber(t *testing.T) {
	backendtest.Subscriber(t, newNode, backendtest.Miniredis, backendtest.Redis, backendtest.Cluster)
}

// TestSubscribeHonoursContext: against a server that never answers, Subscribe returns at
// its context's deadline even though go-redis's own timeouts are seconds long.
func TestSubscribeHonoursContext(t *testing.T) {
	backendtest.SubscribeHonoursContext(t, func(t *testing.T) core.Node {
		// Short driver timeouts only shorten the cleanup, which waits for them.
		rdb := redis.NewClient(&redis.Options{Addr: redistest.Hung(t), DialTimeout: time.Second, ReadTimeout: time.Second})
		node := goredis.New(rdb)
		t.Cleanup(func() { _ = node.Close(); _ = rdb.Close() })
		return node
	})
}

func TestShardedPubSub(t *testing.T) {
	single := redis.NewClient(&redis.Options{Addr: "10.1.2.3:6380"})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"10.0.0.1:7000"}})
	t.Cleanup(func() { _ = single.Close(); _ = cluster.Close() })
	assert.False(t, goredis.New(single).ShardedPubSub())
	assert.True(t, goredis.New(cluster).ShardedPubSub())
}

// TestSubscribeOnClosedClient: once its go-redis client was closed, the Node's Subscribe
// fails with an error that matches core.ErrClosed, as Eval does.
func TestSubscribeOnClosedClient(t *testing.T) {
	s := backendtest.Start(t, backendtest.Miniredis)
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	node := goredis.New(c)
	t.Cleanup(func() { _ = node.Close() })
	require.NoError(t, c.Close())
	_, err := node.Eval(context.Background(), backendtest.Script(t, "extend"), []string{"lock"}, "token", "1000", "w")
	assert.ErrorIs(t, err, core.ErrClosed, "Eval on a closed client")
	_, err = node.Subscribe(context.Background(), "ch", func(string) {})
	assert.ErrorIs(t, err, core.ErrClosed, "Subscribe on a closed client")
}
