package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/simnet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAcquireRefuseRelease: on N = 1, 3, 5 nodes of each kind, a held lock refuses a second
// owner with ErrHeld, and after Release the second owner gets it.
func TestAcquireRefuseRelease(t *testing.T) {
	for _, k := range timedKinds {
		for _, n := range []int{1, 3, 5} {
			k.run(t, fmt.Sprintf("%s/N=%d", k.name, n), func(t *testing.T) {
				nodes, stores := k.nodes(t, n)
				// A node timeout no loaded machine runs past: a call that timed out goes on
				// in the background and could land after the release it was to precede.
				a := closingClient(t, nodes, redlock.WithNodeTimeout(time.Second))
				b := closingClient(t, nodes, redlock.WithNodeTimeout(time.Second))
				ctx := ctxT(t, 10*time.Second)

				la, err := a.Acquire(ctx, "job")
				require.NoError(t, err)
				assert.Equal(t, "job", la.Name())
				// Acquire returns at quorum; the other nodes' grants land just after.
				settle(t, k.sim, func() bool { return allExist(stores, lockKey("job")) }, "lock key missing on a node")

				_, err = b.TryAcquire(ctx, "job")
				require.ErrorIs(t, err, redlock.ErrHeld)
				assert.NotErrorIs(t, err, redlock.ErrNoQuorum)

				require.NoError(t, la.Release(ctx))
				// B's refused attempt returned once two nodes said no; its request to the
				// last node may land after A's release, and is then released in the
				// background when it answers. So the keys are gone soon, not at once.
				settle(t, k.sim, func() bool { return noneExist(stores, lockKey("job")) }, "lock key left after release")
				require.ErrorIs(t, la.Release(ctx), redlock.ErrNotHeld, "second release")
				require.ErrorIs(t, la.Extend(ctx), redlock.ErrNotHeld, "extend after release")

				lb, err := b.TryAcquire(ctx, "job")
				require.NoError(t, err)
				assert.Greater(t, lb.Token(), la.Token())
				require.NoError(t, lb.Release(ctx))
			})
		}
	}
}

// TestReleaseWithWrongTokenChangesNothing: a release under a token that is not the holder's
// leaves the holder's lock on every node.
func TestReleaseWithWrongTokenChangesNothing(t *testing.T) {
	for _, k := range timedKinds {
		k.run(t, k.name, func(t *testing.T) {
			nodes, stores := k.nodes(t, 3)
			c := closingClient(t, nodes, redlock.WithNodeTimeout(time.Second))
			ctx := ctxT(t, 10*time.Second)
			// An earlier holding of the lock, released: its token is not the next holder's.
			cluster, err := core.NewCluster(nodes)
			require.NoError(t, err)
			wrong, err := cluster.Acquire(ctx, &core.Lock{Keys: core.NewKeys("redlock:", "job"), TTL: time.Second, NodeTimeout: time.Second})
			require.NoError(t, err)
			require.NoError(t, cluster.Release(ctx, wrong))
			l, err := c.TryAcquire(ctx, "job")
			require.NoError(t, err)
			settle(t, k.sim, func() bool { return allExist(stores, lockKey("job")) }, "the acquisition's straggler has not landed")

			require.ErrorIs(t, cluster.Release(ctx, wrong), redlock.ErrNotHeld)
			_, err = cluster.Extend(ctx, wrong)
			require.ErrorIs(t, err, redlock.ErrNotHeld)
			for _, s := range stores {
				assert.True(t, s.exists(lockKey("job")))
			}
			_, err = c.TryAcquire(ctx, "job")
			require.ErrorIs(t, err, redlock.ErrHeld)
			require.NoError(t, l.Extend(ctx), "the holder lost its lock")
			require.NoError(t, l.Release(ctx))
		})
	}
}

