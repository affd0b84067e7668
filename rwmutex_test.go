package redlock_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/go-redlock/redlock/internal/simnet"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rwSetups are the node sets the RWMutex tests run on: three simulated servers (in a
// bubble: see run), redis-server processes at N = 1, 3 and 5, and a real 3-master Redis
// Cluster through one go-redis cluster client. Each returns a function that makes one more
// Node set over the same servers (another process's connections).
var rwSetups = []rwSetup{
	{"sim/N=3", true, func(t *testing.T) func() []redlock.Node {
		servers := simnet.NewServers(t, 3)
		return func() []redlock.Node { return simnet.Nodes(t, servers) }
	}},
	{"redis-server/N=1", false, realSetup(1)},
	{"redis-server/N=3", false, realSetup(3)},
	{"redis-server/N=5", false, realSetup(5)},
	{"cluster", false, func(t *testing.T) func() []redlock.Node {
		addrs := redistest.StartCluster(t, 3).Addrs()
		return func() []redlock.Node {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
			t.Cleanup(func() { _ = c.Close() })
			n := goredis.New(c)
			t.Cleanup(func() { _ = n.Close() })
			return []redlock.Node{n}
		}
	}},
}

// rwSetup is a node set of the RWMutex tests.
type rwSetup struct {
	name  string
	sim   bool // simulated servers: the test runs in a bubble
	nodes func(t *testing.T) func() []redlock.Node
}

// run runs f as a subtest over s's node sets, in a bubble if s is simulated.
func (s rwSetup) run(t *testing.T, f func(t *testing.T, nodes func() []redlock.Node)) {
	t.Run(s.name, func(t *testing.T) {
		if s.sim {
			bubble(t, func(t *testing.T) { f(t, s.nodes(t)) })
			return
		}
		f(t, s.nodes(t))
	})
}

func realSetup(n int) func(t *testing.T) func() []redlock.Node {
	return func(t *testing.T) func() []redlock.Node {
		servers := realServers(t, n)
		return func() []redlock.Node { return nodesFor(t, servers) }
	}
}

// rwOptions are the options of the RWMutex tests' clients: a node timeout a loaded 2-core
// machine under -race keeps to, and short retries.
var rwOptions = []redlock.Option{redlock.WithNodeTimeout(time.Second), redlock.WithRetry(time.Millisecond, 5*time.Millisecond)}

// TestRWMutexReadersShare: readers in two processes hold the lock at once, which a writer
// in either then cannot take; once they unlock, it can, and readers then cannot.
func TestRWMutexReadersShare(t *testing.T) {
	for _, s := range rwSetups {
		s.run(t, func(t *testing.T, nodes func() []redlock.Node) {
			a := closingClient(t, nodes(), rwOptions...).NewRWMutex("shared")
			b := closingClient(t, nodes(), rwOptions...).NewRWMutex("shared")
			ctx := ctxT(t, time.Minute)
			require.NoError(t, a.RLockContext(ctx))
			require.NoError(t, b.RLockContext(ctx), "a second reader was kept out by the first")
			require.True(t, b.TryRLock(), "a third reader was kept out")
			assert.False(t, a.TryLock(), "a writer took the lock while readers hold it")
			b.RUnlock()
			b.RUnlock()
			assert.False(t, b.TryLock(), "a writer took the lock while a reader holds it")
			a.RUnlock()
			require.True(t, b.TryLock(), "a writer was kept out once the readers unlocked")
			assert.NotZero(t, b.Token(), "a write holding has a fencing token")
			assert.False(t, a.TryRLock(), "a reader took the lock while a writer holds it")
			b.Unlock()
		})
	}
}

