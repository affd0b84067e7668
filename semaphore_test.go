package redlock_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/simnet"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSemaphoreBoundsHolders: 3 clients x 8 goroutines take permits of a semaphore of 3
// and hold them a moment; never more than 3 hold at once, and more than 1 do at some
// point; then 3 permits are taken one after another, and a fourth is refused.
func TestSemaphoreBoundsHolders(t *testing.T) {
	t.Parallel() // see bubble_test.go
	const clients, goroutines, rounds, permits = 3, 8, 6, 3
	for _, s := range rwSetups {
		s.run(t, func(t *testing.T, nodes func() []redlock.Node) {
			var holders, most atomic.Int32
			var wg sync.WaitGroup
			ctx := ctxT(t, 3*time.Minute)
			for range clients {
				sem := closingClient(t, nodes(), rwOptions...).NewSemaphore("pool", permits)
				for range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range rounds {
							l, err := sem.Acquire(ctx)
							if !assert.NoError(t, err) {
								return
							}
							n := holders.Add(1)
							for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
							}
							runtime.Gosched()
							time.Sleep(2 * time.Millisecond)
							holders.Add(-1)
							assert.NoError(t, l.Release(ctx))
						}
					}()
				}
			}
			wg.Wait()
			assert.LessOrEqual(t, most.Load(), int32(permits), "more holders than permits")
			assert.Greater(t, most.Load(), int32(1), "the permits were never shared")

			// All of them at once, taken one after another (once the waits above have left
			// the permits' queues: a waiter that leaves does so in the background).
			sem := closingClient(t, nodes(), rwOptions...).NewSemaphore("pool", permits)
			for range permits {
				free := func() bool {
					_, err := sem.TryAcquire(ctx)
					return err == nil
				}
				if s.sim {
					synctest.Wait()
					require.True(t, free(), "a free permit was refused")
					continue
				}
				require.Eventually(t, free, generous, 10*time.Millisecond, "a free permit was refused")
			}
			_, err := sem.TryAcquire(ctx)
			require.ErrorIs(t, err, redlock.ErrHeld, "a permit beyond the number")
		})
	}
}

// TestSemaphoreTurns: with every permit held, a waiter that came first gets the next
// permit released, before one that came later, and no newcomer takes it in between.
func TestSemaphoreTurns(t *testing.T) {
	t.Run("sim", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			servers := simnet.NewServers(t, 3)
			views := make([]serverView, len(servers))
			for i, s := range servers {
				views[i] = serverView{
					zrange: func(key string) []string { m, _ := s.Miniredis().ZMembers(key); return m },
					get:    func(key string) string { v, _ := s.Miniredis().Get(key); return v },
				}
			}
			semaphoreTurns(t, true, func() []redlock.Node { return simnet.Nodes(t, servers) }, views)
		})
	})
	t.Run("redis-server", func(t *testing.T) {
		servers := realServers(t, 3)
		views := make([]serverView, len(servers))
		for i, s := range servers {
			views[i] = serverView{
				zrange: func(key string) []string {
					ids, _ := s.Do("ZRANGE", key, "0", "-1")
					var out []string
					for _, id := range ids.([]any) {
						out = append(out, id.(string))
					}
					return out
				},
				get: func(key string) string { v, _ := s.Do("GET", key); h, _ := v.(string); return h },
			}
		}
		semaphoreTurns(t, false, func() []redlock.Node { return nodesFor(t, servers) }, views)
	})
}

// serverView reads a server's keys: a sorted set's members in order, a string ("" if none).
type serverView struct {
	zrange func(key string) []string
	get    func(key string) string
}