// TestExpiredLeaseCannotReleaseTheNextHolder: a lease that expired and was superseded
// reports ErrNotHeld on Extend and Release, and the new holder keeps its lock.
func TestExpiredLeaseCannotReleaseTheNextHolder(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 3)
		c := closingClient(t, nodes, redlock.WithTTL(2*time.Second), redlock.WithNodeTimeout(time.Second))
		ctx := ctxT(t, 10*time.Second)
		old, err := c.TryAcquire(ctx, "job")
		require.NoError(t, err)
		simOnAll(t, servers, "job") // the acquisition's straggler has landed
		time.Sleep(2 * time.Second) // the old lease's keys expire, exactly now
		for i, s := range servers {
			assert.False(t, s.Miniredis().Exists(lockKey("job")), "server %d: the key outlived its TTL", i)
		}
		// Another Client (another process, say): this one queues its own goroutines locally
		// behind the old lease until that lease ends.
		next, err := closingClient(t, nodes).TryAcquire(ctx, "job", redlock.WithTTL(time.Minute))
		require.NoError(t, err)
		simOnAll(t, servers, "job")

		require.ErrorIs(t, old.Extend(ctx), redlock.ErrNotHeld)
		require.ErrorIs(t, old.Release(ctx), redlock.ErrNotHeld)
		simOnAll(t, servers, "job")
		_, err = c.TryAcquire(ctx, "job")
		require.ErrorIs(t, err, redlock.ErrHeld)
		require.NoError(t, next.Release(ctx))
	})
}

// simOnAll requires the lock called name on every server once everything in the bubble has
// done what it can: an operation returns at quorum, and the last node's request lands just
// after.
func simOnAll(t *testing.T, servers []*simnet.Server, name string) {
	t.Helper()
	synctest.Wait()
	for i, s := range servers {
		require.True(t, s.Miniredis().Exists(lockKey(name)), "the lock is not on server %d", i)
	}
}

// noneExist reports whether no store has key.
func noneExist(stores []store, key string) bool {
	for _, s := range stores {
		if s.exists(key) {
			return false
		}
	}
	return true
}

// TestExtend: Extend resets the TTL on the nodes and moves Until; after the keys vanish
// behind the lease's back, Extend reports the lease lost and does not re-create them.
func TestExtend(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 3)
		c := closingClient(t, nodes, redlock.WithTTL(time.Second))
		ctx := ctxT(t, 10*time.Second)
		l, err := c.TryAcquire(ctx, "job")
		require.NoError(t, err)
		simOnAll(t, servers, "job")
		first := l.Until()
		time.Sleep(800 * time.Millisecond)
		require.NoError(t, l.Extend(ctx))
		assert.Equal(t, 800*time.Millisecond, l.Until().Sub(first), "Until did not move with the extension")
		// Extend returns at quorum; the last node's extension lands at the same instant.
		synctest.Wait()
		for i, s := range servers {
			assert.Equal(t, time.Second, s.Miniredis().TTL(lockKey("job")), "server %d: the TTL was not reset", i)
		}
		time.Sleep(999 * time.Millisecond)
		for _, s := range servers {
			assert.True(t, s.Miniredis().Exists(lockKey("job")), "extended key expired on its first TTL")
			s.Miniredis().Del(lockKey("job"))
		}
		require.ErrorIs(t, l.Extend(ctx), redlock.ErrNotHeld)
		synctest.Wait()
		for _, s := range servers {
			assert.False(t, s.Miniredis().Exists(lockKey("job")), "extend re-created a missing key")
		}
		require.ErrorIs(t, l.Extend(ctx), redlock.ErrNotHeld, "a lost lease stays lost")
	})
}