// TestRWMutexExcludes: 3 clients x 8 goroutines mix reads and writes; a writer never
// overlaps a reader or another writer, and readers do overlap.
func TestRWMutexExcludes(t *testing.T) {
	t.Parallel() // see bubble_test.go
	const clients, goroutines, rounds = 3, 8, 8
	for _, s := range rwSetups {
		s.run(t, func(t *testing.T, nodes func() []redlock.Node) {
			var (
				readers, writers atomic.Int32
				overlap          atomic.Int32 // a writer with anyone else
				shared           atomic.Int32 // readers seen together
				wg               sync.WaitGroup
			)
			ctx := ctxT(t, 3*time.Minute)
			for range clients {
				rw := closingClient(t, nodes(), rwOptions...).NewRWMutex("mixed")
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range rounds {
							if (g+i)%4 == 0 { // a quarter of the holdings write
								if !assert.NoError(t, rw.LockContext(ctx)) {
									return
								}
								if writers.Add(1) != 1 || readers.Load() != 0 {
									overlap.Add(1)
								}
								runtime.Gosched()
								writers.Add(-1)
								assert.NoError(t, rw.UnlockContext(ctx))
								continue
							}
							if !assert.NoError(t, rw.RLockContext(ctx)) {
								return
							}
							if readers.Add(1) > 1 {
								shared.Add(1)
							}
							if writers.Load() != 0 {
								overlap.Add(1)
							}
							time.Sleep(time.Millisecond)
							readers.Add(-1)
							assert.NoError(t, rw.RUnlockContext(ctx))
						}
					}()
				}
			}
			wg.Wait()
			require.Zero(t, overlap.Load(), "a writer overlapped another holder")
			assert.Positive(t, shared.Load(), "readers never held the lock together")
		})
	}
}

// TestRWMutexWriterIsNotStarved: while readers in two processes keep taking the lock,
// each before the last lets go, a writer gets it within a bound, and the readers get it
// back after.
func TestRWMutexWriterIsNotStarved(t *testing.T) {
	for _, s := range []rwSetup{rwSetups[0], rwSetups[2]} { // N = 3
		s.run(t, func(t *testing.T, nodes func() []redlock.Node) { rwMutexWriterIsNotStarved(t, s.sim, nodes) })
	}
}

func rwMutexWriterIsNotStarved(t *testing.T, sim bool, nodes func() []redlock.Node) {
	r := closingClient(t, nodes(), rwOptions...).NewRWMutex("stream")
	w := closingClient(t, nodes(), rwOptions...).NewRWMutex("stream")
	ctx := ctxT(t, time.Minute)
	stop := make(chan struct{})
	var reads atomic.Int64
	var wg sync.WaitGroup
	for i := range 4 { // at least one reader holds at any time
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 5 * time.Millisecond) // staggered
			for {
				select {
				case <-stop:
					return
				default:
				}
				if !assert.NoError(t, r.RLockContext(ctx)) {
					return
				}
				reads.Add(1)
				time.Sleep(20 * time.Millisecond)
				assert.NoError(t, r.RUnlockContext(ctx))
			}
		}()
	}
	for reads.Load() < 8 {
		time.Sleep(time.Millisecond) // in a bubble, virtual: the readers' first rounds
	}
	start := time.Now()
	require.NoError(t, w.LockContext(ctx))
	waited := time.Since(start)
	before := reads.Load()
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, before, reads.Load(), "a reader took the lock while the writer holds it")
	w.Unlock()
	for deadline := time.Now().Add(generous); reads.Load() == before; {
		require.True(t, time.Now().Before(deadline), "the readers did not get the lock back")
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	// Readers hold 20 ms each: the writer waits for those holding when it came, and none
	// after (on redis-server, within a generous bound).
	bound := 3 * time.Second
	if sim {
		bound = 20 * time.Millisecond
	}
	assert.LessOrEqual(t, waited, bound, "the writer waited %v behind a stream of readers", waited)
}

