package conformance_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
)

// The faulty Setters: each is rawSetNX (go-redis's SET NX, ctx honoured) on a client that
// sends nothing again by itself (MaxRetries -1), but for one clause of the core.Setter
// contract.

// newOnceSetNX is rawSetNX on a go-redis client with MaxRetries -1.
func newOnceSetNX(t testing.TB, addr string) rawSetNX {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	onCloseClients(t, func() { _ = rdb.Close() })
	n := goredis.New(rdb)
	t.Cleanup(func() { _ = n.Close() })
	return rawSetNX{n, rdb}
}

// subMillisecondTTL refuses a TTL of 0 or less only, and leaves the rest to go-redis, which
// rounds a TTL under 1 ms up to PX 1 (logging a warning): a key is set for a TTL the caller
// never asked for.
type subMillisecondTTL struct{ rawSetNX }

func newSubMillisecondTTL(t testing.TB, addr string) core.Node {
	return subMillisecondTTL{newOnceSetNX(t, addr)}
}

func (n subMillisecondTTL) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		return false, errors.New("redlock: SET NX without a TTL")
	}
	return honourCtx(ctx, func() (bool, error) {
		set, err := n.rdb.SetNX(ctx, key, value, ttl).Result()
		return set, closedErr(err)
	})
}

// setNXThenPExpire sets the key with SETNX and then gives it its TTL with PEXPIRE, two
// commands: a client that dies between them leaves a key without expiry.
type setNXThenPExpire struct{ rawSetNX }

func newSetNXThenPExpire(t testing.TB, addr string) core.Node {
	return setNXThenPExpire{newOnceSetNX(t, addr)}
}

func (n setNXThenPExpire) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if ttl < time.Millisecond {
		return false, errors.New("redlock: SET NX with a TTL under 1ms")
	}
	return honourCtx(ctx, func() (bool, error) {
		set, err := n.rdb.SetNX(ctx, key, value, 0).Result() // 0: go-redis sends SETNX
		if err != nil || !set {
			return set, closedErr(err)
		}
		return true, closedErr(n.rdb.PExpire(ctx, key, ttl).Err())
	})
}
