package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// statusOf reads name's status through c, which must succeed.
func statusOf(t *testing.T, c *redlock.Client, name string, opts ...redlock.Option) *redlock.Status {
	t.Helper()
	st, err := c.Status(ctxT(t, 30*time.Second), name, append([]redlock.Option{patient}, opts...)...)
	require.NoError(t, err)
	require.True(t, st.Known())
	return st
}

func TestStatusFree(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 3)
			c := newClient(t, nodes)
			st := statusOf(t, c, "free")
			require.Equal(t, "free", st.Name)
			require.Equal(t, lockKey("free"), st.Key)
			require.Equal(t, 2, st.Quorum)
			require.Equal(t, 3, st.Answered)
			require.Empty(t, st.Found)
			require.Nil(t, st.Holder)
			require.Nil(t, st.Leader)
			require.Nil(t, st.Semaphore)
			require.Zero(t, st.Readers)
			require.Len(t, st.Nodes, 3)
			for i, n := range st.Nodes {
				require.NoError(t, n.Err)
				require.Equal(t, nodes[i].String(), n.Node)
				require.Nil(t, n.Lock)
				require.Empty(t, n.Queue)
			}
		})
	}
}

func TestStatusHeldLease(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 3)
			c := newClient(t, nodes, redlock.WithTTL(10*time.Second), patient)
			l, err := c.TryAcquire(ctxT(t, 30*time.Second), "held")
			require.NoError(t, err)
			defer func() { _ = l.Release(context.Background()) }()
			st := statusOf(t, c, "held")
			require.Equal(t, []string{"lock"}, st.Found)
			require.NotNil(t, st.Holder)
			require.Equal(t, l.Token(), st.Holder.Token)
			require.Equal(t, 3, st.Holder.Nodes)
			require.Greater(t, st.Holder.TTL, time.Duration(0))
			require.LessOrEqual(t, st.Holder.TTL, 10*time.Second)
			for _, n := range st.Nodes {
				require.NotNil(t, n.Lock)
				require.Equal(t, st.Holder.Owner, n.Lock.Owner)
				require.False(t, n.Lock.Readers)
				require.Equal(t, l.Token(), n.Fence)
			}
			require.NoError(t, l.Release(ctxT(t, 30*time.Second)))
			require.Nil(t, statusOf(t, c, "held").Holder)
		})
	}
}

func TestStatusHeldMutex(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 3)
			c := newClient(t, nodes, patient)
			m := c.NewMutex("mutex", redlock.WithFencing(true))
			require.NoError(t, m.LockContext(ctxT(t, 30*time.Second)))
			defer m.Unlock()
			st := statusOf(t, c, "mutex")
			require.NotNil(t, st.Holder)
			require.Equal(t, m.Token(), st.Holder.Token)
			require.Greater(t, st.Holder.TTL, time.Duration(0))
		})
	}
}

// waitStatus reads name's status until cond holds of it, generously.
func waitStatus(t *testing.T, c *redlock.Client, name string, cond func(*redlock.Status) bool) *redlock.Status {
	t.Helper()
	var st *redlock.Status
	require.Eventually(t, func() bool {
		s, err := c.Status(context.Background(), name, patient)
		if err != nil {
			return false
		}
		st = s
		return cond(s)
	}, 30*time.Second, 5*time.Millisecond)
	return st
}

func TestStatusWaitersInOrder(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 3)
			c := newClient(t, nodes, patient)
			l, err := c.TryAcquire(ctxT(t, 30*time.Second), "queued")
			require.NoError(t, err)
			defer func() { _ = l.Release(context.Background()) }()

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 2)
			wait := func(kind string) { // each in a Client of its own: one Client queues locally
				w := newClient(t, nodes, patient)
				if kind == "reader" {
					done <- w.NewRWMutex("queued").RLockContext(ctx)
					return
				}
				_, err := w.Acquire(ctx, "queued")
				done <- err
			}
			defer func() {
				cancel()
				for range 2 {
					<-done
				}
			}()
			go wait("writer")
			queue := func(n int) func(*redlock.Status) bool {
				return func(st *redlock.Status) bool {
					for _, node := range st.Nodes {
						if len(node.Queue) != n {
							return false
						}
					}
					return true
				}
			}
			first := waitStatus(t, c, "queued", queue(1)).Nodes[0].Queue[0]
			require.False(t, first.Reader)
			go wait("reader")
			st := waitStatus(t, c, "queued", queue(2))
			require.NotNil(t, st.Holder)
			for _, n := range st.Nodes {
				require.Equal(t, first.ID, n.Queue[0].ID, "the first waiter stays first")
				require.False(t, n.Queue[0].Reader)
				require.True(t, n.Queue[1].Reader)
				require.NotEqual(t, first.ID, n.Queue[1].ID)
				require.Greater(t, n.Queue[1].TTL, time.Duration(0))
			}
			require.Equal(t, []string{"lock", "rwmutex"}, st.Found)
		})
	}
}

