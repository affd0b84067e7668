package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/fence"
	"github.com/stretchr/testify/require"
)

// The holder, in a Client of its own, is "dead" to the operator's Client: it does not
// extend its lock (WithAutoExtend(false)) and its TTL is long.
func TestBreakHeldLease(t *testing.T) {
	nodes, _ := realNodes(t, 3)
	holder := newClient(t, nodes, redlock.WithTTL(time.Hour), redlock.WithAutoExtend(false), patient)
	defer func() { _ = holder.Close() }()
	l, err := holder.TryAcquire(ctxT(t, 30*time.Second), "job")
	require.NoError(t, err)
	before := statusOf(t, holder, "job").Holder
	require.NotNil(t, before)

	op := newClient(t, nodes, patient)
	b, err := op.Break(ctxT(t, 30*time.Second), "job")
	require.NoError(t, err)
	require.Equal(t, []string{before.Owner}, b.Owners)
	require.Greater(t, b.Fence, l.Token())

	st := statusOf(t, op, "job")
	require.Nil(t, st.Holder)
	raised := 0 // the raise returns at a quorum; a late one finds the key released, and writes nothing
	for _, n := range st.Nodes {
		require.Nil(t, n.Lock, "free on every node")
		if n.Fence >= b.Fence {
			raised++
		}
	}
	require.GreaterOrEqual(t, raised, st.Quorum, "the fence raised on a quorum")
	next, err := op.TryAcquire(ctxT(t, 30*time.Second), "job")
	require.NoError(t, err)
	require.Greater(t, next.Token(), l.Token())
	require.NoError(t, next.Release(ctxT(t, 30*time.Second)))
	require.ErrorIs(t, l.Extend(ctxT(t, 30*time.Second)), redlock.ErrNotHeld, "the broken holder finds out at its next extension")
}

func TestBreakFencedStorageRefusesTheBrokenHolder(t *testing.T) {
	nodes, _ := realNodes(t, 3)
	store, err := fence.NewRedis(goredisNode(t, realServers(t, 1)[0].Addr()), time.Hour)
	require.NoError(t, err)
	holder := newClient(t, nodes, redlock.WithTTL(time.Hour), redlock.WithAutoExtend(false), patient)
	defer func() { _ = holder.Close() }()
	ctx := ctxT(t, 30*time.Second)
	broken, err := holder.TryAcquire(ctx, "report")
	require.NoError(t, err)
	require.NoError(t, store.Write(ctx, "report", broken.Token(), "the broken holder's"))

	op := newClient(t, nodes, patient)
	_, err = op.Break(ctx, "report")
	require.NoError(t, err)
	next, err := op.TryAcquire(ctx, "report")
	require.NoError(t, err)
	defer func() { _ = next.Release(context.Background()) }()
	require.NoError(t, store.Write(ctx, "report", next.Token(), "the next holder's"))
	require.ErrorIs(t, store.Write(ctx, "report", broken.Token(), "a late write"), fence.ErrStale)
}