// TestRWMutexCrashedReaderExpires: a reader whose process stops (its client can no longer
// reach the nodes, so its holding is not extended) keeps a writer out no longer than its
// TTL: the writer gets the lock as the share's TTL runs out.
func TestRWMutexCrashedReaderExpires(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	opts := append(append([]redlock.Option{}, rwOptions...), redlock.WithTTL(ttl), redlock.WithNodeTimeout(500*time.Millisecond))
	run := func(t *testing.T, sim bool, clients []*redis.Client, writerNodes []redlock.Node) {
		nodes := make([]redlock.Node, len(clients))
		for i, c := range clients {
			nodes[i] = goredis.New(c)
		}
		crashed := newClient(t, nodes, opts...).NewRWMutex("crash")
		ctx := ctxT(t, time.Minute)
		start := time.Now()
		require.NoError(t, crashed.RLockContext(ctx))
		for _, c := range clients {
			require.NoError(t, c.Close())
		}
		w := closingClient(t, writerNodes, opts...).NewRWMutex("crash")
		require.NoError(t, w.LockContext(ctx))
		waited := time.Since(start)
		if sim {
			assert.Equal(t, ttl, waited, "the writer did not take the lock as the reader's share ran out")
		} else {
			assert.Greater(t, waited, ttl/2, "the writer took the lock while the reader's share was still valid")
			assert.Less(t, waited, ttl+generous, "a crashed reader kept the writer out past its TTL")
		}
		w.Unlock()
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

// TestRWMutexTokensIncrease: each write holding's token is larger than the last, across
// RWMutexes and Leases of one name, and a read holding has none.
func TestRWMutexTokensIncrease(t *testing.T) {
	nodes := realSetup(3)(t)
	c := newClient(t, nodes(), rwOptions...)
	rw := c.NewRWMutex("tokens")
	ctx := ctxT(t, time.Minute)
	var last uint64
	for i := range 4 {
		var token uint64
		if i%2 == 0 {
			require.NoError(t, rw.LockContext(ctx))
			token = rw.Token()
			rw.Unlock()
		} else {
			l, err := c.Acquire(ctx, "tokens")
			require.NoError(t, err)
			token = l.Token()
			require.NoError(t, l.Release(ctx))
		}
		assert.Greater(t, token, last, "holding %d", i)
		last = token
	}
	require.NoError(t, rw.RLockContext(ctx))
	assert.Zero(t, rw.Token(), "a read holding has a token")
	rw.RUnlock()
}

// TestRWMutexAndMutexAreOneLock: a Mutex of the same name counts as a writer.
func TestRWMutexAndMutexAreOneLock(t *testing.T) {
	bubble(t, rwMutexAndMutexAreOneLock)
}

func rwMutexAndMutexAreOneLock(t *testing.T) {
	nodes, servers := simNodes(t, 1)
	rw := closingClient(t, nodes).NewRWMutex("one")
	m := closingClient(t, simnet.Nodes(t, servers)).NewMutex("one")
	require.True(t, m.TryLock())
	assert.False(t, rw.TryRLock(), "a reader took the lock from a Mutex")
	assert.False(t, rw.TryLock())
	m.Unlock()
	require.True(t, rw.TryRLock())
	assert.False(t, m.TryLock(), "a Mutex took the lock from a reader")
	rw.RUnlock()
	assert.True(t, m.TryLock())
	m.Unlock()
}

// TestRWMutexMisuse: unlocking an RWMutex that is not locked (for that mode) panics, as
// with sync.RWMutex; a bad name is an error that names the call, false, or a panic.
func TestRWMutexMisuse(t *testing.T) {
	bubble(t, rwMutexMisuse)
}

func rwMutexMisuse(t *testing.T) {
	nodes, _ := simNodes(t, 1)
	c := closingClient(t, nodes)
	rw := c.NewRWMutex("misuse")
	assert.PanicsWithValue(t, "redlock: Unlock of unlocked RWMutex", rw.Unlock)
	assert.PanicsWithValue(t, "redlock: RUnlock of unlocked RWMutex", rw.RUnlock)
	require.True(t, rw.TryRLock())
	assert.PanicsWithValue(t, "redlock: Unlock of unlocked RWMutex", rw.Unlock, "a read lock was unlocked as a write lock")
	rw.RUnlock()
	require.True(t, rw.TryLock())
	assert.PanicsWithValue(t, "redlock: RUnlock of unlocked RWMutex", rw.RUnlock, "a write lock was unlocked as a read lock")
	rw.Unlock()

	bad := c.NewRWMutex("")
	err := bad.RLockContext(context.Background())
	require.ErrorIs(t, err, redlock.ErrInvalid)
	assert.Contains(t, err.Error(), "NewRWMutex")
	require.ErrorIs(t, bad.LockContext(context.Background()), redlock.ErrInvalid)
	assert.False(t, bad.TryRLock())
	assert.False(t, bad.TryLock())
	assert.Panics(t, bad.RLock)
	var zero redlock.RWMutex
	require.ErrorIs(t, zero.RLockContext(context.Background()), redlock.ErrInvalid)
	assert.ErrorContains(t, zero.RLockContext(context.Background()), "zero RWMutex (use Client.NewRWMutex)")
	assert.ErrorContains(t, zero.LockContext(context.Background()), "zero RWMutex (use Client.NewRWMutex)")
}

// TestRWMutexRLocker: RLocker's Lock and Unlock take and give back a read holding.
func TestRWMutexRLocker(t *testing.T) {
	bubble(t, rwMutexRLocker)
}

func rwMutexRLocker(t *testing.T) {
	nodes, _ := simNodes(t, 1)
	rw := closingClient(t, nodes).NewRWMutex("rlocker")
	var l sync.Locker = rw.RLocker()
	l.Lock()
	assert.True(t, rw.TryRLock(), "RLocker's Lock took more than a read holding")
	assert.False(t, rw.TryLock())
	rw.RUnlock()
	l.Unlock()
	assert.True(t, rw.TryLock(), "RLocker's Unlock did not give the holding back")
	rw.Unlock()
}

// TestRWMutexLost: Lost closes when a read holding is lost (its keys deleted behind its
// back), whichever of several it is; not when the holdings are unlocked.
func TestRWMutexLost(t *testing.T) {
	bubble(t, rwMutexLost)
}

func rwMutexLost(t *testing.T) {
	nodes, servers := simNodes(t, 1)
	rw := closingClient(t, nodes, redlock.WithTTL(300*time.Millisecond)).NewRWMutex("lost")
	ctx := ctxT(t, time.Minute)
	require.NoError(t, rw.RLockContext(ctx))
	require.NoError(t, rw.RLockContext(ctx))
	lost := rw.Lost()
	select {
	case <-lost:
		t.Fatal("Lost closed while the holdings are held")
	case <-time.After(400 * time.Millisecond): // past the TTL: the holdings extend themselves
	}
	deleted := time.Now()
	servers[0].Miniredis().Del(lockKey("lost") + ":readers")
	servers[0].Miniredis().Del(lockKey("lost"))
	<-lost
	// The holdings extend themselves every two thirds of the 295 ms validity: the third
	// extension, at 590 ms, finds the keys gone.
	assert.Equal(t, 190000001*time.Nanosecond, time.Since(deleted), "Lost did not close at the next extension")
	// Lost closes at the first holding's failed extension; the second's, due at the same
	// instant, may not have run yet (a release before it, within the validity, finding no
	// share and no other owner, counts as let go).
	synctest.Wait()
	require.ErrorIs(t, rw.RUnlockContext(ctx), redlock.ErrNotHeld)
	require.ErrorIs(t, rw.RUnlockContext(ctx), redlock.ErrNotHeld)

	require.NoError(t, rw.RLockContext(ctx))
	kept := rw.Lost()
	rw.RUnlock()
	synctest.Wait()
	select {
	case <-kept:
		t.Fatal("Lost closed on RUnlock")
	default:
	}
}

// TestRWMutexLostCostsNoGoroutinePerCall: Lost called again and again while several read
// holdings last (as in a select loop) returns one channel, and leaves no goroutine behind
// per call; it still closes when one of the holdings is lost.
func TestRWMutexLostCostsNoGoroutinePerCall(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 1)
		rw := closingClient(t, nodes, redlock.WithTTL(300*time.Millisecond)).NewRWMutex("lost")
		ctx := ctxT(t, time.Minute)
		require.NoError(t, rw.RLockContext(ctx))
		require.NoError(t, rw.RLockContext(ctx))
		first := rw.Lost()
		synctest.Wait()
		assert.Equal(t, 2, lostWatchers(), "one watcher per holding")
		same := true
		for range 100 {
			same = rw.Lost() == first && same
		}
		assert.True(t, same, "Lost returned another channel while the same holdings last")
		synctest.Wait()
		assert.Equal(t, 2, lostWatchers(), "Lost left goroutines behind")
		servers[0].Miniredis().Del(lockKey("lost") + ":readers")
		servers[0].Miniredis().Del(lockKey("lost"))
		<-first
		// Both holdings extend at one instant: let the other see its loss too. (A release
		// that finds nothing of its own, within its validity, counts as let go.)
		synctest.Wait()
		require.ErrorIs(t, rw.RUnlockContext(ctx), redlock.ErrNotHeld)
		require.ErrorIs(t, rw.RUnlockContext(ctx), redlock.ErrNotHeld)
	})
}

