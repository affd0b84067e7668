package backendtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// NewClusterClient returns a redlock Client over one Node of the backend under test: a
// cluster client of c.
type NewClusterClient func(t *testing.T, c *redistest.Cluster, opts ...redlock.Option) *redlock.Client

// clusterNames are lock names whose keys must share one slot on a real Redis Cluster: those
// whose hash tag in "<prefix>{<name>}" would come out empty or cut short, and plain ones.
var clusterNames = []string{"}x", "{", "}{", "a{b}c", "{}", "}", "ünïcødé 锁", "jobs:nightly"}

// opBound is how long each lock operation on the cluster may take: a healthy cluster on
// loopback answers in milliseconds.
const opBound = 3 * time.Second

// ClusterLocks: through the backend's cluster client on a real 3-master Redis Cluster, every
// name takes and lets go of a lock promptly through the root API: Acquire and Release,
// TryAcquire (refused while held), a Mutex locked and unlocked twice, and a waiter in
// another Client that takes the lock by hand-over, woken over sharded pub/sub.
func ClusterLocks(t *testing.T, newClient NewClusterClient) {
	c := redistest.StartCluster(t, 3)
	// The masters have just started: under the restart guard they would abstain for its
	// first 30 s. Nothing here restarts them. The node timeout is one that a loaded machine
	// running eight names at once does not miss (the default, 100 ms, was missed).
	unguarded := func(t *testing.T, c *redistest.Cluster, opts ...redlock.Option) *redlock.Client {
		return newClient(t, c, append([]redlock.Option{redlock.WithRestartGuard(0), redlock.WithNodeTimeout(2 * time.Second)}, opts...)...)
	}
	for _, name := range clusterNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clusterLocksFor(t, c, name, unguarded)
		})
	}
}

// clusterLocksFor is ClusterLocks for one name.
func clusterLocksFor(t *testing.T, c *redistest.Cluster, name string, newClient NewClusterClient) {
	k := core.NewKeys("redlock:", name)
	exists := func(key string) bool {
		v, err := c.Do("EXISTS", key)
		require.NoError(t, err, "EXISTS %q", key)
		return v == int64(1)
	}
	ctx := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), opBound)
		t.Cleanup(cancel)
		return ctx
	}
	client := newClient(t, c, redlock.WithTTL(30*time.Second))

	lease, err := client.Acquire(ctx(), name)
	require.NoError(t, err, "Acquire(%q) on a free lock", name)
	assert.True(t, exists(k.Lock), "after Acquire(%q) the cluster must hold %q", name, k.Lock)
	require.NoError(t, lease.Release(ctx()), "Release of %q", name)
	assert.False(t, exists(k.Lock), "after Release of %q its key %q must be gone", name, k.Lock)

	lease, err = client.TryAcquire(ctx(), name)
	require.NoError(t, err, "TryAcquire(%q) on a free lock", name)
	_, err = newClient(t, c).TryAcquire(ctx(), name)
	assert.ErrorIs(t, err, redlock.ErrHeld, "TryAcquire(%q) by another Client while it is held", name)
	require.NoError(t, lease.Release(ctx()), "Release of %q", name)

	m := client.NewMutex(name)
	for round := 1; round <= 2; round++ {
		locked := make(chan struct{})
		go func() { defer close(locked); m.Lock() }()
		select {
		case <-locked:
		case <-time.After(opBound):
			t.Fatalf("round %d: Mutex(%q).Lock had not returned after %v on a free lock", round, name, opBound)
		}
		assert.True(t, exists(k.Lock), "round %d: the Mutex holds %q", round, name)
		m.Unlock()
		assert.False(t, exists(k.Lock), "round %d: after Unlock of %q its key %q must be gone", round, name, k.Lock)
	}

	// A waiter that is not woken sleeps its whole retry backoff (5 s at least, over the
	// holder's 30 s TTL): taking the lock within opBound shows the release's hand-over and its
	// SPUBLISH reached it.
	holder := client.NewMutex(name)
	holder.Lock()
	waiter := newClient(t, c, redlock.WithTTL(30*time.Second), redlock.WithRetry(10*time.Second, 10*time.Second)).NewMutex(name)
	waited := make(chan error, 1)
	go func() { waited <- waiter.LockContext(context.Background()) }()
	require.Eventually(t, func() bool {
		v, err := c.Do("ZCARD", k.Queue)
		return err == nil && v == int64(1) && shardSubscribed(t, c, k.Channel+":")
	}, opBound, 5*time.Millisecond, "the waiter for %q never queued and subscribed (SSUBSCRIBE) to its wake channel", name)
	start := time.Now()
	holder.Unlock()
	select {
	case err := <-waited:
		require.NoError(t, err, "the waiter's LockContext(%q)", name)
		t.Logf("the waiter held %q %v after Unlock", name, time.Since(start).Round(time.Millisecond))
	case <-time.After(opBound):
		t.Fatalf("the waiter for %q had not taken the lock %v after the holder's Unlock: the hand-over's SPUBLISH did not wake it", name, opBound)
	}
	waiter.Unlock()
	assert.False(t, exists(k.Lock), "after the waiter's Unlock of %q its key must be gone", name)
}

