package redlock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// criticalSections runs goroutines x sections critical sections, each between lock(g) and
// the unlock it returns (g is the goroutine's index), with a read-yield-write increment that
// loses updates unless the lock excludes, and an overlap detector. It returns the final
// value and how often two holders overlapped.
func criticalSections(goroutines, sections int, lock func(g int) (unlock func())) (int64, int32) {
	var value atomic.Int64
	var holders, overlaps atomic.Int32
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range sections {
				unlock := lock(g)
				if holders.Add(1) != 1 {
					overlaps.Add(1)
				}
				v := value.Load()
				runtime.Gosched()
				value.Store(v + 1)
				holders.Add(-1)
				unlock()
			}
		}()
	}
	wg.Wait()
	return value.Load(), overlaps.Load()
}

// TestMutexExcludes: 3 Clients x 8 goroutines on one name over 3 real servers, 40 critical
// sections each, through a Mutex per goroutine; and the same through one shared *Mutex.
func TestMutexExcludes(t *testing.T) {
	t.Parallel() // see bubble_test.go
	const clients, goroutines, sections = 3, 8, 40
	servers := realServers(t, 3)

	t.Run("a Mutex per goroutine", func(t *testing.T) {
		var mutexes []*redlock.Mutex
		for range clients {
			c := newClient(t, nodesFor(t, servers), redlock.WithNodeTimeout(time.Second))
			for range goroutines {
				mutexes = append(mutexes, c.NewMutex("counter"))
			}
		}
		value, overlaps := criticalSections(clients*goroutines, sections, func(g int) func() {
			mutexes[g].Lock()
			return mutexes[g].Unlock
		})
		require.Zero(t, overlaps, "two holders overlapped")
		require.Equal(t, int64(clients*goroutines*sections), value, "updates were lost")
	})
	t.Run("one shared Mutex", func(t *testing.T) {
		c := newClient(t, nodesFor(t, servers), redlock.WithNodeTimeout(time.Second))
		m := c.NewMutex("shared")
		var mu sync.Locker = m
		value, overlaps := criticalSections(goroutines, sections, func(int) func() {
			mu.Lock()
			return mu.Unlock
		})
		require.Zero(t, overlaps)
		require.Equal(t, int64(goroutines*sections), value)
	})
}

// withoutSubscriber hides a node's Subscriber, so waiters must poll.
type withoutSubscriber struct{ redlock.Node }

// TestMutexWakesOnRelease: a holder with a 30 s TTL unlocks; a waiter whose polling
// backoff is 5 s or more, and whose refresh interval (2.5 node timeouts) is 5 s, holds the
// lock at that instant (on redis-server: before its backoff could end), because the release
// wakes it. A poller with only the holder's TTL, its backoff and its refresh to go by would
// wait seconds.
func TestMutexWakesOnRelease(t *testing.T) {
	for _, k := range timedKinds {
		k.run(t, k.name, func(t *testing.T) {
			nodes, stores := k.nodes(t, 3)
			if _, ok := nodes[0].(core.Subscriber); !ok {
				t.Fatalf("%T is not a core.Subscriber", nodes[0])
			}
			holderClient := closingClient(t, nodes, redlock.WithTTL(30*time.Second), nodeTimeoutFor(k.sim, 100*time.Millisecond))
			waiterClient := closingClient(t, nodes, redlock.WithTTL(30*time.Second), redlock.WithRetry(5*time.Second, 30*time.Second), redlock.WithNodeTimeout(2*time.Second))
			holder := holderClient.NewMutex("wake")
			holder.Lock()

			locked := make(chan time.Time, 1)
			go func() {
				m := waiterClient.NewMutex("wake")
				m.Lock()
				locked <- time.Now()
				m.Unlock()
			}()
			queue := core.NewKeys("redlock:", "wake").Queue
			settle(t, k.sim, func() bool { return allExist(stores, queue) }, "the waiter is not queued")
			unlocked := time.Now()
			holder.Unlock()
			at := within(t, k.sim, locked, "the waiter's lock")
			if k.sim {
				assert.Equal(t, time.Duration(0), at.Sub(unlocked), "the waiter did not wake on release")
				return
			}
			assert.Less(t, at.Sub(unlocked), 5*time.Second, "the waiter did not wake on release")
		})
	}
}

// allExist reports whether every store has key.
func allExist(stores []store, key string) bool {
	for _, s := range stores {
		if !s.exists(key) {
			return false
		}
	}
	return true
}

