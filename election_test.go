package redlock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestElectionOneLeaderAtATime: 3 clients x 8 goroutines campaign, lead a moment and
// resign, 4 times each; never two leaders at once, and Leader names the one that leads.
func TestElectionOneLeaderAtATime(t *testing.T) {
	const clients, goroutines, rounds = 3, 8, 4
	for _, s := range rwSetups {
		t.Run(s.name, func(t *testing.T) {
			nodes := s.nodes(t)
			var leaders, overlap atomic.Int32
			var wg sync.WaitGroup
			ctx := ctxT(t, 3*time.Minute)
			for c := range clients {
				e := newClient(t, nodes(), rwOptions...).NewElection("leader")
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						me := "candidate-" + strconv.Itoa(c) + "-" + strconv.Itoa(g)
						for range rounds {
							l, err := e.Campaign(ctx, me)
							if !assert.NoError(t, err) {
								return
							}
							if leaders.Add(1) != 1 {
								overlap.Add(1)
							}
							v, err := e.Leader(ctx)
							assert.NoError(t, err)
							assert.Equal(t, me, v, "Leader named another than the leader")
							leaders.Add(-1)
							assert.NoError(t, l.Release(ctx))
						}
					}()
				}
			}
			wg.Wait()
			require.Zero(t, overlap.Load(), "two leaders at once")
		})
	}
}

// TestElectionLeader: Leader says ErrNoLeader before anyone campaigns and after the leader
// resigns, and the leader's value while it leads; leaders' tokens increase.
func TestElectionLeader(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 3)
			e := newClient(t, nodes).NewElection("who")
			ctx := ctxT(t, time.Minute)
			_, err := e.Leader(ctx)
			require.ErrorIs(t, err, redlock.ErrNoLeader)
			a, err := e.Campaign(ctx, "10.0.0.1:8080")
			require.NoError(t, err)
			v, err := e.Leader(ctx)
			require.NoError(t, err)
			assert.Equal(t, "10.0.0.1:8080", v)
			require.NoError(t, a.Release(ctx))
			_, err = e.Leader(ctx)
			require.ErrorIs(t, err, redlock.ErrNoLeader, "a resigned leader still leads")

			b, err := e.Campaign(ctx, "")
			require.NoError(t, err)
			v, err = e.Leader(ctx)
			require.NoError(t, err, "a leader with an empty value")
			assert.Equal(t, "", v)
			assert.Greater(t, b.Token(), a.Token(), "the next leader's token")
			require.NoError(t, b.Release(ctx))
		})
	}
}

// TestElectionObserve: Observe sees each leader in turn, in order, "" between them when
// there is none, and "" once the last leader resigned; its channel closes when its
// context ends.
func TestElectionObserve(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 3)
			c := newClient(t, nodes)
			e := c.NewElection("observed")
			ctx := ctxT(t, time.Minute)
			octx, stop := context.WithCancel(ctx)
			seen := e.Observe(octx)
			require.Equal(t, "", <-seen, "the first value is the current leader: none")
			var got []string
			for _, who := range []string{"a", "b", "c"} {
				l, err := e.Campaign(ctx, who)
				require.NoError(t, err)
				for v := range seen { // "" may come between two leaders
					if v != "" {
						got = append(got, v)
						break
					}
				}
				require.NoError(t, l.Release(ctx))
			}
			assert.Equal(t, []string{"a", "b", "c"}, got)
			// The last leader resigned and no one campaigns: the next check says so.
			select {
			case v := <-seen:
				assert.Equal(t, "", v, "a leader that resigned is still named")
			case <-time.After(5 * time.Second):
				t.Fatal("Observe did not say that the election is left without a leader")
			}
			stop()
			for range seen { // drains, and ends when the channel is closed
			}
		})
	}
}

// TestElectionKilledLeaderIsReplaced: when the leader's process stops (its client can no
// longer reach the nodes), a waiting candidate leads within the leader's TTL, and Leader
// names it.
func TestElectionKilledLeaderIsReplaced(t *testing.T) {
	servers := realServers(t, 3)
	const ttl = 1500 * time.Millisecond
	opts := append(append([]redlock.Option{}, rwOptions...), redlock.WithTTL(ttl), redlock.WithNodeTimeout(500*time.Millisecond))
	var clients []*redis.Client
	nodes := make([]redlock.Node, len(servers))
	for i, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		clients = append(clients, c)
		nodes[i] = goredis.New(c)
	}
	ctx := ctxT(t, time.Minute)
	_, err := newClient(t, nodes, opts...).NewElection("failover").Campaign(ctx, "old")
	require.NoError(t, err)
	next := newClient(t, nodesFor(t, servers), opts...).NewElection("failover")
	v, err := next.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "old", v)

	won := make(chan *redlock.Lease, 1)
	go func() {
		l, err := next.Campaign(ctx, "new")
		assert.NoError(t, err)
		won <- l
	}()
	for _, c := range clients { // the old leader's process stops
		require.NoError(t, c.Close())
	}
	start := time.Now()
	select {
	case l := <-won:
		assert.Less(t, time.Since(start), ttl+2*time.Second)
		v, err := next.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, "new", v)
		require.NoError(t, l.Release(ctx))
	case <-time.After(ttl + 5*time.Second):
		t.Fatal("no new leader within the old one's TTL")
	}
}

// TestElectionBadInput: a bad name or option, or a value over core.MaxValueLen, is
// ErrInvalid; Observe's channel is then closed at once.
func TestElectionBadInput(t *testing.T) {
	nodes, _ := miniNodes(t, 1)
	c := newClient(t, nodes)
	ctx := ctxT(t, time.Minute)
	for _, e := range []*redlock.Election{c.NewElection(""), c.NewElection("e", redlock.WithTTL(-1))} {
		_, err := e.Campaign(ctx, "v")
		require.ErrorIs(t, err, redlock.ErrInvalid)
		assert.ErrorContains(t, err, "NewElection")
		_, err = e.Leader(ctx)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, open := <-e.Observe(ctx)
		assert.False(t, open)
	}
	_, err := c.NewElection("e").Campaign(ctx, strings.Repeat("x", core.MaxValueLen+1))
	require.ErrorIs(t, err, redlock.ErrInvalid)
}
