package redlock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/simnet"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestElectionOneLeaderAtATime: 3 clients x 8 goroutines campaign, lead a moment and
// resign, 4 times each; never two leaders at once, and Leader names the one that leads.
func TestElectionOneLeaderAtATime(t *testing.T) {
	t.Parallel() // see bubble_test.go
	const clients, goroutines, rounds = 3, 8, 4
	for _, s := range rwSetups {
		s.run(t, func(t *testing.T, nodes func() []redlock.Node) {
			var leaders, overlap atomic.Int32
			var wg sync.WaitGroup
			ctx := ctxT(t, 3*time.Minute)
			for c := range clients {
				e := closingClient(t, nodes(), rwOptions...).NewElection("leader")
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
	for _, k := range timedKinds {
		k.run(t, k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 3)
			// Nothing here waits for a node timeout: a long one keeps a loaded machine's slow
			// reply from failing a call.
			e := closingClient(t, nodes, redlock.WithNodeTimeout(2*time.Second)).NewElection("who")
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
	for _, k := range timedKinds {
		k.run(t, k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 3)
			c := closingClient(t, nodes)
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
			resigned := time.Now()
			assert.Equal(t, "", within(t, k.sim, seen, "Observe's word that the election is left without a leader"),
				"a leader that resigned is still named")
			if k.sim { // by the release's notification, or at the next check, a refresh interval (250 ms) on
				assert.LessOrEqual(t, time.Since(resigned), 250*time.Millisecond, "Observe did not say so by its next check")
			}
			stop()
			for range seen { // drains, and ends when the channel is closed
			}
		})
	}
}

// TestElectionKilledLeaderIsReplaced: when the leader's process stops (its client can no
// longer reach the nodes), a waiting candidate leads as the leader's TTL runs out, and
// Leader names it.
func TestElectionKilledLeaderIsReplaced(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	opts := append(append([]redlock.Option{}, rwOptions...), redlock.WithTTL(ttl), redlock.WithNodeTimeout(500*time.Millisecond))
	run := func(t *testing.T, sim bool, clients []*redis.Client, nextNodes []redlock.Node) {
		nodes := make([]redlock.Node, len(clients))
		for i, c := range clients {
			nodes[i] = goredis.New(c)
		}
		ctx := ctxT(t, time.Minute)
		start := time.Now()
		_, err := newClient(t, nodes, opts...).NewElection("failover").Campaign(ctx, "old")
		require.NoError(t, err)
		next := closingClient(t, nextNodes, opts...).NewElection("failover")
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
		l := within(t, sim, won, "a new leader")
		if sim {
			assert.Equal(t, ttl, time.Since(start), "the new leader did not lead as the old one's TTL ran out")
		}
		v, err = next.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, "new", v)
		require.NoError(t, l.Release(ctx))
	}
	t.Run("sim", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			servers := simnet.NewServers(t, 3)
			clients := make([]*redis.Client, len(servers))
			for i, s := range servers {
				clients[i] = redis.NewClient(simnet.Options(s))
			}
			run(t, true, clients, simnet.Nodes(t, servers))
		})
	})
	t.Run("redis-server", func(t *testing.T) {
		servers := realServers(t, 3)
		clients := make([]*redis.Client, len(servers))
		for i, s := range servers {
			clients[i] = redis.NewClient(&redis.Options{Addr: s.Addr()})
		}
		run(t, false, clients, nodesFor(t, servers))
	})
}

// TestElectionBadInput: a bad name or option, or a value over core.MaxValueLen, is
// ErrInvalid; Observe's channel is then closed at once.
func TestElectionBadInput(t *testing.T) {
	nodes, _ := miniNodes(t, 1)
	c := newClient(t, nodes, redlock.WithNodeTimeout(2*time.Second)) // no call is made: none may time out
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

// expiringNode is a goredis Node over a miniredis server that, before the first proclaim
// sent to it, deletes the election's lock key there: as if the lock had run out before its
// record was written (a pause, a loaded machine).
type expiringNode struct {
	*goredis.Node
	server *miniredis.Miniredis
	key    string
	once   sync.Once
}

func (n *expiringNode) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if s.Name() == "proclaim" {
		n.once.Do(func() { n.server.Del(n.key) })
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestCampaignAgainWhenTheLockRanOutFirst: a campaign whose lock runs out before its
// record stands never led; Campaign campaigns again rather than fail, and returns a leader
// whose record stands.
func TestCampaignAgainWhenTheLockRanOutFirst(t *testing.T) {
	nodes, servers := miniNodes(t, 1)
	node := &expiringNode{Node: nodes[0].(*goredis.Node), server: servers[0], key: core.NewKeys("redlock:", "leader").Lock}
	c := newClient(t, []redlock.Node{node}, patient)
	ctx := ctxT(t, 30*time.Second)
	e := c.NewElection("leader")
	lead, err := e.Campaign(ctx, "me")
	require.NoError(t, err, "the campaign whose lock ran out should have been run again")
	v, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "me", v)
	require.NoError(t, lead.Release(ctx))
}