func semaphoreTurns(t *testing.T, sim bool, nodes func() []redlock.Node, servers []serverView) {
	// queued reports whether want waiters wait in the semaphore's one queue on a quorum of
	// the servers (a holder does not queue; the servers may differ: a call that lands after
	// the quorum decided, say, can leave a waiter a stray permit on one of them).
	queued := func(want int) func() bool {
		k := core.NewSemaphoreKeys("redlock:", "turns", 2)
		return func() bool {
			n := 0
			for _, s := range servers {
				if len(s.zrange(k.Queue)) == want {
					n++
				}
			}
			return n > len(servers)/2
		}
	}
	ctx := ctxT(t, time.Minute)
	holder := closingClient(t, nodes(), rwOptions...).NewSemaphore("turns", 2)
	a, err := holder.Acquire(ctx)
	require.NoError(t, err)
	b, err := holder.TryAcquire(ctx)
	require.NoError(t, err)
	_, err = holder.TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrHeld, "a third permit of two")

	got := make(chan string, 2)
	done := make(chan struct{})
	defer close(done)
	wait := func(who string) {
		l, err := closingClient(t, nodes(), rwOptions...).NewSemaphore("turns", 2).Acquire(ctx)
		if assert.NoError(t, err) {
			got <- who
			<-done
			_ = l.Release(context.Background())
		}
	}
	go wait("first")
	settle(t, sim, queued(1), "the first waiter is not queued")
	if sim {
		time.Sleep(time.Millisecond) // a later ticket: no time passed in the bubble
	}
	go wait("second")
	settle(t, sim, queued(2), "the second waiter is not queued after the first")
	_, err = closingClient(t, nodes(), rwOptions...).NewSemaphore("turns", 2).TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrHeld, "a newcomer was not refused while waiters wait")

	released := time.Now()
	require.NoError(t, a.Release(ctx))
	assert.Equal(t, "first", within(t, sim, got, "the released permit"), "the released permit went to a later waiter")
	if sim {
		assert.Equal(t, time.Duration(0), time.Since(released), "the first waiter did not get the permit at its release")
	}
	// The second is now first, and the only one queued.
	settle(t, sim, queued(1), "the second waiter is not queued alone")
	_, err = closingClient(t, nodes(), rwOptions...).NewSemaphore("turns", 2).TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrHeld, "a newcomer took a permit while a waiter waits")
	released = time.Now()
	require.NoError(t, b.Release(ctx))
	assert.Equal(t, "second", within(t, sim, got, "the next permit"))
	if sim {
		assert.Equal(t, time.Duration(0), time.Since(released), "the second waiter did not get the permit at its release")
	}
}