func TestStatusReaders(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 3)
			c := newClient(t, nodes, patient)
			for range 2 { // two readers: each RWMutex one holding
				rw := c.NewRWMutex("shared")
				require.NoError(t, rw.RLockContext(ctxT(t, 30*time.Second)))
				defer rw.RUnlock()
			}
			st := statusOf(t, c, "shared")
			require.Nil(t, st.Holder)
			require.Equal(t, 2, st.Readers)
			require.Equal(t, []string{"lock", "rwmutex"}, st.Found)
			both := 0 // a share is granted by a quorum: a node may miss one, or hear it late
			for _, n := range st.Nodes {
				require.LessOrEqual(t, len(n.Readers), 2)
				if len(n.Readers) == 2 {
					both++
					require.True(t, n.Lock.Readers)
					require.Greater(t, n.Readers[0].TTL, time.Duration(0))
				}
			}
			require.GreaterOrEqual(t, both, st.Quorum)
		})
	}
}

func TestStatusSemaphore(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 3)
			c := newClient(t, nodes, patient)
			s := c.NewSemaphore("pool", 3)
			for range 2 {
				l, err := s.TryAcquire(ctxT(t, 30*time.Second))
				require.NoError(t, err)
				defer func() { _ = l.Release(context.Background()) }()
			}
			st := statusOf(t, c, "pool")
			require.Equal(t, []string{"semaphore"}, st.Found)
			require.NotNil(t, st.Semaphore)
			require.Equal(t, 3, st.Semaphore.Permits)
			require.Equal(t, 2, st.Semaphore.InUse)
			for _, n := range st.Nodes {
				require.NotNil(t, n.Semaphore)
				require.Equal(t, 3, n.Semaphore.Permits)
				require.Equal(t, 2, n.Semaphore.InUse)
				require.Len(t, n.Semaphore.Held, 2)
				require.NotZero(t, n.Semaphore.Fence)
				require.Nil(t, n.Lock)
			}
		})
	}
}

func TestStatusElection(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 3)
			c := newClient(t, nodes, patient)
			l, err := c.NewElection("vote").Campaign(ctxT(t, 30*time.Second), "node-a")
			require.NoError(t, err)
			defer func() { _ = l.Release(context.Background()) }()
			st := statusOf(t, c, "vote")
			require.Equal(t, []string{"lock", "election"}, st.Found)
			require.NotNil(t, st.Leader)
			require.Equal(t, "node-a", st.Leader.Value)
			require.Equal(t, 3, st.Leader.Nodes)
			require.NotNil(t, st.Holder)
			require.Equal(t, st.Holder.Owner, st.Leader.Token)
			for _, n := range st.Nodes {
				require.True(t, n.Leader.Current)
			}
		})
	}
}

func TestStatusNodeDown(t *testing.T) {
	t.Parallel() // see bubble_test.go
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 2)
			nodes = append(nodes, hungNode(t))
			c := newClient(t, nodes, patient)
			l, err := c.TryAcquire(ctxT(t, 30*time.Second), "down")
			require.NoError(t, err)
			defer func() { _ = l.Release(context.Background()) }()
			st, err := c.Status(ctxT(t, 30*time.Second), "down", redlock.WithNodeTimeout(time.Second))
			require.NoError(t, err)
			require.True(t, st.Known())
			require.Equal(t, 2, st.Answered)
			require.ErrorIs(t, st.Nodes[2].Err, redlock.ErrNodeTimeout)
			require.Nil(t, st.Nodes[2].Lock)
			require.NotNil(t, st.Holder)
			require.Equal(t, 2, st.Holder.Nodes)
			require.Equal(t, l.Token(), st.Holder.Token)
		})
	}
}

