package redlock_test

import (
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
// set whose names fall in different slots fails at once, with the server's CROSSSLOT.
func TestAcquireAllOnRedisCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	newNode := func() []redlock.Node {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		n := goredis.New(rdb)
		t.Cleanup(func() { _ = n.Close() })
		return []redlock.Node{n}
	}
	ctx := ctxT(t, time.Minute)
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
	t.Run("different slots", func(t *testing.T) {
		require.NotEqual(t, redistest.KeySlot(lockKey("x")), redistest.KeySlot(lockKey("y")))
		cl := closingClient(t, newNode(), patient)
		_, err := cl.AcquireAll(ctx, []string{"x", "y"})
		require.ErrorIs(t, err, redlock.ErrInvalid)
		assert.Contains(t, err.Error(), `"[x y]"`)
		assert.Contains(t, err.Error(), "slot")
		m := cl.NewMutexAll([]string{"y", "x"})
		require.ErrorIs(t, m.LockContext(ctx), redlock.ErrInvalid)
		assert.Panics(t, m.Lock, "Lock retried a set that no script can take")
		l, err := cl.TryAcquireAll(ctx, []string{"x", "x"}) // one name: one slot
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	})
}

// TestHashSlot: the Client's hash slot of a key is Redis Cluster's.
func TestHashSlot(t *testing.T) {
	for _, key := range []string{"", "a", "redlock:{a}", "redlock:{x}:queue", "app{locks}:{x}", "{}", "}{", "{a}{b}", "ünïcødé 锁", "redlock:}{0123456789abcdef}{}x}"} {
		assert.Equal(t, redistest.KeySlot(key), redlock.HashSlot(key), "%q", key)
	}
}
