package redlock_test

import (
	"context"
	"runtime"
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

// TestSemaphoreBoundsHolders: 3 clients x 8 goroutines take permits of a semaphore of 3
// and hold them a moment; never more than 3 hold at once, and more than 1 do at some
// point; then 3 permits are taken one after another, and a fourth is refused.
func TestSemaphoreBoundsHolders(t *testing.T) {
	const clients, goroutines, rounds, permits = 3, 8, 6, 3
	for _, s := range rwSetups {
		t.Run(s.name, func(t *testing.T) {
			nodes := s.nodes(t)
			var holders, most atomic.Int32
			var wg sync.WaitGroup
			ctx := ctxT(t, 3*time.Minute)
			for range clients {
				sem := newClient(t, nodes(), rwOptions...).NewSemaphore("pool", permits)
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
			sem := newClient(t, nodes(), rwOptions...).NewSemaphore("pool", permits)
			for range permits {
				require.Eventually(t, func() bool {
					_, err := sem.TryAcquire(ctx)
					return err == nil
				}, 10*time.Second, 10*time.Millisecond, "a free permit was refused")
			}
			_, err := sem.TryAcquire(ctx)
			require.ErrorIs(t, err, redlock.ErrHeld, "a permit beyond the number")
		})
	}
}

// TestSemaphoreTurns: with every permit held, a waiter that came first gets the next
// permit released, before one that came later, and no newcomer takes it in between.
func TestSemaphoreTurns(t *testing.T) {
	servers := realServers(t, 3)
	nodes := func() []redlock.Node { return nodesFor(t, servers) }
	// queued reports whether want waiters wait for the lock called name on every server:
	// queued, and not holding it (a waiter handed the lock keeps its place until it lets go).
	queued := func(part string, want int) func() bool {
		k := core.NewPartKeys("redlock:", "turns", part)
		return func() bool {
			for _, s := range servers {
				ids, err := s.Do("ZRANGE", k.Queue, "0", "-1")
				if err != nil {
					return false
				}
				holder, _ := s.Do("GET", k.Lock)
				h, _ := holder.(string)
				n := 0
				for _, id := range ids.([]any) {
					if !strings.HasPrefix(h, id.(string)+".") {
						n++
					}
				}
				if n != want {
					return false
				}
			}
			return true
		}
	}
	ctx := ctxT(t, time.Minute)
	holder := newClient(t, nodes(), rwOptions...).NewSemaphore("turns", 2)
	a, err := holder.Acquire(ctx)
	require.NoError(t, err)
	b, err := holder.TryAcquire(ctx)
	require.NoError(t, err)
	_, err = holder.TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrHeld, "a third permit of two")

	got := make(chan string, 2)
	wait := func(who string) {
		l, err := newClient(t, nodes(), rwOptions...).NewSemaphore("turns", 2).Acquire(ctx)
		if assert.NoError(t, err) {
			got <- who
			<-ctx.Done()
			_ = l.Release(context.Background())
		}
	}
	go wait("first")
	// The first waiter waits on both permits: it is queued on each.
	require.Eventually(t, queued("permit/0", 1), 5*time.Second, time.Millisecond)
	require.Eventually(t, queued("permit/1", 1), 5*time.Second, time.Millisecond)
	go wait("second")
	// The second waits for its turn, queued on the waiters' lock.
	require.Eventually(t, queued("turn", 1), 5*time.Second, time.Millisecond)
	_, err = newClient(t, nodes(), rwOptions...).NewSemaphore("turns", 2).TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrHeld, "a newcomer was not refused while waiters wait")

	require.NoError(t, a.Release(ctx))
	select {
	case who := <-got:
		assert.Equal(t, "first", who, "the released permit went to a later waiter")
	case <-time.After(5 * time.Second):
		t.Fatal("no waiter got the released permit")
	}
	// The second is now first, and waits on both permits.
	require.Eventually(t, queued("permit/0", 1), 5*time.Second, time.Millisecond)
	require.Eventually(t, queued("permit/1", 1), 5*time.Second, time.Millisecond)
	_, err = newClient(t, nodes(), rwOptions...).NewSemaphore("turns", 2).TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrHeld, "a newcomer took a permit while a waiter waits")
	require.NoError(t, b.Release(ctx))
	select {
	case who := <-got:
		assert.Equal(t, "second", who)
	case <-time.After(5 * time.Second):
		t.Fatal("the second waiter did not get the next permit")
	}
}

// TestSemaphoreCrashedHolderFreesByTTL: a holder whose process stops (its client can no
// longer reach the nodes) keeps its permit no longer than its TTL.
func TestSemaphoreCrashedHolderFreesByTTL(t *testing.T) {
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
	_, err := newClient(t, nodes, opts...).NewSemaphore("crash", 1).Acquire(ctx)
	require.NoError(t, err)
	for _, c := range clients {
		require.NoError(t, c.Close())
	}
	start := time.Now()
	l, err := newClient(t, nodesFor(t, servers), opts...).NewSemaphore("crash", 1).Acquire(ctx)
	require.NoError(t, err)
	waited := time.Since(start)
	assert.Greater(t, waited, ttl/2, "a permit was taken while its holder's lease was valid")
	assert.Less(t, waited, ttl+2*time.Second, "a crashed holder kept its permit past its TTL")
	require.NoError(t, l.Release(ctx))
}

// TestSemaphorePermitsMustAgree: a holder that counts another number of permits than the
// others gets an error that says so, and no permit.
func TestSemaphorePermitsMustAgree(t *testing.T) {
	nodes, _ := miniNodes(t, 3)
	c := newClient(t, nodes)
	ctx := ctxT(t, time.Minute)
	l, err := c.NewSemaphore("agree", 2).Acquire(ctx)
	require.NoError(t, err)
	for _, try := range []func(*redlock.Semaphore, context.Context) (*redlock.Lease, error){(*redlock.Semaphore).TryAcquire, (*redlock.Semaphore).Acquire} {
		_, err = try(c.NewSemaphore("agree", 3), ctx)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		assert.ErrorContains(t, err, "has 2 permits")
	}
	require.NoError(t, l.Release(ctx))
}

// TestSemaphoreBadInput: permits out of range, a bad name or option: ErrInvalid, at once.
func TestSemaphoreBadInput(t *testing.T) {
	nodes, _ := miniNodes(t, 1)
	c := newClient(t, nodes)
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
// of it to the next, extends itself as its options say, and frees the permit on Release.
func TestSemaphorePermitIsALease(t *testing.T) {
	nodes, _ := miniNodes(t, 1)
	c := newClient(t, nodes, redlock.WithTTL(300*time.Millisecond), redlock.WithAutoExtend(true))
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
}