// TestMutexPollsWithoutSubscriber: without a Subscriber, a waiter finds the lock when the
// holder's TTL runs out (the holder crashed without unlocking), not after its long backoff.
func TestMutexPollsWithoutSubscriber(t *testing.T) {
	for _, k := range timedKinds {
		k.run(t, k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 3)
			plain := make([]redlock.Node, len(nodes))
			for i, n := range nodes {
				plain[i] = withoutSubscriber{n}
			}
			const ttl = 400 * time.Millisecond
			start := time.Now()
			crashed, err := closingClient(t, plain, redlock.WithTTL(ttl), redlock.WithNodeTimeout(100*time.Millisecond)).TryAcquire(ctxT(t, 5*time.Second), "poll")
			require.NoError(t, err) // never released: its keys expire by TTL
			waiter := closingClient(t, plain, redlock.WithRetry(5*time.Second, 30*time.Second), redlock.WithNodeTimeout(2*time.Second)).NewMutex("poll")
			require.NoError(t, waiter.LockContext(ctxT(t, generous)))
			elapsed := time.Since(start)
			assert.False(t, time.Now().Before(crashed.Until()), "the waiter got in while the holder's lease was valid")
			if k.sim {
				assert.Equal(t, ttl, elapsed, "the waiter did not get the lock as the holder's TTL ran out")
			} else {
				assert.Less(t, elapsed, 5*time.Second, "the waiter slept its backoff instead of the holder's TTL")
			}
			waiter.Unlock()
		})
	}
}

// deleteKey deletes key on the server of st (a simulated, miniredis or real one).
func deleteKey(t *testing.T, st store, key string) {
	switch s := st.(type) {
	case simStore:
		s.s.Miniredis().Del(key)
	case miniStore:
		s.m.Del(key)
	case realStore:
		_, err := s.s.Do("DEL", key)
		require.NoError(t, err)
	default:
		t.Fatalf("cannot delete on %T", st)
	}
}

// TestMutexExtendsItselfAndReportsLoss: a Mutex with a 500ms TTL is still locked after 5
// TTLs; deleting its keys behind its back is reported at its next extension.
func TestMutexExtendsItselfAndReportsLoss(t *testing.T) {
	for _, k := range timedKinds {
		k.run(t, k.name, func(t *testing.T) {
			nodes, stores := k.nodes(t, 3)
			// Exact on simulated servers: a 500 ms TTL for 5 TTLs; on redis-server a TTL that
			// leaves a loaded machine a second for each extension, for 1.5 TTLs.
			ttl, hold := 500*time.Millisecond, 2500*time.Millisecond
			if !k.sim {
				ttl, hold = 3*time.Second, 4500*time.Millisecond
			}
			lostErr, unlockErr := make(chan error, 1), make(chan error, 1)
			c := closingClient(t, nodes, redlock.WithTTL(ttl), nodeTimeoutFor(k.sim, 100*time.Millisecond))
			m := c.NewMutex("extended",
				redlock.WithLostHandler(func(err error) { lostErr <- err }),
				redlock.WithErrorHandler(func(err error) { unlockErr <- err }))
			other := c.NewMutex("extended")
			m.Lock()
			time.Sleep(hold)
			select {
			case <-m.Lost():
				t.Fatal("lost the lock while extending it")
			default:
			}
			assert.False(t, closingClient(t, nodes).NewMutex("extended").TryLock(), "another Client got the lock")
			assert.False(t, other.TryLock(), "another Mutex of the same Client got the lock")

			deleted := time.Now()
			for _, s := range stores {
				deleteKey(t, s, lockKey("extended"))
			}
			within(t, k.sim, m.Lost(), "the loss")
			if k.sim {
				// An extension comes two thirds into each validity (493 ms: 328.67 ms); the
				// eighth, at 2.629333336 s, is the first after the deletion, and finds the keys
				// gone.
				assert.Equal(t, 129333336*time.Nanosecond, time.Since(deleted), "the loss was not reported at the next extension")
			}
			require.ErrorIs(t, within(t, k.sim, lostErr, "the lost handler's call"), redlock.ErrNotHeld)
			m.Unlock() // the lock was lost: Unlock reports it to the handler, it does not panic
			select {
			case err := <-unlockErr:
				require.ErrorIs(t, err, redlock.ErrLost)
			default:
				t.Fatal("Unlock of a lost lock reported nothing")
			}
		})
	}
}

