package redlock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryNameWorksForEveryPrimitive: the longest valid name, and names that end like
// the parts a Semaphore keeps for itself, work for the Semaphore, the Election, the
// RWMutex and the Mutex.
func TestEveryNameWorksForEveryPrimitive(t *testing.T) {
	nodes, _ := miniNodes(t, 3)
	c := newClient(t, nodes, redlock.WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, time.Minute)
	for _, name := range []string{strings.Repeat("n", redlock.MaxNameLen), "}" + strings.Repeat("n", redlock.MaxNameLen-1), "a}:permit/0", "x"} {
		sem := c.NewSemaphore(name, 2)
		a, err := sem.TryAcquire(ctx)
		require.NoError(t, err)
		b, err := sem.Acquire(ctx)
		require.NoError(t, err)
		assert.Equal(t, name, a.Name())
		require.NoError(t, a.Release(ctx))
		require.NoError(t, b.Release(ctx))

		e := c.NewElection(name)
		l, err := e.Campaign(ctx, "v")
		require.NoError(t, err)
		v, err := e.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, "v", v)
		require.NoError(t, l.Release(ctx))

		rw := c.NewRWMutex(name)
		require.NoError(t, rw.RLockContext(ctx))
		rw.RUnlock()
		require.NoError(t, rw.LockContext(ctx))
		rw.Unlock()
	}
}

// TestSemaphoreKeepsItsOwnKeys: no lock a user can name is one of a Semaphore's permits
// or its waiters' lock: Mutexes called "<name>/permit/<i>", "<name>/queue" and "<name>"
// neither fill the Semaphore nor are taken by its holders.
func TestSemaphoreKeepsItsOwnKeys(t *testing.T) {
	nodes, _ := miniNodes(t, 3)
	c := newClient(t, nodes, redlock.WithNodeTimeout(2*time.Second))
	other := newClient(t, nodes, redlock.WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, time.Minute)
	names := []string{"jobs/permit/0", "jobs/permit/1", "jobs/queue", "jobs"}
	for _, name := range names {
		require.True(t, c.NewMutex(name).TryLock(), name)
	}
	sem := other.NewSemaphore("jobs", 2)
	a, err := sem.TryAcquire(ctx)
	require.NoError(t, err, "a Mutex took a permit")
	b, err := sem.Acquire(ctx)
	require.NoError(t, err, "a Mutex took a permit")
	for _, name := range names {
		require.True(t, other.NewMutex(name+"/x").TryLock())
		l, err := other.TryAcquire(ctx, "x/"+name)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	require.NoError(t, a.Release(ctx))
	require.NoError(t, b.Release(ctx))

	// And the other way: the permits held, the Mutexes of those names are free.
	full := newClient(t, nodes, redlock.WithNodeTimeout(2*time.Second)).NewSemaphore("pool", 2)
	for range 2 {
		_, err := full.Acquire(ctx)
		require.NoError(t, err)
	}
	for _, name := range []string{"pool/permit/0", "pool/permit/1", "pool"} {
		require.True(t, other.NewMutex(name).TryLock(), "a Semaphore's permit held the Mutex %q", name)
	}
}

// downNode fails every call while down, as an unreachable server does, and counts those
// calls.
type downNode struct {
	redlock.Node
	down   *atomic.Bool
	failed *atomic.Int32
}

func (n downNode) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if n.down.Load() {
		n.failed.Add(1)
		return nil, errors.New("dial tcp: connect: connection refused")
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestSemaphoreAcquireWaitsThroughNodeFailures: with too few nodes up for a quorum,
// Semaphore.Acquire waits, retrying, until they come back, and then takes a permit; and
// when ctx ends first its error matches ctx's and the attempts' (ErrNoQuorum). An error
// that no retry can fix (a closed driver client, on every node) ends it at once.
func TestSemaphoreAcquireWaitsThroughNodeFailures(t *testing.T) {
	raw, _ := miniNodes(t, 3)
	var down atomic.Bool
	var failed atomic.Int32
	nodes := make([]redlock.Node, len(raw))
	for i, n := range raw {
		nodes[i] = n
		if i > 0 {
			nodes[i] = downNode{Node: n, down: &down, failed: &failed}
		}
	}
	c := newClient(t, nodes, redlock.WithNodeTimeout(2*time.Second), redlock.WithRetry(time.Millisecond, 20*time.Millisecond))
	sem := c.NewSemaphore("outage", 2)
	ctx := ctxT(t, time.Minute)
	down.Store(true)
	got := make(chan error, 1)
	go func() {
		l, err := sem.Acquire(ctx)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	require.Eventually(t, func() bool { return failed.Load() >= 20 }, 10*time.Second, time.Millisecond, "no attempts")
	select {
	case err := <-got:
		t.Fatalf("Acquire gave up while nodes were down: %v", err)
	default:
	}
	down.Store(false)
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire did not take a permit once the nodes came back")
	}

	down.Store(true)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err := sem.Acquire(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	assert.ErrorContains(t, err, `"outage"`)
	assert.NotContains(t, err.Error(), "redlock:{", "an error names a Redis key")
	down.Store(false)

	closedNodes := make([]redlock.Node, len(raw))
	for i, n := range raw {
		closedNodes[i] = closedNode{n}
	}
	start := time.Now()
	_, err = newClient(t, closedNodes, redlock.WithNodeTimeout(2*time.Second)).NewSemaphore("outage", 2).Acquire(ctx)
	require.ErrorIs(t, err, redlock.ErrClosed)
	assert.Less(t, time.Since(start), 5*time.Second)
}

// closedNode answers as a closed driver client does.
type closedNode struct{ redlock.Node }

func (closedNode) Eval(context.Context, *core.Script, []string, ...string) ([]int64, error) {
	return nil, core.ErrClosed
}

// TestPrimitiveOptions: each option given to NewSemaphore or NewElection takes effect, or
// is refused there, with an error that matches ErrInvalid and names the primitive and its
// name: never one that a permit's call refuses later.
func TestPrimitiveOptions(t *testing.T) {
	nodes, _ := miniNodes(t, 3)
	c := newClient(t, nodes, redlock.WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, time.Minute)
	logger := slog.New(slog.DiscardHandler)
	sem := c.NewSemaphore("opts", 2, redlock.WithRetry(time.Millisecond, 10*time.Millisecond), redlock.WithLogger(logger))
	a, err := sem.TryAcquire(ctx)
	require.NoError(t, err)
	b, err := sem.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, a.Release(ctx))
	require.NoError(t, b.Release(ctx))

	_, err = c.NewSemaphore("opts", 2, redlock.WithErrorHandler(func(error) {})).TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	assert.ErrorContains(t, err, `NewSemaphore "opts"`)
	assert.NotContains(t, err.Error(), "permit")
	for _, opt := range []redlock.Option{redlock.WithAutoExtend(false), redlock.WithErrorHandler(func(error) {})} {
		e := c.NewElection("opts", opt)
		_, err = e.Campaign(ctx, "v")
		require.ErrorIs(t, err, redlock.ErrInvalid)
		assert.ErrorContains(t, err, `NewElection "opts"`)
		_, err = e.Leader(ctx)
		require.ErrorIs(t, err, redlock.ErrInvalid)
	}
	e := c.NewElection("opts", redlock.WithRetry(time.Millisecond, 10*time.Millisecond), redlock.WithLogger(logger))
	l, err := e.Campaign(ctx, "v")
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
}