// TestExtendMovesTheEnd: a Lease extended by hand does not end at its former Until, and
// ends at the new one, exactly.
func TestExtendMovesTheEnd(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, _ := simNodes(t, 3)
		c := closingClient(t, nodes, redlock.WithTTL(300*time.Millisecond))
		ctx := ctxT(t, 10*time.Second)
		l, err := c.TryAcquire(ctx, "moved")
		require.NoError(t, err)
		first := l.Until()
		time.Sleep(150 * time.Millisecond)
		require.NoError(t, l.Extend(ctx))
		second := l.Until()
		require.Equal(t, 150*time.Millisecond, second.Sub(first), "Until moved by %v", second.Sub(first))
		<-l.Done()
		assert.Equal(t, second, time.Now(), "the lease did not end at its new Until")
		assert.ErrorIs(t, l.Err(), redlock.ErrExpired)
	})
}

// TestValidity: Until is the attempt's start + TTL - drift, and an attempt that takes longer
// than the validity is refused and leaves no key behind.
func TestValidity(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 3)
		ttl := 2 * time.Second
		drift := time.Duration(float64(ttl)*0.01) + 2*time.Millisecond
		c := closingClient(t, nodes, redlock.WithTTL(ttl))
		start := time.Now()
		l, err := c.TryAcquire(ctxT(t, 5*time.Second), "job")
		require.NoError(t, err)
		assert.Equal(t, start.Add(ttl-drift), l.Until(), "Until is not start + TTL - drift")
		require.NoError(t, l.Release(context.Background()))

		// Every node answers after 120ms, within the 190ms node timeout but after the
		// validity of a 200ms TTL with a drift factor of 0.5 (200 - 102 = 98ms) ran out.
		slow := make([]redlock.Node, len(nodes))
		for i, n := range nodes {
			slow[i] = slowNode{Node: n, delay: 120 * time.Millisecond}
		}
		c = closingClient(t, slow, redlock.WithTTL(200*time.Millisecond), redlock.WithDriftFactor(0.5), redlock.WithNodeTimeout(190*time.Millisecond))
		_, err = c.TryAcquire(ctxT(t, 5*time.Second), "slow")
		require.ErrorIs(t, err, redlock.ErrExpired)
		synctest.Wait()
		for i, s := range servers {
			assert.False(t, s.Miniredis().Exists(lockKey("slow")), "a refused attempt left its key on server %d", i)
		}
	})
}

// TestQuorumWithStoppedServers: 2 of 5 servers down, the lock is granted; 3 of 5 down, it
// fails with a QuorumError naming every failed node, and leaves no key on the live ones.
func TestQuorumWithStoppedServers(t *testing.T) {
	t.Parallel() // see bubble_test.go
	t.Run("sim", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			nodes, servers := simNodes(t, 5)
			addrs := make([]string, len(servers))
			for i, s := range servers {
				addrs[i] = s.Addr()
			}
			quorumWithStoppedServers(t, true, nodes, addrs, func(i int) { servers[i].Crash() },
				func(i int) bool { return servers[i].Miniredis().Exists(lockKey("job")) })
		})
	})
	t.Run("redis-server", func(t *testing.T) {
		nodes, servers := realNodes(t, 5)
		addrs := make([]string, len(servers))
		for i, s := range servers {
			addrs[i] = s.Addr()
		}
		quorumWithStoppedServers(t, false, nodes, addrs, func(i int) { servers[i].Kill() },
			func(i int) bool { return realStore{servers[i]}.exists(lockKey("job")) })
	})
}