// TestMutexLostWhenAskedLate: Lost asked for only after the lock was lost returns a closed
// channel; the next holding's is open again, and an unlocked Mutex's is closed.
func TestMutexLostWhenAskedLate(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 3)
		lost := make(chan error, 1)
		c := closingClient(t, nodes, redlock.WithTTL(300*time.Millisecond))
		m := c.NewMutex("late", redlock.WithLostHandler(func(err error) { lost <- err }))
		assert.True(t, closesWithin(m.Lost(), 0), "an unlocked Mutex's Lost is open")
		ctx := ctxT(t, 10*time.Second)
		require.NoError(t, m.LockContext(ctx))
		deleted := time.Now()
		for _, s := range servers {
			s.Miniredis().Del(lockKey("late"))
		}
		require.ErrorIs(t, <-lost, redlock.ErrLost)
		// The first extension, two thirds into the 295 ms validity, finds the keys gone.
		assert.Equal(t, 196666667*time.Nanosecond, time.Since(deleted), "the loss was not reported at the next extension")
		assert.True(t, closesWithin(m.Lost(), 0), "Lost is open after the loss")
		assert.ErrorIs(t, m.UnlockContext(ctx), redlock.ErrLost)
		require.NoError(t, m.LockContext(ctx))
		assert.False(t, closesWithin(m.Lost(), 0), "the next holding's Lost is closed")
		require.NoError(t, m.UnlockContext(ctx))
		assert.True(t, closesWithin(m.Lost(), 0), "an unlocked Mutex's Lost is open")
	})
}

// TestMutexExtendsEveryHolding: each holding of a Mutex extends itself (its holdings share
// one timer), a holding that follows an early Unlock too.
func TestMutexExtendsEveryHolding(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, _ := simNodes(t, 3)
		const ttl = 500 * time.Millisecond // an extension is due two thirds into the validity
		c := closingClient(t, nodes, redlock.WithTTL(ttl))
		m := c.NewMutex("every")
		ctx := ctxT(t, 20*time.Second)
		for range 3 {
			require.NoError(t, m.LockContext(ctx))
			lost := m.Lost()
			assert.False(t, closesWithin(lost, 2*ttl), "a holding was not extended")
			require.NoError(t, m.UnlockContext(ctx))
			require.NoError(t, m.LockContext(ctx)) // and at once again, before the timer's next event
			require.NoError(t, m.UnlockContext(ctx))
		}
	})
}

// TestMutexUnlock: Unlock of an unlocked Mutex panics as sync.Mutex does; Unlock while the
// servers are down does not, and reports the error to the handler.
func TestMutexUnlock(t *testing.T) {
	t.Run("sim", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			nodes, servers := simNodes(t, 3)
			mutexUnlock(t, nodes, func() {
				for _, s := range servers {
					s.Crash()
				}
			})
		})
	})
	t.Run("redis-server", func(t *testing.T) {
		nodes, servers := realNodes(t, 3)
		mutexUnlock(t, nodes, func() {
			for _, s := range servers {
				s.Kill()
			}
		})
	})
}

func mutexUnlock(t *testing.T, nodes []redlock.Node, kill func()) {
	var reported []error
	var mu sync.Mutex
	c := closingClient(t, nodes, redlock.WithNodeTimeout(2*time.Second))
	m := c.NewMutex("down", redlock.WithErrorHandler(func(err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
	}))
	assert.PanicsWithValue(t, "redlock: unlock of unlocked mutex", m.Unlock)
	m.Lock()
	//lint:ignore SA2001 the test is about Unlock itself
	m.Unlock()
	assert.PanicsWithValue(t, "redlock: unlock of unlocked mutex", m.Unlock, "second Unlock")

	m.Lock()
	kill()
	assert.NotPanics(t, m.Unlock)
	mu.Lock()
	require.Len(t, reported, 1)
	assert.ErrorIs(t, reported[0], redlock.ErrNoQuorum)
	mu.Unlock()
	assert.PanicsWithValue(t, "redlock: unlock of unlocked mutex", m.Unlock, "a failed release still unlocks")
}

// TestMutexContextAndTryLock: LockContext gives up with ctx and leaves the Mutex unlocked;
// TryLock fails while another holds it; bad input is reported.
func TestMutexContextAndTryLock(t *testing.T) {
	bubble(t, mutexContextAndTryLock)
}