// lostWatchers counts the goroutines of the process that watch a read holding for
// RWMutex.Lost. It counts them by their function, not with runtime.NumGoroutine: the
// goroutines of earlier tests, outside the bubble, start and end meanwhile (a timer's).
func lostWatchers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "redlock.(*RWMutex).Lost.func")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestRWMutexLostSaysSoAtOnce: with several read holdings, one of which was lost, Lost
// returns a closed channel, also when it had returned an open one for earlier holdings,
// all of them since unlocked.
func TestRWMutexLostSaysSoAtOnce(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 1)
		rw := closingClient(t, nodes, redlock.WithTTL(300*time.Millisecond)).NewRWMutex("lost")
		ctx := ctxT(t, time.Minute)
		require.NoError(t, rw.RLockContext(ctx))
		require.NoError(t, rw.RLockContext(ctx))
		_ = rw.Lost() // open, for these two holdings
		rw.RUnlock()
		rw.RUnlock()
		require.NoError(t, rw.RLockContext(ctx))
		require.NoError(t, rw.RLockContext(ctx))
		servers[0].Miniredis().Del(lockKey("lost") + ":readers")
		servers[0].Miniredis().Del(lockKey("lost"))
		time.Sleep(time.Second) // past the next extensions, which find the holdings lost
		synctest.Wait()
		for range 20 {
			select {
			case <-rw.Lost():
			default:
				t.Fatal("Lost returned an open channel while a holding is lost")
			}
		}
		require.ErrorIs(t, rw.RUnlockContext(ctx), redlock.ErrNotHeld)
		require.ErrorIs(t, rw.RUnlockContext(ctx), redlock.ErrNotHeld)
	})
}