func quorumWithStoppedServers(t *testing.T, sim bool, nodes []redlock.Node, addrs []string, kill func(int), holds func(int) bool) {
	// The stopped servers refuse at once; the live ones have 500 ms (and the last Acquire
	// 1.5 s, for attempts that end).
	c := closingClient(t, nodes, redlock.WithNodeTimeout(500*time.Millisecond))
	ctx := ctxT(t, 20*time.Second)

	kill(1)
	kill(3)
	l, err := c.TryAcquire(ctx, "job")
	require.NoError(t, err, "2 of 5 down must still grant")
	require.NoError(t, l.Release(ctx))

	kill(4)
	_, err = c.TryAcquire(ctx, "job")
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	assert.NotErrorIs(t, err, redlock.ErrHeld)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, 3, qe.Quorum)
	assert.Len(t, qe.Errs, 3)
	for _, i := range []int{1, 3, 4} {
		assert.Contains(t, err.Error(), addrs[i], "error does not name a failed node")
	}
	for _, i := range []int{0, 2} {
		settle(t, sim, func() bool { return !holds(i) }, "a failed attempt left its key on %s", addrs[i])
	}

	// Acquire keeps trying until its context ends, then says why it failed.
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Acquire(short, "job")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	if sim {
		assert.Equal(t, 1500*time.Millisecond, time.Since(start), "Acquire did not end with its context")
	}
}

// TestFailFastWithHungNodes: with 2 of 5 nodes accepting connections and never answering,
// acquire, extend and release each finish within a few node timeouts (release within one,
// and a margin), far below the driver's 3 s read timeout.
func TestFailFastWithHungNodes(t *testing.T) {
	const nodeTimeout = 300 * time.Millisecond
	t.Run("sim", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			nodes, servers := simNodes(t, 5)
			servers[3].Hang()
			servers[4].Hang()
			c := closingClient(t, nodes, redlock.WithNodeTimeout(nodeTimeout))
			ctx := ctxT(t, 20*time.Second)
			for i := range 3 { // more than once: the driver reconnects to the hung nodes each time
				// Each operation waits at most one node timeout (from the end of the millisecond
				// its calls share): Acquire and Extend give the nodes not heard the 2 ms grace
				// after a quorum (none once they are suspects), or, when the live nodes' replies
				// and the hung nodes' first failures come at one instant and are read in
				// another order, the node timeout; Release waits for the calls under way to the
				// hung nodes, or for its own (at once if it does not call suspects).
				start := time.Now()
				l, err := c.TryAcquire(ctx, "job")
				require.NoError(t, err)
				assert.LessOrEqual(t, time.Since(start), nodeTimeout+time.Millisecond, "acquire %d waited on hung nodes", i)
				start = time.Now()
				require.NoError(t, l.Extend(ctx))
				assert.LessOrEqual(t, time.Since(start), nodeTimeout+time.Millisecond, "extend %d waited on hung nodes", i)
				start = time.Now()
				require.NoError(t, l.Release(ctx))
				assert.LessOrEqual(t, time.Since(start), nodeTimeout+time.Millisecond, "release %d waited on hung nodes", i)
			}
		})
	})
	t.Run("redis-server", func(t *testing.T) {
		nodes, _ := realNodes(t, 3)
		nodes = append(nodes, hungNode(t), hungNode(t))
		c := closingClient(t, nodes, redlock.WithNodeTimeout(nodeTimeout))
		ctx := ctxT(t, 20*time.Second)
		for i := range 3 { // more than once: the driver reconnects to the hung nodes each time
			start := time.Now()
			l, err := c.TryAcquire(ctx, "job")
			require.NoError(t, err)
			require.NoError(t, l.Extend(ctx))
			require.NoError(t, l.Release(ctx))
			// Far below the driver's 3 s read timeout, times three operations.
			assert.Less(t, time.Since(start), 3*time.Second, "round %d waited on hung nodes", i)
		}
	})
}

