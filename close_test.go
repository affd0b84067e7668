package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock"
	rlgoredis "github.com/go-redlock/redlock/backends/goredis"
	rlredigo "github.com/go-redlock/redlock/backends/redigo"
	rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
	rlvalkey "github.com/go-redlock/redlock/backends/valkey"
	"github.com/go-redlock/redlock/core"
	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"
)

// TestCloseWakesLocalWaiters: calls that wait behind a holder of the same Client (in its
// local queue, where the nodes are never asked) end with ErrClosed at Close: a second
// Lock (a panic), LockContext(Background), Acquire, a Semaphore's Acquire and an
// Election's Campaign; an Election's Observe channel closes; and calls made after Close
// fail with ErrClosed at once.
func TestCloseWakesLocalWaiters(t *testing.T) {
	nodes, _ := miniNodes(t, 3)
	c := newClient(t, nodes, redlock.WithNodeTimeout(2*time.Second), redlock.WithTTL(3*time.Second))
	ctx := ctxT(t, time.Minute)
	m := c.NewMutex("local")
	m.Lock()
	permit, err := c.NewSemaphore("local-sem", 1).Acquire(ctx)
	require.NoError(t, err)
	leader, err := c.NewElection("local-vote").Campaign(ctx, "first")
	require.NoError(t, err)

	waits := map[string]func() error{
		"Lock": func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("%v", r)
				}
			}()
			c.NewMutex("local").Lock()
			return nil
		},
		"LockContext": func() error { return c.NewMutex("local").LockContext(context.Background()) },
		"Acquire": func() error {
			_, err := c.Acquire(context.Background(), "local")
			return err
		},
		"Semaphore.Acquire": func() error {
			_, err := c.NewSemaphore("local-sem", 1).Acquire(context.Background())
			return err
		},
		"Campaign": func() error {
			_, err := c.NewElection("local-vote").Campaign(context.Background(), "second")
			return err
		},
	}
	observed := c.NewElection("local-vote").Observe(ctx)
	require.Equal(t, "first", <-observed)
	ended := make(chan error, len(waits))
	for name, wait := range waits {
		go func() { ended <- fmt.Errorf("%s: %w", name, wait()) }()
	}
	// Each waits in a local queue (the holder is this Client's).
	for deadline := time.Now().Add(10 * time.Second); localWaiters() != len(waits); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d calls wait in the local queue", localWaiters(), len(waits))
		}
	}
	require.NoError(t, c.Close())
	for range waits {
		select {
		case err := <-ended:
			assert.ErrorContains(t, err, "client is closed") // Lock's panic carries the error too
		case <-time.After(5 * time.Second):
			t.Fatal("a waiting call did not end at Close")
		}
	}
	for open, deadline := true, time.After(5*time.Second); open; { // it may send "" once, as it closes
		select {
		case _, open = <-observed:
		case <-deadline:
			t.Fatal("Observe's channel did not close at Close")
		}
	}
	for _, err := range []error{
		c.NewMutex("local").LockContext(ctx),
		func() error { _, err := c.Acquire(ctx, "local"); return err }(),
		func() error { _, err := c.TryAcquire(ctx, "local"); return err }(),
		func() error { _, err := c.NewSemaphore("local-sem", 1).TryAcquire(ctx); return err }(),
		c.NewRWMutex("local").RLockContext(ctx),
	} {
		require.ErrorIs(t, err, redlock.ErrClosed)
	}
	// The holdings ended at Close (see TestCloseReleasesHoldings).
	require.ErrorIs(t, m.UnlockContext(ctx), redlock.ErrClosed)
	require.ErrorIs(t, permit.Err(), redlock.ErrClosed)
	require.ErrorIs(t, leader.Err(), redlock.ErrClosed)
}