func TestBreakHandsTheLockToTheFirstWaiter(t *testing.T) {
	nodes, _ := realNodes(t, 3)
	holder := newClient(t, nodes, redlock.WithTTL(time.Hour), redlock.WithAutoExtend(false), patient)
	defer func() { _ = holder.Close() }()
	broken, err := holder.TryAcquire(ctxT(t, 30*time.Second), "queued")
	require.NoError(t, err)

	waiter := newClient(t, nodes, patient)
	got := make(chan *redlock.Lease, 1)
	go func() {
		l, err := waiter.Acquire(ctxT(t, time.Minute), "queued")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	op := newClient(t, nodes, patient)
	waitStatus(t, op, "queued", func(st *redlock.Status) bool { return len(st.Nodes[0].Queue) == 1 })
	_, err = op.Break(ctxT(t, 30*time.Second), "queued")
	require.NoError(t, err)
	l := <-got
	require.NotNil(t, l)
	require.Greater(t, l.Token(), broken.Token())
	require.NoError(t, l.Release(ctxT(t, 30*time.Second)))
}

func TestBreakReadersAndPermits(t *testing.T) {
	nodes, _ := realNodes(t, 3)
	holder := newClient(t, nodes, redlock.WithTTL(time.Hour), redlock.WithAutoExtend(false), patient)
	defer func() { _ = holder.Close() }()
	ctx := ctxT(t, 30*time.Second)
	for range 2 {
		require.NoError(t, holder.NewRWMutex("shared").RLockContext(ctx))
	}
	sem := holder.NewSemaphore("pool", 3)
	for range 2 {
		_, err := sem.TryAcquire(ctx)
		require.NoError(t, err)
	}
	op := newClient(t, nodes, patient)

	b, err := op.Break(ctx, "shared")
	require.NoError(t, err)
	require.Len(t, b.Readers, 2)
	require.Zero(t, b.Fence)
	st := statusOf(t, op, "shared")
	require.Zero(t, st.Readers)
	for _, n := range st.Nodes {
		require.Nil(t, n.Lock)
		require.Empty(t, n.Readers)
	}
	require.True(t, op.NewRWMutex("shared").TryLock(), "a writer takes it after the break")

	b, err = op.Break(ctx, "pool")
	require.NoError(t, err)
	require.Len(t, b.Permits, 2)
	// The last permit's release, with no one waiting, takes the record of K with it.
	st = statusOf(t, op, "pool")
	require.Nil(t, st.Semaphore, "the record of K outlived the semaphore's last permit")
	for _, n := range st.Nodes {
		require.Nil(t, n.Semaphore, "node %s still records the semaphore", n.Node)
	}
	_, err = op.NewSemaphore("pool", 1).TryAcquire(ctx)
	require.NoError(t, err, "a permit of another K after the break")
}

func TestBreakFreeAndBadInput(t *testing.T) {
	nodes, _ := miniNodes(t, 3)
	c := newClient(t, nodes, patient)
	b, err := c.Break(ctxT(t, 30*time.Second), "free")
	require.NoError(t, err)
	require.Equal(t, &redlock.Broken{}, b)
	_, err = c.Break(context.Background(), "x", redlock.WithRetry(time.Millisecond, time.Second))
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorContains(t, err, "Break")
	require.NoError(t, c.Close())
	_, err = c.Break(context.Background(), "x")
	require.ErrorIs(t, err, redlock.ErrClosed)
}

// TestBreakOnRedisCluster: the raise and the releases run in the name's slot.
func TestBreakOnRedisCluster(t *testing.T) {
	nodes := clusterNodes(t)
	holder := newClient(t, nodes, redlock.WithTTL(time.Hour), redlock.WithAutoExtend(false), patient)
	defer func() { _ = holder.Close() }()
	ctx := ctxT(t, time.Minute)
	broken, err := holder.TryAcquire(ctx, "job")
	require.NoError(t, err)
	_, err = holder.NewSemaphore("pool", 2).TryAcquire(ctx)
	require.NoError(t, err)

	op := newClient(t, nodes, patient)
	b, err := op.Break(ctx, "job")
	require.NoError(t, err)
	require.Greater(t, b.Fence, broken.Token())
	require.Nil(t, statusOf(t, op, "job").Holder)
	b, err = op.Break(ctx, "pool")
	require.NoError(t, err)
	require.Len(t, b.Permits, 1)
	require.Nil(t, statusOf(t, op, "pool").Semaphore, "the record of K outlived the semaphore's last permit")
}

func ExampleClient_Break() {
	nodes, stop := exampleNodes(3)
	defer stop()
	ctx := context.Background()

	// A holder that died with its lock, whose TTL is an hour.
	dead, _ := redlock.New(nodes, redlock.WithTTL(time.Hour), redlock.WithRestartGuard(2*time.Hour), redlock.WithAutoExtend(false))
	defer dead.Close()
	lease, err := dead.TryAcquire(ctx, "report")
	if err != nil {
		fmt.Println(err)
		return
	}

	client, _ := redlock.New(nodes)
	defer client.Close()
	b, err := client.Break(ctx, "report")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("broken:", len(b.Owners), "writer; fence above its token:", b.Fence > lease.Token())

	next, err := client.TryAcquire(ctx, "report")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer next.Release(ctx)
	fmt.Println("the next token is above the broken one:", next.Token() > lease.Token())
	// Output:
	// broken: 1 writer; fence above its token: true
	// the next token is above the broken one: true
}