func mutexContextAndTryLock(t *testing.T) {
	nodes, _ := simNodes(t, 3)
	a, b := closingClient(t, nodes), closingClient(t, nodes)
	ma, mb := a.NewMutex("ctx"), b.NewMutex("ctx")
	ma.Lock()
	assert.False(t, mb.TryLock())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := mb.LockContext(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, redlock.ErrHeld)
	assert.Equal(t, 100*time.Millisecond, time.Since(start), "LockContext did not give up with its ctx")
	assert.PanicsWithValue(t, "redlock: unlock of unlocked mutex", mb.Unlock, "a failed LockContext must not lock")

	// A second goroutine of the same Client queues locally and gives up with its ctx.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	start = time.Now()
	require.ErrorIs(t, a.NewMutex("ctx").LockContext(ctx2), context.DeadlineExceeded)
	assert.Equal(t, 50*time.Millisecond, time.Since(start), "LockContext did not give up with its ctx")
	ma.Unlock()
	require.True(t, mb.TryLock())
	mb.Unlock()

	bad := a.NewMutex("")
	require.ErrorIs(t, bad.LockContext(context.Background()), redlock.ErrInvalid)
	assert.False(t, bad.TryLock())
	assert.Panics(t, bad.Lock)
	require.ErrorIs(t, a.NewMutex("x", redlock.WithTTL(-1)).LockContext(context.Background()), redlock.ErrInvalid)
	var zero redlock.Mutex
	require.ErrorIs(t, zero.LockContext(context.Background()), redlock.ErrInvalid)
	assert.True(t, errors.Is(zero.LockContext(context.Background()), redlock.ErrInvalid))
	assert.ErrorContains(t, zero.LockContext(context.Background()), "zero Mutex (use Client.NewMutex)")
}

// TestMutexUnlockErrorGoesToTheLogger: without an error handler, a failed release in Unlock
// is logged through WithLogger.
func TestMutexUnlockErrorGoesToTheLogger(t *testing.T) {
	bubble(t, mutexUnlockErrorGoesToTheLogger)
}