// TestSemaphoreCrashedHolderFreesByTTL: a holder whose process stops (its client can no
// longer reach the nodes) keeps its permit no longer than its TTL: the next gets it as the
// TTL runs out.
func TestSemaphoreCrashedHolderFreesByTTL(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	opts := append(append([]redlock.Option{}, rwOptions...), redlock.WithTTL(ttl), redlock.WithNodeTimeout(500*time.Millisecond))
	run := func(t *testing.T, sim bool, clients []*redis.Client, nextNodes []redlock.Node) {
		nodes := make([]redlock.Node, len(clients))
		for i, c := range clients {
			nodes[i] = goredis.New(c)
		}
		ctx := ctxT(t, time.Minute)
		start := time.Now()
		_, err := newClient(t, nodes, opts...).NewSemaphore("crash", 1).Acquire(ctx)
		require.NoError(t, err)
		for _, c := range clients {
			require.NoError(t, c.Close())
		}
		l, err := closingClient(t, nextNodes, opts...).NewSemaphore("crash", 1).Acquire(ctx)
		require.NoError(t, err)
		waited := time.Since(start)
		if sim {
			assert.Equal(t, ttl, waited, "the permit was not taken as its holder's TTL ran out")
		} else {
			assert.Greater(t, waited, ttl/2, "a permit was taken while its holder's lease was valid")
			assert.Less(t, waited, ttl+generous, "a crashed holder kept its permit past its TTL")
		}
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

// TestSemaphorePermitsMustAgree: a holder that counts another number of permits than the
// others gets an error that says so, and no permit.
func TestSemaphorePermitsMustAgree(t *testing.T) {
	bubble(t, semaphorePermitsMustAgree)
}

func semaphorePermitsMustAgree(t *testing.T) {
	nodes, _ := simNodes(t, 3)
	c := closingClient(t, nodes)
	ctx := ctxT(t, time.Minute)
	l, err := c.NewSemaphore("agree", 2).Acquire(ctx)
	require.NoError(t, err)
	for _, try := range []func(*redlock.Semaphore, context.Context) (*redlock.Lease, error){(*redlock.Semaphore).TryAcquire, (*redlock.Semaphore).Acquire} {
		_, err = try(c.NewSemaphore("agree", 3), ctx)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		assert.ErrorContains(t, err, "has 2 permits on node")
	}
	require.NoError(t, l.Release(ctx))
}

// TestSemaphoreCountChangesOnceNoPermitIsHeld: a Semaphore of another number of permits is
// refused while a permit of the recorded number is held, and takes over once none is (a
// rolling deploy that changes the number): it is not kept out for the record's lifetime.
func TestSemaphoreCountChangesOnceNoPermitIsHeld(t *testing.T) {
	for _, s := range rwSetups[:3] { // simulated, and redis-server at N = 1 and 3
		s.run(t, func(t *testing.T, nodes func() []redlock.Node) {
			c := closingClient(t, nodes(), rwOptions...)
			ctx := ctxT(t, time.Minute)
			// takes returns sem's Lease once no node keeps a permit of the last holder's
			// (a release leaves the nodes past its quorum to the background).
			takes := func(sem *redlock.Semaphore, what string) *redlock.Lease {
				t.Helper()
				var l *redlock.Lease
				var err error
				try := func() bool { l, err = sem.TryAcquire(ctx); return err == nil }
				if s.sim {
					synctest.Wait()
					require.True(t, try(), "%s: %v", what, err)
				} else {
					require.Eventually(t, try, generous, 10*time.Millisecond, "%s", what)
				}
				return l
			}
			three, two := c.NewSemaphore("resize", 3), c.NewSemaphore("resize", 2)
			l := takes(three, "a free Semaphore of 3 was refused")
			_, err := two.TryAcquire(ctx)
			require.ErrorIs(t, err, redlock.ErrInvalid, "a count of 2 while a holder counts 3")
			assert.ErrorContains(t, err, "has 3 permits on node")
			require.NoError(t, l.Release(ctx))

			l = takes(two, "a count of 2 was refused once no permit of 3 was held")
			_, err = three.TryAcquire(ctx)
			require.ErrorIs(t, err, redlock.ErrInvalid, "a count of 3 while a holder counts 2")
			require.NoError(t, l.Release(ctx))
			require.NoError(t, takes(three, "a count of 3 was refused once no permit of 2 was held").Release(ctx))
		})
	}
}

// TestSemaphorePermitsMustAgreeInOneClient: Semaphores of one name and Client that count
// different numbers of permits do not wait for each other locally: the one that counts
// another number than the nodes record gets ErrInvalid at once, from TryAcquire and Acquire,
// while the other holds every permit it counts.
func TestSemaphorePermitsMustAgreeInOneClient(t *testing.T) {
	bubble(t, semaphorePermitsMustAgreeInOneClient)
}

func semaphorePermitsMustAgreeInOneClient(t *testing.T) {
	nodes, _ := simNodes(t, 3)
	c := closingClient(t, nodes)
	ctx := ctxT(t, time.Minute)
	l, err := c.NewSemaphore("agree", 1).Acquire(ctx)
	require.NoError(t, err)
	start := time.Now()
	for _, try := range []func(*redlock.Semaphore, context.Context) (*redlock.Lease, error){(*redlock.Semaphore).TryAcquire, (*redlock.Semaphore).Acquire} {
		_, err = try(c.NewSemaphore("agree", 3), ctx)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		assert.ErrorContains(t, err, "has 1 permits on node")
	}
	assert.Less(t, time.Since(start), time.Second)
	require.NoError(t, l.Release(ctx))
}

// TestSemaphoreBadInput: permits out of range, a bad name or option: ErrInvalid, at once.
func TestSemaphoreBadInput(t *testing.T) {
	nodes, _ := miniNodes(t, 1)
	c := newClient(t, nodes, redlock.WithNodeTimeout(2*time.Second)) // no call is made: none may time out
	ctx := ctxT(t, time.Minute)
	for _, s := range []*redlock.Semaphore{
		c.NewSemaphore("s", 0), c.NewSemaphore("s", -1), c.NewSemaphore("s", redlock.MaxPermits+1),
		c.NewSemaphore("", 1), c.NewSemaphore("s", 1, redlock.WithTTL(-time.Second)),
	} {
		_, err := s.Acquire(ctx)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		assert.ErrorContains(t, err, "NewSemaphore")
		_, err = s.TryAcquire(ctx)
		require.ErrorIs(t, err, redlock.ErrInvalid)
	}
}

// TestSemaphorePermitIsALease: a permit has a fencing token that increases from one holder
// of it to the next (and past every token granted before, whichever permit), extends itself
// as its options say, and frees the permit on Release.
func TestSemaphorePermitIsALease(t *testing.T) {
	bubble(t, semaphorePermitIsALease)
}

func semaphorePermitIsALease(t *testing.T) {
	nodes, _ := simNodes(t, 1)
	c := closingClient(t, nodes, redlock.WithTTL(300*time.Millisecond), redlock.WithAutoExtend(true))
	ctx := ctxT(t, time.Minute)
	sem := c.NewSemaphore("lease", 1)
	l, err := sem.Acquire(ctx)
	require.NoError(t, err)
	time.Sleep(450 * time.Millisecond) // past the TTL: extended
	require.NoError(t, l.Err())
	_, err = sem.TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrHeld)
	require.NoError(t, l.Release(ctx))
	next, err := sem.TryAcquire(ctx)
	require.NoError(t, err)
	assert.Greater(t, next.Token(), l.Token())
	require.NoError(t, next.Release(ctx))

	// Three nodes, two permits: each holder's token exceeds those granted before, whichever
	// permit they held.
	nodes, _ = simNodes(t, 3)
	sem = closingClient(t, nodes).NewSemaphore("tokens", 2)
	var last uint64
	var held []*redlock.Lease
	for range 5 {
		if len(held) == 2 {
			require.NoError(t, held[0].Release(ctx))
			held = held[1:]
		}
		l, err := sem.TryAcquire(ctx)
		require.NoError(t, err)
		assert.Greater(t, l.Token(), last)
		last = l.Token()
		held = append(held, l)
	}
}
