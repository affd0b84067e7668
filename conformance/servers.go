package conformance

import (
	"sync"
	"testing"

	"github.com/go-redlock/redlock/internal/redistest"
)

// clusters maps the first master's address of each RedisCluster started by Run to all its
// masters' addresses, for the admin commands that every master must run.
var clusters sync.Map // string -> []string

// startCluster starts the RedisCluster checks' shared cluster; t.Cleanup stops it.
func startCluster(t *testing.T) *redistest.Cluster {
	t.Helper()
	c := redistest.StartCluster(t, clusterMasters)
	addrs := c.Addrs()
	clusters.Store(addrs[0], addrs)
	t.Cleanup(func() { clusters.Delete(addrs[0]) })
	return c
}

// masters returns the addresses of every master of the server at addr: addr itself, or all
// the masters of the cluster whose first master is at addr.
func masters(addr string) []string {
	if addrs, ok := clusters.Load(addr); ok {
		return addrs.([]string)
	}
	return []string{addr}
}

// adminAll runs a command that concerns a server rather than a key (FLUSHALL, SCRIPT, INFO,
// CLIENT, PUBSUB) on every master of the server at addr, and returns their replies.
func adminAll(t testing.TB, addr string, args ...string) []any {
	t.Helper()
	addrs := masters(addr)
	replies := make([]any, len(addrs))
	for i, a := range addrs {
		replies[i] = admin(t, a, args...)
	}
	return replies
}

// adminAt runs a command that concerns a server on the master that serves key (a key or a
// shard channel) of the server at addr: addr itself, unless it is a cluster's.
func adminAt(t testing.TB, addr, key string, args ...string) any {
	t.Helper()
	return admin(t, owner(addr, key), args...)
}

// owner returns the address of the master of the server at addr that serves key: the one a
// MOVED reply names, or addr.
func owner(addr, key string) string {
	if len(masters(addr)) == 1 {
		return addr
	}
	_, err := redistest.DoTimeout(addr, adminTimeout, "EXISTS", key)
	if err != nil {
		if f := movedFields(err.Error()); len(f) == 3 {
			return f[2]
		}
	}
	return addr
}