func mutexUnlockErrorGoesToTheLogger(t *testing.T) {
	nodes, servers := simNodes(t, 3)
	var logs syncBuffer
	c := closingClient(t, nodes, redlock.WithNodeTimeout(200*time.Millisecond),
		redlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	m := c.NewMutex("logged")
	m.Lock()
	for _, s := range servers {
		s.Crash()
	}
	assert.NotPanics(t, m.Unlock)
	assert.Contains(t, logs.String(), "redlock: unlock")
	assert.Contains(t, logs.String(), "no quorum")
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMutexDoesNotBargeAheadOfWaiters: a holder that unlocks and locks again at once, while
// another process waits, goes after it: the waiter holds the lock first.
func TestMutexDoesNotBargeAheadOfWaiters(t *testing.T) {
	bubble(t, mutexDoesNotBargeAheadOfWaiters)
}

func mutexDoesNotBargeAheadOfWaiters(t *testing.T) {
	nodes, servers := simNodes(t, 3)
	holder := closingClient(t, nodes, redlock.WithNodeTimeout(time.Second)).NewMutex("turns")
	waiter := closingClient(t, nodes, redlock.WithNodeTimeout(time.Second)).NewMutex("turns")
	holder.Lock()

	order := make(chan string, 2)
	go func() {
		waiter.Lock()
		order <- "waiter"
		waiter.Unlock()
	}()
	synctest.Wait()
	for i, s := range servers {
		n, _ := s.Miniredis().ZMembers(core.NewKeys("redlock:", "turns").Queue)
		require.Len(t, n, 1, "the waiter is not queued on server %d", i)
	}
	// The holder's next wait starts later than the waiter's: turns go by when a wait
	// started (a tie, at one instant of the bubble's clock, goes by waiter id).
	time.Sleep(time.Millisecond)
	holder.Unlock()
	holder.Lock()
	order <- "holder"
	holder.Unlock()
	assert.Equal(t, "waiter", <-order, "the holder locked again ahead of the waiting process")
}

// TestMutexTryLockFailsWhileOthersWait: a free lock that another process waits for (it is
// queued on the nodes) is not taken by TryLock; once the queue is empty, it is.
func TestMutexTryLockFailsWhileOthersWait(t *testing.T) {
	bubble(t, mutexTryLockFailsWhileOthersWait)
}

func mutexTryLockFailsWhileOthersWait(t *testing.T) {
	nodes, sims := simNodes(t, 3)
	servers := make([]*miniredis.Miniredis, len(sims))
	for i, s := range sims {
		servers[i] = s.Miniredis()
	}
	m := closingClient(t, nodes).NewMutex("try")
	k := core.NewKeys("redlock:", "try")
	for _, s := range servers {
		_, err := s.ZAdd(k.Queue, 1, "other")
		require.NoError(t, err)
		_, err = s.ZAdd(k.Alive, float64(time.Now().Add(time.Hour).UnixMilli()), "other")
		require.NoError(t, err)
	}
	assert.False(t, m.TryLock(), "TryLock took a free lock that another process waits for")
	for _, s := range servers {
		s.Del(k.Queue)
		s.Del(k.Alive)
	}
	require.True(t, m.TryLock(), "TryLock failed on a free lock no one waits for")
	m.Unlock()
}

// TestMutexToken: a Mutex made WithFencing(true) (or of a Client given it) has a token
// while locked, from the counter its name's Leases and RWMutex writers share, strictly
// increasing from holder to holder; without the option, and when unlocked, Token is 0; the
// calls whose holdings always carry a token refuse the option. Over 3 real servers (a
// token that fewer than a quorum gave is raised) and one miniredis.
func TestMutexToken(t *testing.T) {
	real, _ := realNodes(t, 3)
	mini, _ := miniNodes(t, 1)
	for _, tc := range []struct {
		name  string
		nodes []redlock.Node
	}{{"3 real servers", real}, {"1 miniredis", mini}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t, time.Minute)
			c := newClient(t, tc.nodes, patient)
			plain := c.NewMutex("tokens")
			require.NoError(t, plain.LockContext(ctx))
			assert.Zero(t, plain.Token(), "a Mutex made without WithFencing(true)")
			require.NoError(t, plain.UnlockContext(ctx))

			m := c.NewMutex("tokens", redlock.WithFencing(true))
			assert.Zero(t, m.Token(), "unlocked")
			var last uint64
			for i := range 3 {
				require.NoError(t, m.LockContext(ctx))
				tok := m.Token()
				assert.Greater(t, tok, last, "holding %d", i)
				last = tok
				require.NoError(t, m.UnlockContext(ctx))
				assert.Zero(t, m.Token(), "unlocked")

				l, err := c.Acquire(ctx, "tokens")
				require.NoError(t, err)
				assert.Greater(t, l.Token(), last, "a Lease after the Mutex")
				last = l.Token()
				require.NoError(t, l.Release(ctx))
			}

			both := c.NewMutexAll([]string{"tokens", "other"}, redlock.WithFencing(true))
			require.NoError(t, both.LockContext(ctx))
			assert.Greater(t, both.Token(), last, "a lock over two names, after the name's last token")
			require.NoError(t, both.UnlockContext(ctx))

			fenced := newClient(t, tc.nodes, patient, redlock.WithFencing(true))
			byDefault := fenced.NewMutex("tokens")
			require.NoError(t, byDefault.LockContext(ctx))
			assert.Greater(t, byDefault.Token(), last, "a Mutex of a Client given WithFencing(true)")
			require.NoError(t, byDefault.UnlockContext(ctx))
		})
	}

	t.Run("refused where a token is always given", func(t *testing.T) {
		ctx := ctxT(t, time.Minute)
		c := newClient(t, mini, patient)
		fencing := redlock.WithFencing(true)
		_, err := c.Acquire(ctx, "refused", fencing)
		assert.ErrorIs(t, err, redlock.ErrInvalid, "Acquire")
		_, err = c.TryAcquire(ctx, "refused", fencing)
		assert.ErrorIs(t, err, redlock.ErrInvalid, "TryAcquire")
		assert.ErrorIs(t, c.Do(ctx, "refused", func(context.Context) error { return nil }, fencing), redlock.ErrInvalid, "Do")
		assert.ErrorIs(t, c.NewRWMutex("refused", fencing).LockContext(ctx), redlock.ErrInvalid, "NewRWMutex")
		_, err = c.NewSemaphore("refused", 2, fencing).TryAcquire(ctx)
		assert.ErrorIs(t, err, redlock.ErrInvalid, "NewSemaphore")
		_, err = c.NewElection("refused", fencing).Campaign(ctx, "v")
		assert.ErrorIs(t, err, redlock.ErrInvalid, "NewElection")
		assert.ErrorContains(t, err, `"refused"`, "the error names the lock")
	})
}