// TestCloseReleasesHoldings: Close releases every lock the Client holds (a Lease, a
// Mutex's and an RWMutex's holdings, a permit, a leadership), so that no key is left on
// the nodes and nothing extends them any longer; each holding ends with ErrClosed: its
// Done and Lost channels close, the WithLostHandler function hears it, and its Release or
// Unlock after Close reports that it was not held. Another Client takes each lock at once.
func TestCloseReleasesHoldings(t *testing.T) {
	nodes, servers := miniNodes(t, 3)
	lost := make(chan error, 10)
	opts := []redlock.Option{redlock.WithNodeTimeout(2 * time.Second), redlock.WithTTL(5 * time.Second),
		redlock.WithLostHandler(func(err error) { lost <- err })}
	c := newClient(t, nodes, opts...)
	ctx := ctxT(t, time.Minute)
	lease, err := c.Acquire(ctx, "held-lease", redlock.WithAutoExtend(true))
	require.NoError(t, err)
	m := c.NewMutex("held-mutex")
	m.Lock()
	rw := c.NewRWMutex("held-rw")
	rw.RLock()
	permit, err := c.NewSemaphore("held-sem", 1).Acquire(ctx)
	require.NoError(t, err)
	leader, err := c.NewElection("held-vote").Campaign(ctx, "me")
	require.NoError(t, err)
	mLost, rwLost := m.Lost(), rw.Lost()

	require.NoError(t, c.Close())
	for _, l := range []*redlock.Lease{lease, permit, leader} {
		select {
		case <-l.Done():
		default:
			t.Fatalf("lease %q still held after Close", l.Name())
		}
		require.ErrorIs(t, l.Err(), redlock.ErrClosed)
		err := l.Release(ctx)
		require.ErrorIs(t, err, redlock.ErrNotHeld)
		require.ErrorIs(t, err, redlock.ErrClosed)
		require.ErrorIs(t, l.Extend(ctx), redlock.ErrNotHeld)
	}
	for _, ch := range []<-chan struct{}{mLost, rwLost} {
		select {
		case <-ch:
		default:
			t.Fatal("a Mutex's Lost channel did not close at Close")
		}
	}
	for range 5 {
		select {
		case err := <-lost:
			require.ErrorIs(t, err, redlock.ErrNotHeld)
			require.ErrorIs(t, err, redlock.ErrClosed)
		case <-time.After(5 * time.Second):
			t.Fatal("the lost handler was not called for every holding")
		}
	}
	err = m.UnlockContext(ctx)
	require.ErrorIs(t, err, redlock.ErrClosed, "Unlock after Close")
	err = rw.RUnlockContext(ctx)
	require.ErrorIs(t, err, redlock.ErrClosed, "RUnlock after Close")
	for _, s := range servers {
		for _, name := range []string{"held-lease", "held-mutex", "held-vote"} {
			assert.False(t, s.Exists(lockKey(name)), "%s left on a node", name)
		}
	}
	other := newClient(t, nodes, opts...)
	for _, name := range []string{"held-lease", "held-mutex"} {
		l, err := other.TryAcquire(ctx, name)
		require.NoError(t, err, "%s still held after Close", name)
		require.NoError(t, l.Release(ctx))
	}
	require.True(t, other.NewRWMutex("held-rw").TryLock(), "the read share was left after Close")
	l, err := other.NewSemaphore("held-sem", 1).TryAcquire(ctx)
	require.NoError(t, err, "the permit was left after Close")
	require.NoError(t, l.Release(ctx))
}

// TestConcurrentClosesLetTheClockMove: two Closes at once while the holding that Close
// releases waits on hung nodes: the second waits for the first in a way that lets a
// bubble's clock move, and both return the first one's result.
func TestConcurrentClosesLetTheClockMove(t *testing.T) {
	stop := watchdog(30*time.Second, "TestConcurrentClosesLetTheClockMove: the bubble's clock stopped (a Close waiting for another is not durably blocked)")
	defer stop()
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 3)
		c, err := redlock.New(nodes, redlock.WithNodeTimeout(200*time.Millisecond), redlock.WithRestartGuard(0))
		require.NoError(t, err)
		_, err = c.Acquire(t.Context(), "closing")
		require.NoError(t, err)
		servers[1].Hang()
		servers[2].Hang()
		defer servers[2].Resume()
		defer servers[1].Resume()

		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- c.Close() }()
		}
		first, second := <-errs, <-errs
		assert.Equal(t, first, second)
	})
}

// goneNode fails every call once gone is set, as the node of a process that has exited.
type goneNode struct {
	redlock.Node
	gone *atomic.Bool
}

func (n goneNode) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if n.gone.Load() {
		return nil, errors.New("the process has exited")
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestCloseWaitsForTheLeaves: a wait that gives up leaves the queue on every node in the
// background: at once where no call of its is under way, and on a slow node once its call
// there has landed. Close waits for those leaves: once it returned, the program may exit
// (here: its nodes fail every call), and the holder's release hands the lock to no one.
func TestCloseWaitsForTheLeaves(t *testing.T) {
	for _, tc := range []struct {
		name string
		slow time.Duration // the delay of the waiter's calls to its third node
	}{{"queued", 0}, {"a call under way", 300 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				nodes, servers := simNodes(t, 3)
				holder := newClient(t, nodes, redlock.WithNodeTimeout(time.Second))
				l, err := holder.Acquire(t.Context(), "exit")
				require.NoError(t, err)

				var gone atomic.Bool
				waiterNodes := make([]redlock.Node, len(nodes))
				for i, n := range nodes {
					waiterNodes[i] = goneNode{n, &gone}
				}
				waiterNodes[2] = goneNode{slowNode{nodes[2], tc.slow}, &gone}
				waiter := newClient(t, waiterNodes, redlock.WithNodeTimeout(time.Second))
				ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
				defer cancel()
				_, err = waiter.Acquire(ctx, "exit")
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.NoError(t, waiter.Close())
				gone.Store(true)
				time.Sleep(time.Second) // what was left under way fails now

				require.NoError(t, l.Release(t.Context()))
				key := core.NewKeys("redlock:", "exit")
				for i, s := range servers {
					assert.False(t, s.Miniredis().Exists(key.Lock), "server %d handed the lock to the waiter that left", i)
					assert.False(t, s.Miniredis().Exists(key.Queue), "server %d still queues the waiter that left", i)
				}
				require.NoError(t, holder.Close())
			})
		})
	}
}