// TestBadInput: bad arguments give clear errors that match ErrInvalid, never a panic.
func TestBadInput(t *testing.T) {
	nodes, _ := miniNodes(t, 1)
	var nilNode redlock.Node
	for _, tc := range []struct {
		name  string
		nodes []redlock.Node
		opts  []redlock.Option
		want  string
	}{
		{"no nodes", nil, nil, "no nodes"},
		{"nil node", []redlock.Node{nodes[0], nilNode}, nil, "node 1 is nil"},
		{"zero TTL", nodes, []redlock.Option{redlock.WithTTL(0)}, "TTL must be at least 1ms"},
		{"negative TTL", nodes, []redlock.Option{redlock.WithTTL(-time.Second)}, "TTL must be at least 1ms"},
		{"TTL within drift", nodes, []redlock.Option{redlock.WithTTL(2 * time.Millisecond)}, "leaves no validity"},
		{"zero node timeout", nodes, []redlock.Option{redlock.WithNodeTimeout(0)}, "node timeout"},
		{"node timeout over TTL", nodes, []redlock.Option{redlock.WithTTL(time.Second), redlock.WithNodeTimeout(2 * time.Second)}, "node timeout"},
		{"drift factor", nodes, []redlock.Option{redlock.WithDriftFactor(1)}, "drift factor"},
		{"retry", nodes, []redlock.Option{redlock.WithRetry(time.Second, time.Millisecond)}, "retry delays"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redlock.New(tc.nodes, tc.opts...)
			require.ErrorIs(t, err, redlock.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	c := newClient(t, nodes, redlock.WithNodeTimeout(2*time.Second)) // no call is made: none may time out
	ctx := ctxT(t, 5*time.Second)
	_, err := c.TryAcquire(ctx, "")
	require.ErrorIs(t, err, redlock.ErrInvalid)
	assert.Contains(t, err.Error(), "empty lock name")
	_, err = c.Acquire(ctx, "")
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = c.Acquire(ctx, "job", redlock.WithTTL(-1))
	require.ErrorIs(t, err, redlock.ErrInvalid, "a per-call option is validated too")

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.TryAcquire(cancelled, "job")
	require.ErrorIs(t, err, context.Canceled)
	_, err = c.Acquire(cancelled, "job")
	require.ErrorIs(t, err, context.Canceled)

	var zero redlock.Lease
	assert.Zero(t, zero.Token(), "the zero Lease holds no token")
	require.ErrorIs(t, zero.Extend(ctx), redlock.ErrNotHeld)
	require.ErrorIs(t, zero.Release(ctx), redlock.ErrNotHeld)
	assert.True(t, errors.Is(zero.Release(ctx), redlock.ErrNotHeld))
}

// countingNode counts the scripts run through it.
type countingNode struct {
	redlock.Node
	calls atomic.Int64
}

func (n *countingNode) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	n.calls.Add(1)
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestLeasesQueueLocally: goroutines of one Client that want one name queue locally in FIFO
// order; a TryAcquire behind a local holder is refused without a round trip.
func TestLeasesQueueLocally(t *testing.T) {
	bubble(t, leasesQueueLocally)
}

func leasesQueueLocally(t *testing.T) {
	nodes, _ := simNodes(t, 1)
	counted := &countingNode{Node: nodes[0]}
	c := closingClient(t, []redlock.Node{counted})
	ctx := ctxT(t, 10*time.Second)
	l, err := c.Acquire(ctx, "queued")
	require.NoError(t, err)

	before := counted.calls.Load()
	_, err = c.TryAcquire(ctx, "queued")
	require.ErrorIs(t, err, redlock.ErrHeld)
	assert.Equal(t, before, counted.calls.Load(), "a local TryAcquire went to Redis")

	order := make(chan int, 3)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Acquire(ctx, "queued")
			if assert.NoError(t, err) {
				order <- i
				assert.NoError(t, l.Release(ctx))
			}
		}()
		synctest.Wait()
		require.Equal(t, i+1, localWaiters(), "goroutine %d did not queue", i) // before the next one starts
	}
	waiting := counted.calls.Load()
	time.Sleep(time.Second) // as long as the local waiters like
	assert.Equal(t, waiting, counted.calls.Load(), "local waiters polled Redis")
	released := time.Now()
	require.NoError(t, l.Release(ctx))
	for want := range 3 {
		assert.Equal(t, want, <-order, "not FIFO")
	}
	assert.Equal(t, time.Duration(0), time.Since(released), "a local waiter waited for the clock")
}

// localWaiters counts the goroutines of this process that are blocked waiting in a Client's
// local queue.
func localWaiters() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			waiting := 0
			for _, g := range strings.Split(string(buf[:n]), "\n\n") {
				header, _, _ := strings.Cut(g, "\n")
				if strings.Contains(header, "[select") && strings.Contains(g, "redlock.(*queue).join(") {
					waiting++
				}
			}
			return waiting
		}
		buf = make([]byte, 2*len(buf))
	}
}