// TestReaderOvertakesASecondWriterOfItsClient: the order's one exception (see RWMutex): a
// writer of a Client that waits in the Client's queue behind another writer of it has no
// place on the nodes yet, so a reader of that Client that starts waiting after it goes
// first.
func TestReaderOvertakesASecondWriterOfItsClient(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, _ := simNodes(t, 3)
		c := closingClient(t, nodes)
		ctx := ctxT(t, time.Minute)
		a, b, r := c.NewRWMutex("order"), c.NewRWMutex("order"), c.NewRWMutex("order")
		require.NoError(t, a.LockContext(ctx))
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		wg.Go(func() {
			assert.NoError(t, b.LockContext(ctx))
			mu.Lock()
			order = append(order, "writer")
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			b.Unlock()
		})
		synctest.Wait() // b waits in the Client's queue
		wg.Go(func() {
			assert.NoError(t, r.RLockContext(ctx))
			mu.Lock()
			order = append(order, "reader")
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			r.RUnlock()
		})
		synctest.Wait() // r waits on the nodes
		// Time passes, as it does outside a bubble: b's ticket, taken once it leaves the
		// Client's queue, is then later than r's. Equal tickets are a tie, which the nodes
		// break by waiter id.
		time.Sleep(time.Millisecond)
		a.Unlock()
		wg.Wait()
		assert.Equal(t, []string{"reader", "writer"}, order)
	})
}