// gateNode holds back each reply of a call made while gate is open, until gate closes (or
// the call's context ends); arrived counts the replies held back. The call itself lands
// on the server at once: the reply is what is late.
type gateNode struct {
	redlock.Node
	gate    chan struct{}
	arrived *atomic.Int32
}

func (n gateNode) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	vals, err := n.Node.Eval(ctx, s, keys, args...)
	select {
	case <-n.gate:
		return vals, err
	default:
	}
	n.arrived.Add(1)
	select {
	case <-n.gate:
		return vals, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestCloseWaitsForAcquisitionsUnderWay: an acquisition whose attempt is under way when
// Close is called wins on the nodes after Close began; Close waits for it to let go of that
// lock, so that once Close returned the program may exit (here: its nodes fail every call)
// and no lock of the Client is left on the nodes.
func TestCloseWaitsForAcquisitionsUnderWay(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 3)
		var gone atomic.Bool
		var arrived atomic.Int32
		gate := make(chan struct{})
		gated := make([]redlock.Node, len(nodes))
		for i, n := range nodes {
			gated[i] = goneNode{gateNode{n, gate, &arrived}, &gone}
		}
		c := newClient(t, gated, redlock.WithNodeTimeout(time.Second))
		acquired := make(chan error, 1)
		go func() {
			_, err := c.Acquire(t.Context(), "closing")
			acquired <- err
		}()
		synctest.Wait()
		require.EqualValues(t, len(nodes), arrived.Load(), "the attempt is not under way on every node")

		closed := make(chan error, 1)
		go func() {
			err := c.Close()
			gone.Store(true) // the program exits once Close returned
			closed <- err
		}()
		synctest.Wait()
		close(gate) // the attempt's replies come back: it won
		require.NoError(t, <-closed)
		require.ErrorIs(t, <-acquired, redlock.ErrClosed)
		key := core.NewKeys("redlock:", "closing")
		for i, s := range servers {
			assert.False(t, s.Miniredis().Exists(key.Lock), "server %d holds the lock that the closed Client took", i)
		}
	})
}

// TestClosedDriverClientsEndTheWait: a lock over a driver client that was closed fails at
// once with an error that matches ErrClosed and names the node, through each backend,
// instead of being retried until its context ends; Mutex.Lock goes on through it.
func TestClosedDriverClientsEndTheWait(t *testing.T) {
	addr := realServers(t, 1)[0].Addr()
	for _, c := range []struct {
		name string
		node func(t *testing.T) (node redlock.Node, closeDriver func())
	}{
		{"goredis", func(t *testing.T) (redlock.Node, func()) {
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			return rlgoredis.New(rdb), func() { _ = rdb.Close() }
		}},
		{"redigo", func(t *testing.T) (redlock.Node, func()) {
			pool := &redigo.Pool{DialContext: func(ctx context.Context) (redigo.Conn, error) {
				return redigo.DialContext(ctx, "tcp", addr)
			}}
			return rlredigo.New(pool, addr), func() { _ = pool.Close() }
		}},
		{"rueidis", func(t *testing.T) (redlock.Node, func()) {
			rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
			require.NoError(t, err)
			return rlrueidis.New(rc), rc.Close
		}},
		{"valkey", func(t *testing.T) (redlock.Node, func()) {
			vc, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}})
			require.NoError(t, err)
			return rlvalkey.New(vc), vc.Close
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			node, closeDriver := c.node(t)
			client := newClient(t, []redlock.Node{node})
			ctx := ctxT(t, 10*time.Second)
			l, err := client.Acquire(ctx, "closed-"+c.name)
			require.NoError(t, err)
			require.NoError(t, l.Release(ctx))
			closeDriver()

			start := time.Now()
			_, err = client.Acquire(ctx, "closed-"+c.name)
			require.ErrorIs(t, err, redlock.ErrClosed)
			assert.ErrorContains(t, err, node.String())
			assert.Less(t, time.Since(start), time.Second, "a closed client was retried")
			require.ErrorIs(t, client.NewMutex("closed-"+c.name).LockContext(ctx), redlock.ErrClosed)

			m := client.NewMutex("closed-" + c.name)
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer func() { _ = recover() }() // Lock must not return; it panics only if the Client closes
				m.Lock()
			}()
			select {
			case <-done:
				t.Fatal("Lock returned over a closed driver client")
			case <-time.After(300 * time.Millisecond):
			}
			require.NoError(t, client.Close())
			select {
			case <-done: // it panicked with ErrClosed at the Client's Close
			case <-time.After(5 * time.Second):
				t.Fatal("Lock did not end at the Client's Close")
			}
		})
	}
}
