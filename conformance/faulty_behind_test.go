package conformance_test

import (
	"context"
	"sync"
	"testing"

	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
)

// serialisesCalls runs its Evals one at a time behind a sync.Mutex, as a backend that
// shares one connection among its callers would: each call honours ctx once it holds the
// lock, but a call waiting for the lock waits however long the one ahead takes. Its client
// sends nothing again by itself (MaxRetries -1), so that the calls queued behind fail at
// once when the suite closes their connections.
type serialisesCalls struct {
	*goredis.Node
	mu *sync.Mutex
}

func newSerialisesCalls(t testing.TB, addr string) core.Node {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	onCloseClients(t, func() { _ = rdb.Close() })
	n := goredis.New(rdb)
	t.Cleanup(func() { _ = n.Close() })
	return serialisesCalls{n, new(sync.Mutex)}
}

func (n serialisesCalls) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n.mu.Lock() // the fault: not given up when ctx ends
	defer n.mu.Unlock()
	return n.Node.Eval(ctx, s, keys, args...)
}
