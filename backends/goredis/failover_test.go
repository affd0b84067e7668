package goredis_test

import (
	"testing"

	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/backends/internal/backendtest"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestFailoverClient: a go-redis failover client through a real Sentinel is a Node: a lease
// is taken and released through it, and a waiting Mutex is handed the lock over its pub/sub.
func TestFailoverClient(t *testing.T) {
	master := redistest.StartN(t, 1)[0]
	sentinel := redistest.StartSentinel(t, master.Addr())
	backendtest.LockAndHandOver(t, master, func() core.Node {
		fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{sentinel}, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = fc.Close() })
		n := goredis.New(fc)
		t.Cleanup(func() { _ = n.Close() })
		return n
	})
}
