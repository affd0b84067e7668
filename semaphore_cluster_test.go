package redlock_test

import (
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestSemaphoreHandsOverOnRedisCluster: on a real 3-master Redis Cluster (one Node, a
// go-redis cluster client, which subscribes with SSUBSCRIBE), the release of a Semaphore's
// permit wakes the waiter for it: its hand-over is published with SPUBLISH, which a shard
// subscriber hears (a PUBLISH it does not). The waiter's refresh and retry backoff are 20 s,
// over the test's generous wait: only the hand-over can give it the permit in time.
func TestSemaphoreHandsOverOnRedisCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	newNode := func() []redlock.Node {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		n := goredis.New(rdb)
		t.Cleanup(func() { _ = n.Close() })
		return []redlock.Node{n}
	}
	ctx := ctxT(t, time.Minute)
	// A waiter refreshes its place every 5/2 node timeouts: 20 s.
	opts := []redlock.Option{redlock.WithNodeTimeout(8 * time.Second), redlock.WithTTL(time.Minute)}
	holder := closingClient(t, newNode(), opts...).NewSemaphore("pool", 1)
	waiter := closingClient(t, newNode(), opts...).NewSemaphore("pool", 1, redlock.WithRetry(20*time.Second, 20*time.Second))
	k := core.NewSemaphoreKeys("redlock:", "pool", 1)

	held, err := holder.TryAcquire(ctx)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(ctx)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	require.Eventually(t, func() bool {
		v, err := c.Do("ZCARD", k.Queue)
		return err == nil && v == int64(1) && shardChannel(t, c, k.Channel+":")
	}, generous, 5*time.Millisecond, "the waiter never queued and subscribed (SSUBSCRIBE) to its wake channel")
	require.NoError(t, held.Release(ctx))
	require.NoError(t, within(t, false, got, "the waiter's Acquire after the holder's Release (woken only by an SPUBLISH)"))
}

// shardChannel reports whether some master of c has a shard channel (SSUBSCRIBE) that
// starts with prefix.
func shardChannel(t *testing.T, c *redistest.Cluster, prefix string) bool {
	for _, addr := range c.Addrs() {
		v, err := redistest.DoTimeout(addr, time.Second, "PUBSUB", "SHARDCHANNELS", prefix+"*")
		if err != nil {
			t.Logf("PUBSUB SHARDCHANNELS on %s: %v", addr, err)
			return false
		}
		if chans, _ := v.([]any); len(chans) > 0 {
			return true
		}
	}
	return false
}