// blockingAcquired is an Observer whose Acquired tells entered and then waits for proceed.
type blockingAcquired struct {
	redlock.NopObserver
	entered, proceed chan struct{}
	lost             atomic.Int32
}

func (o *blockingAcquired) Acquired(e redlock.AcquireEvent) {
	if e.Name == "closing" {
		o.entered <- struct{}{}
		<-o.proceed
	}
}

func (o *blockingAcquired) Lost(e redlock.LostEvent) {
	if e.Name == "closing" {
		o.lost.Add(1)
	}
}

// TestClosedAtTheGrantPastItsMaxHold: a Lease granted as its Client closes, whose maximum
// hold time has already run out, and which is not handed out (the acquisition fails with
// ErrClosed) is let go without a word (no Lost event, no lost handler), once: its maximum
// hold time does not end it, nor release it at the same time as the acquisition does.
func TestClosedAtTheGrantPastItsMaxHold(t *testing.T) {
	for range 200 {
		o := &blockingAcquired{entered: make(chan struct{}), proceed: make(chan struct{})}
		var handled atomic.Int32
		c := newClient(t, []redlock.Node{instantNode{0}, instantNode{1}, instantNode{2}}, redlock.WithObserver(o))
		type result struct {
			l   *redlock.Lease
			err error
		}
		acquired := make(chan result, 1)
		go func() {
			l, err := c.TryAcquire(context.Background(), "closing", redlock.WithMaxHold(time.Nanosecond),
				redlock.WithLostHandler(func(error) { handled.Add(1) }))
			acquired <- result{l, err}
		}()
		<-o.entered
		closed := make(chan struct{})
		go func() { _ = c.Close(); close(closed) }()
		for { // Close has begun once the Client refuses a new acquisition
			l, err := c.TryAcquire(context.Background(), "other")
			if errors.Is(err, redlock.ErrClosed) {
				break
			}
			if err == nil {
				_ = l.Release(context.Background())
			}
			runtime.Gosched()
		}
		close(o.proceed)
		r := <-acquired
		<-closed
		if r.err == nil { // granted before Close took its holdings: Close ended it, as a holding
			require.Error(t, r.l.Err())
			continue
		}
		require.ErrorIs(t, r.err, redlock.ErrClosed)
		require.Zero(t, o.lost.Load(), "Lost events for a lease never handed out")
		require.Zero(t, handled.Load(), "lost handler calls for a lease never handed out")
	}
}

// TestLeaseErrNamesTheLock: the reason a lease ended names its lock, and still matches the
// reason's sentinel.
func TestLeaseErrNamesTheLock(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, _ := simNodes(t, 3)
		c := closingClient(t, nodes, redlock.WithTTL(time.Second))
		ctx := t.Context()
		l, err := c.Acquire(ctx, "reports:daily")
		require.NoError(t, err)
		<-l.Done() // no extension: its validity runs out
		require.ErrorIs(t, l.Err(), redlock.ErrExpired)
		assert.Contains(t, l.Err().Error(), `"reports:daily"`)
		assert.Contains(t, l.Err().Error(), "validity ran out")

		l, err = c.Acquire(ctx, "reports:weekly")
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
		require.ErrorIs(t, l.Err(), redlock.ErrReleased)
		assert.Contains(t, l.Err().Error(), `"reports:weekly"`)
	})
}