// shardSubscribed reports whether some master of c has a shard channel (SSUBSCRIBE) that
// starts with prefix, in the slot of prefix's keys.
func shardSubscribed(t *testing.T, c *redistest.Cluster, prefix string) bool {
	for _, addr := range c.Addrs() {
		v, err := redistest.DoTimeout(addr, time.Second, "PUBSUB", "SHARDCHANNELS")
		if err != nil {
			t.Logf("PUBSUB SHARDCHANNELS on %s: %v", addr, err)
			return false
		}
		chans, _ := v.([]any)
		for _, ch := range chans {
			if s, _ := ch.(string); strings.HasPrefix(s, prefix) && redistest.KeySlot(s) == redistest.KeySlot(prefix) {
				return true
			}
		}
	}
	return false
}

// NewClusterNode builds the backend's Node over a cluster client of c, registering with
// t.Cleanup whatever it must close (the Node first, then its client).
type NewClusterNode func(t *testing.T, c *redistest.Cluster) core.Node

// ClusterSharesConnections: on a real 3-master Redis Cluster, waiters on many channels of
// distinct slots, two per channel, are served by one pub/sub connection per master (counted
// with CLIENT LIST on each master: connections with shard subscriptions), not one per channel
// or per waiter; every callback receives its own channel's messages only; once every waiter
// left, no master keeps a shard subscription.
func ClusterSharesConnections(t *testing.T, newNode NewClusterNode) {
	c := redistest.StartCluster(t, 3)
	node := newNode(t, c)
	s, ok := node.(core.Subscriber)
	require.True(t, ok, "%T is not a core.Subscriber", node)

	const channels, perChannel = 24, 2
	counters := make([][perChannel]counter, channels)
	var unsubscribes []func()
	for i := range channels {
		for j := range perChannel {
			ctx, cancel := context.WithTimeout(context.Background(), opBound)
			un, err := s.Subscribe(ctx, fmt.Sprintf("wake:{w%d}", i), counters[i][j].fn)
			cancel()
			require.NoError(t, err, "Subscribe wake:{w%d}", i)
			unsubscribes = append(unsubscribes, un)
		}
	}

	// shardConns returns, per master, its connections with shard subscriptions and how many
	// shard channels it has.
	shardConns := func() (conns, chans []int) {
		for _, srv := range c.Servers() {
			reply, err := srv.Do("CLIENT", "LIST")
			require.NoError(t, err)
			n := 0
			for _, line := range strings.Split(reply.(string), "\n") {
				if strings.Contains(line, " ssub=") && !strings.Contains(line, " ssub=0 ") {
					n++
				}
			}
			conns = append(conns, n)
			v, err := srv.Do("PUBSUB", "SHARDCHANNELS")
			require.NoError(t, err)
			list, _ := v.([]any)
			chans = append(chans, len(list))
		}
		return conns, chans
	}
	conns, chans := shardConns()
	t.Logf("%d channels, %d waiters each: shard channels per master %v, pub/sub connections per master %v", channels, perChannel, chans, conns)
	total := 0
	for i := range conns {
		total += chans[i]
		want := 0
		if chans[i] > 0 {
			want = 1
		}
		assert.Equal(t, want, conns[i], "pub/sub connections on master %s, which has %d shard channels", c.Addrs()[i], chans[i])
	}
	assert.Equal(t, channels, total, "shard channels subscribed over the cluster")

	for i := range channels {
		n, err := c.Do("SPUBLISH", fmt.Sprintf("wake:{w%d}", i), "m")
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "one server-side subscription for the %d waiters of wake:{w%d}", perChannel, i)
	}
	for i := range channels {
		for j := range perChannel {
			waitCalls(t, &counters[i][j], 1, fmt.Sprintf("waiter %d of wake:{w%d}", j, i))
		}
	}

	for _, un := range unsubscribes {
		un()
	}
	eventually(t, "every shard subscription left", func() bool {
		conns, chans := shardConns()
		for i := range conns {
			if conns[i] != 0 || chans[i] != 0 {
				return false
			}
		}
		return true
	})
}