func TestStatusFewerThanQuorum(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 1)
			// The two silent nodes may hold what the one that answers lacks.
			nodes = append(nodes, hungNode(t), hungNode(t))
			c := newClient(t, nodes, patient)
			st, err := c.Status(ctxT(t, 30*time.Second), "few", redlock.WithNodeTimeout(time.Second))
			require.ErrorIs(t, err, redlock.ErrNoQuorum)
			var qe *redlock.QuorumError
			require.True(t, errors.As(err, &qe))
			require.Equal(t, "status", qe.Op)
			require.Len(t, qe.Errs, 2)
			require.NotNil(t, st)
			require.False(t, st.Known())
			require.Equal(t, 1, st.Answered)
			require.Nil(t, st.Holder)
		})
	}
}

func TestStatusBadInput(t *testing.T) {
	nodes, _ := miniNodes(t, 1)
	c := newClient(t, nodes)
	_, err := c.Status(context.Background(), "")
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = c.Status(context.Background(), "x", redlock.WithRetry(time.Millisecond, time.Second))
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorContains(t, err, `"x"`)
	require.NoError(t, c.Close())
	_, err = c.Status(context.Background(), "x")
	require.ErrorIs(t, err, redlock.ErrClosed)
}

func TestStatusOneServerTwice(t *testing.T) {
	servers := realServers(t, 2)
	nodes := append(nodesFor(t, servers), goredisNode(t, servers[0].Addr()))
	c := newClient(t, nodes)
	st, err := c.Status(ctxT(t, 30*time.Second), "twice", patient)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorContains(t, err, "reach the same server")
	require.Nil(t, st)
}

// clusterNodes starts a 3-master Redis Cluster and returns one Node over it, a go-redis
// cluster client.
func clusterNodes(t *testing.T) []redlock.Node {
	c := redistest.StartCluster(t, 3)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	n := goredis.New(rdb)
	t.Cleanup(func() { _ = n.Close() })
	return []redlock.Node{n}
}

// TestStatusOnRedisCluster: every key the status script reads is in its name's slot, a
// Semaphore's permits too.
func TestStatusOnRedisCluster(t *testing.T) {
	c := newClient(t, clusterNodes(t), patient)
	ctx := ctxT(t, time.Minute)
	l, err := c.TryAcquire(ctx, "job")
	require.NoError(t, err)
	defer func() { _ = l.Release(context.Background()) }()
	p, err := c.NewSemaphore("pool", 2).TryAcquire(ctx)
	require.NoError(t, err)
	defer func() { _ = p.Release(context.Background()) }()

	st := statusOf(t, c, "job")
	require.NotNil(t, st.Holder)
	require.Equal(t, l.Token(), st.Holder.Token)
	st = statusOf(t, c, "pool")
	require.NotNil(t, st.Semaphore)
	require.Equal(t, 2, st.Semaphore.Permits)
	require.Equal(t, 1, st.Semaphore.InUse)
}

func TestStatusContextEnded(t *testing.T) {
	nodes, _ := miniNodes(t, 3)
	c := newClient(t, nodes, patient)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st, err := c.Status(ctx, "ended")
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, redlock.ErrNoQuorum, "the caller's end, not the nodes' failure")
	require.ErrorContains(t, err, `"ended"`)
	require.NotNil(t, st)
	require.False(t, st.Known())
}

func ExampleClient_Status() {
	nodes, stop := exampleNodes(3)
	defer stop()
	client, _ := redlock.New(nodes)
	defer client.Close()
	ctx := context.Background()

	lease, err := client.TryAcquire(ctx, "report")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(ctx)

	st, err := client.Status(ctx, "report")
	if err != nil { // ErrNoQuorum: fewer than a quorum answered, and st.Known() is false
		fmt.Println(err)
		return
	}
	if h := st.Holder; h != nil {
		fmt.Println("held on", h.Nodes, "of", len(st.Nodes), "nodes; the lease's token:", h.Token == lease.Token())
	}
	// Output: held on 3 of 3 nodes; the lease's token: true
}
