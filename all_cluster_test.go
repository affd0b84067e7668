package redlock_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAcquireAllOnRedisCluster: on a real 3-master Redis Cluster (one Node, a go-redis
// cluster client), a set whose names share a slot (a prefix with a hash tag) is taken and
// refuses single names, and is handed over whole by the release of its last held name (the
// release touches the set's other names' keys, which it does not declare: same slot); a
// set whose names fall in different slots is taken slot by slot: all or nothing, one token
// above every name's, crossed waiters, the held slot kept while it waits for the next, and
// the loss of one slot's names; readers over several slots share and exclude writers.
func TestAcquireAllOnRedisCluster(t *testing.T) {
	t.Parallel() // see bubble_test.go
	c := redistest.StartCluster(t, 3)
	newNode := func() []redlock.Node {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		n := goredis.New(rdb)
		t.Cleanup(func() { _ = n.Close() })
		return []redlock.Node{n}
	}
	ctx := ctxT(t, time.Minute)
	held := func(name string) bool {
		v, err := c.Do("EXISTS", lockKey(name))
		return err == nil && v == int64(1)
	}
	t.Run("one slot", func(t *testing.T) {
		const prefix = "app{locks}:"
		opts := []redlock.Option{patient, redlock.WithPrefix(prefix)}
		a, b := closingClient(t, newNode(), opts...), closingClient(t, newNode(), opts...)
		set, err := a.TryAcquireAll(ctx, []string{"x", "y"})
		require.NoError(t, err)
		_, err = b.TryAcquire(ctx, "y")
		require.ErrorIs(t, err, redlock.ErrHeld)
		require.NoError(t, set.Release(ctx))

		y, err := b.TryAcquire(ctx, "y")
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			l, err := a.AcquireAll(ctx, []string{"x", "y"}, redlock.WithRetry(10*time.Second, 10*time.Second))
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		require.Eventually(t, func() bool {
			v, err := c.Do("ZCARD", prefix+"{x}:queue")
			return err == nil && v == int64(1)
		}, generous, time.Millisecond, "the set waiter did not queue")
		require.NoError(t, y.Release(ctx))
		// Its retry backoff is 10 s: within generous, only the hand-over can have woken it.
		require.NoError(t, within(t, false, got, "the set's hand-over"))
	})
	t.Run("slot by slot", func(t *testing.T) {
		// y's slot comes before x's: a set of both takes y, then x.
		require.Less(t, redistest.KeySlot(lockKey("y")), redistest.KeySlot(lockKey("x")))
		a, b := closingClient(t, newNode(), patient), closingClient(t, newNode(), patient)

		// All or nothing: with x held, y (taken first) is let go of at once.
		var before uint64
		for _, name := range []string{"x", "y"} {
			l, err := b.TryAcquire(ctx, name)
			require.NoError(t, err)
			before = max(before, l.Token())
			if name == "y" {
				require.NoError(t, l.Release(ctx))
			} else {
				defer func() { _ = l.Release(ctx) }()
				_, err := a.TryAcquireAll(ctx, []string{"x", "y"})
				require.ErrorIs(t, err, redlock.ErrHeld)
				assert.Contains(t, err.Error(), `"[x y]"`)
				assert.False(t, held("y"), "y was kept without x")
				require.NoError(t, l.Release(ctx))
			}
		}

		// One token above every name's; both refused to others; each name's next token
		// above the set's.
		set, err := a.TryAcquireAll(ctx, []string{"x", "y"})
		require.NoError(t, err)
		assert.Greater(t, set.Token(), before)
		assert.True(t, held("x") && held("y"))
		for _, name := range []string{"x", "y"} {
			_, err := b.TryAcquire(ctx, name)
			require.ErrorIs(t, err, redlock.ErrHeld, name)
		}
		require.NoError(t, set.Extend(ctx))
		require.NoError(t, set.Release(ctx))
		assert.False(t, held("x") || held("y"))
		for _, name := range []string{"x", "y"} {
			l, err := b.TryAcquire(ctx, name)
			require.NoError(t, err)
			assert.Greater(t, l.Token(), set.Token(), "%s's next token is not above the set's", name)
			require.NoError(t, l.Release(ctx))
		}

		// Crossed waiters, while single-name Leases hold both names, both hold in the end.
		hx, err := b.TryAcquire(ctx, "x")
		require.NoError(t, err)
		hy, err := b.TryAcquire(ctx, "y")
		require.NoError(t, err)
		done := make(chan error, 2)
		for _, names := range [][]string{{"x", "y"}, {"y", "x"}} {
			go func() {
				l, err := closingClient(t, newNode(), patient).AcquireAll(ctx, names)
				if err == nil {
					err = l.Release(ctx)
				}
				done <- err
			}()
		}
		require.Eventually(t, func() bool {
			v, err := c.Do("ZCARD", lockKey("y")+":queue")
			return err == nil && v == int64(2)
		}, generous, time.Millisecond, "the set waiters did not queue for y")
		require.NoError(t, hy.Release(ctx))
		require.NoError(t, hx.Release(ctx))
		for range 2 {
			require.NoError(t, within(t, false, done, "a set waiter's turn"))
		}
	})
	t.Run("kept while waiting", func(t *testing.T) {
		// A set with a short TTL holds y while it waits for x longer than that TTL: its
		// keeper extends y, whose TTL is seen to go up again.
		a, b := closingClient(t, newNode()), closingClient(t, newNode())
		hx, err := b.TryAcquire(ctx, "x", redlock.WithNodeTimeout(time.Second))
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			l, err := a.AcquireAll(ctx, []string{"x", "y"}, redlock.WithTTL(1500*time.Millisecond), redlock.WithNodeTimeout(300*time.Millisecond))
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		pttl := func() int64 {
			v, err := c.Do("PTTL", lockKey("y"))
			if n, ok := v.(int64); err == nil && ok {
				return n
			}
			return -2
		}
		var low int64
		require.Eventually(t, func() bool { low = pttl(); return low > 0 && low < 1300 }, generous, time.Millisecond, "y was not taken, or not kept near its TTL")
		require.Eventually(t, func() bool { return pttl() > low+100 }, generous, time.Millisecond, "y's TTL was not extended while the set waited")
		require.NoError(t, hx.Release(ctx))
		require.NoError(t, within(t, false, got, "the set"))
	})
	t.Run("readers", func(t *testing.T) {
		// Reader sets over two slots share with each other and with a reader of one name,
		// and exclude writers of either name; a reader set that waits for x, held by a
		// writer, gets it when the writer lets go.
		a, b := closingClient(t, newNode(), patient), closingClient(t, newNode(), patient)
		ra, rb := a.NewRWMutexAll([]string{"x", "y"}), b.NewRWMutexAll([]string{"y", "x"})
		require.True(t, ra.TryRLock(), "a reader set over free names was refused")
		require.True(t, rb.TryRLock(), "a reader set was refused beside another")
		rx := b.NewRWMutex("x")
		require.True(t, rx.TryRLock(), "a reader of x was refused beside reader sets")
		for _, name := range []string{"x", "y"} {
			_, err := b.TryAcquire(ctx, name)
			require.ErrorIs(t, err, redlock.ErrHeld, "a writer of %s beside reader sets", name)
		}
		assert.False(t, rb.TryLock(), "a writer set beside reader sets")
		rx.RUnlock()
		ra.RUnlock()
		rb.RUnlock()
		assert.False(t, held("x") || held("y"), "the readers left the names held")

		hx, err := b.TryAcquire(ctx, "x")
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() { got <- ra.RLockContext(ctx) }()
		require.Eventually(t, func() bool {
			v, err := c.Do("ZCARD", lockKey("x")+":queue")
			return err == nil && v == int64(1)
		}, generous, time.Millisecond, "the reader set did not queue for x")
		require.NoError(t, hx.Release(ctx))
		require.NoError(t, within(t, false, got, "the reader set's turn"))
		_, err = b.TryAcquire(ctx, "y")
		require.ErrorIs(t, err, redlock.ErrHeld, "a writer of y beside the reader set")
		ra.RUnlock()
	})
	t.Run("exclusion", func(t *testing.T) {
		// Sets over several slots, overlapping, for writers and readers, and Mutexes of
		// single names, a few rounds each: no name has a writer beside another holder, and
		// every wait ends.
		names := []string{"a", "b", "x", "y"}
		requests := [][]int{{2, 3}, {3, 2}, {0, 1}, {2, 0}, {3, 1}, {0, 1, 2, 3}, {2}, {1}, {3, 0}, {1, 2}}
		const writer = 1000 // a writer's weight in holding; a reader's is 1
		var holding [4]atomic.Int32
		var wg sync.WaitGroup
		for g, idx := range requests {
			cl := closingClient(t, newNode(), patient, redlock.WithRetry(time.Millisecond, 10*time.Millisecond))
			wg.Go(func() {
				var set []string
				for _, i := range idx {
					set = append(set, names[i])
				}
				rw := cl.NewRWMutexAll(set)
				for r := range 3 {
					read := (g+r)%3 == 0
					lock, unlock, weight := rw.LockContext, rw.UnlockContext, int32(writer)
					if read {
						lock, unlock, weight = rw.RLockContext, rw.RUnlockContext, 1
					}
					if !assert.NoError(t, lock(ctx), "goroutine %d round %d", g, r) {
						return
					}
					for _, i := range idx {
						v := holding[i].Add(weight)
						if read {
							assert.Less(t, v, int32(writer), "%s has a reader beside a writer", names[i])
						} else {
							assert.Equal(t, int32(writer), v, "%s has a writer beside another holder", names[i])
						}
					}
					runtime.Gosched()
					for _, i := range idx {
						holding[i].Add(-weight)
					}
					assert.NoError(t, unlock(ctx))
				}
			})
		}
		wg.Wait()
	})
	t.Run("lost", func(t *testing.T) {
		a := closingClient(t, newNode(), redlock.WithNodeTimeout(500*time.Millisecond), redlock.WithTTL(3*time.Second))
		l, err := a.AcquireAll(ctx, []string{"x", "y"}, redlock.WithAutoExtend(true))
		require.NoError(t, err)
		_, err = c.Do("DEL", lockKey("x"))
		require.NoError(t, err)
		within(t, false, l.Done(), "the set's end")
		require.ErrorIs(t, l.Err(), redlock.ErrLost)
		require.ErrorIs(t, l.Release(ctx), redlock.ErrLost)
		v, err := c.Do("EXISTS", lockKey("y"))
		require.NoError(t, err)
		assert.Equal(t, int64(0), v, "y is still held after the set's release")

		m := a.NewMutexAll([]string{"y", "x"})
		require.NoError(t, m.LockContext(ctx))
		require.NoError(t, m.UnlockContext(ctx))
	})
}

// TestHashSlot: the Client's hash slot of a key is Redis Cluster's.
func TestHashSlot(t *testing.T) {
	for _, key := range []string{"", "a", "redlock:{a}", "redlock:{x}:queue", "app{locks}:{x}", "{}", "}{", "{a}{b}", "ünïcødé 锁", "redlock:}{0123456789abcdef}{}x}"} {
		assert.Equal(t, redistest.KeySlot(key), redlock.HashSlot(key), "%q", key)
	}
}
