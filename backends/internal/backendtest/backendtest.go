// Package backendtest holds the tests that every backend in this module runs on its own
// Node: Eval of the core scripts and the Subscriber contract, on miniredis, on a real
// redis-server and on a one-node Redis Cluster. Each backend supplies a NewNode that builds
// its Node for a Server; the servers are administered through go-redis.
package backendtest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Kind is the sort of server a test runs on.
type Kind int

const (
	Miniredis Kind = iota // in-process miniredis
	Redis                 // a real redis-server
	Cluster               // a real redis-server as a one-node Redis Cluster (all 16384 slots)
)

func (k Kind) String() string {
	return [...]string{"miniredis", "redis-server", "redis-cluster"}[k]
}

// Server is one fresh, empty server for a test.
type Server struct {
	Kind  Kind
	Addr  string
	Admin redis.UniversalClient      // a go-redis client for setup and checks
	Real  *redistest.Server          // nil on miniredis
	Mini  *miniredis.Miniredis       // nil on a real server
	Pub   func(channel string) int64 // publishes an empty message (SPUBLISH on a cluster); returns the receivers
}

// NewNode builds the backend's Node on s, registering with t.Cleanup whatever it must close.
type NewNode func(t *testing.T, s *Server) core.Node

// Start starts a server of kind k; a real one skips when redis-server is not installed.
func Start(t *testing.T, k Kind) *Server {
	t.Helper()
	switch k {
	case Miniredis:
		// On a reserved port: a test that closes it and starts it again on that address
		// must not find the port taken meanwhile by another test process's server.
		m := redistest.StartMiniredis(t)
		return newServer(t, k, m.Addr(), nil, m)
	case Redis:
		r := redistest.Start(t)
		return newServer(t, k, r.Addr(), r, nil)
	}
	return startClusters(t, 1)[0]
}

// startClusters starts n one-node clusters, then waits for them together: each waits 2 s
// after it starts before it accepts writes (CLUSTER_WRITABLE_DELAY). Each node's cluster bus
// port is reserved (redistest.ReservePort): the default, its port + 10000, lies in the
// kernel's ephemeral range, where an outgoing connection may hold it.
func startClusters(t *testing.T, n int) []*Server {
	t.Helper()
	reals := make([]*redistest.Server, n)
	for i := range reals {
		bus := strconv.Itoa(redistest.ReservePort(t))
		reals[i] = redistest.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port", bus)
	}
	servers := make([]*Server, n)
	for i, r := range reals {
		_, err := r.Do("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
		require.NoError(t, err)
		servers[i] = newServer(t, Cluster, r.Addr(), r, nil)
	}
	for _, r := range reals {
		require.Eventually(t, func() bool {
			info, _ := r.Do("CLUSTER", "INFO")
			str, _ := info.(string)
			return strings.Contains(str, "cluster_state:ok")
		}, 10*time.Second, 20*time.Millisecond, "one-node cluster never became ready")
	}
	return servers
}

func newServer(t *testing.T, k Kind, addr string, real *redistest.Server, mini *miniredis.Miniredis) *Server {
	s := &Server{Kind: k, Addr: addr, Real: real, Mini: mini}
	// No retries: a command the admin sends again after a slow reply (a PUBLISH, say) would
	// be counted twice by the test.
	if k == Cluster {
		s.Admin = redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, MaxRetries: -1})
	} else {
		s.Admin = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	}
	t.Cleanup(func() { _ = s.Admin.Close() })
	s.Pub = func(channel string) int64 {
		ctx := context.Background()
		var n int64
		var err error
		if k == Cluster {
			n, err = s.Admin.SPublish(ctx, channel, "").Result()
		} else {
			n, err = s.Admin.Publish(ctx, channel, "").Result()
		}
		require.NoError(t, err)
		return n
	}
	return s
}

// Receivers returns how many connections the server has subscribed to channel.
func (s *Server) Receivers(t *testing.T, channel string) int64 {
	ctx := context.Background()
	var m map[string]int64
	var err error
	if s.Kind == Cluster {
		m, err = s.Admin.PubSubShardNumSub(ctx, channel).Result()
	} else {
		m, err = s.Admin.PubSubNumSub(ctx, channel).Result()
	}
	require.NoError(t, err)
	return m[channel]
}

// PubSubClients returns how many pub/sub connections the real server has: clients of
// CLIENT LIST TYPE pubsub, with at least one subscription.
func (s *Server) PubSubClients(t *testing.T) int {
	reply, err := s.Real.Do("CLIENT", "LIST", "TYPE", "pubsub")
	require.NoError(t, err)
	return strings.Count(reply.(string), "\n")
}

// KillPubSub makes the real server drop every pub/sub connection, as a network cut would.
func (s *Server) KillPubSub(t *testing.T) {
	n, err := s.Real.Do("CLIENT", "KILL", "TYPE", "pubsub")
	require.NoError(t, err)
	require.Positive(t, n, "CLIENT KILL TYPE pubsub found no pub/sub connection")
}

// onEach runs f in a parallel subtest per kind, with a fresh server and the backend's node.
// A cluster comes from clusters while it has one.
func onEach(t *testing.T, newNode NewNode, kinds []Kind, clusters <-chan *Server, f func(t *testing.T, s *Server, node core.Node)) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			t.Parallel()
			var s *Server
			if k == Cluster {
				select {
				case s = <-clusters:
				default:
				}
			}
			if s == nil {
				s = Start(t, k)
			}
			f(t, s, newNode(t, s))
		})
	}
}

// Script returns core's script called name.
func Script(t *testing.T, name string) *core.Script {
	for _, s := range core.Scripts() {
		if s.Name() == name {
			return s
		}
	}
	t.Fatalf("core.Scripts() has no %q script", name)
	return nil
}

// eventually waits for cond, generously: nothing here is timed, and under a loaded machine
// a reconnection after a server restart took more than 5 s once.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 15*time.Second, 5*time.Millisecond, what)
}

// settle gives a wrong extra callback time to show up.
func settle() { time.Sleep(150 * time.Millisecond) }

func flush(t *testing.T, s *Server) {
	require.NoError(t, s.Admin.FlushAll(context.Background()).Err())
}

// acquireKeys, acquireArgs, releaseKeys and releaseArgs are the KEYS and ARGV of core's
// acquire and release scripts as core passes them for a writer that does not wait (no
// restart guard, fence counter advanced, no waiter id, mode "w"); release's mode is "w" or
// "r", publish PUBLISH or SPUBLISH.
func acquireKeys(k core.Keys) []string { return k.ScriptKeys() }

func acquireArgs(token, ttl string) []string {
	return []string{token, ttl, "0", "1", "", "0", "10000", "0", "w", "-1"}
}

// readArgs are acquire's ARGV for a reader that does not wait: no fence, mode "r".
func readArgs(token, ttl string) []string {
	return []string{token, ttl, "0", "0", "", "0", "10000", "0", "r", "-1"}
}

// waiterArgs are acquire's ARGV for a writer waiter with id waiter and ticket.
func waiterArgs(token, ttl, waiter, ticket string) []string {
	return []string{token, ttl, "0", "1", waiter, ticket, "10000", "0", "w", "-1"}
}

func releaseKeys(k core.Keys) []string { return k.ScriptKeys() }

func releaseArgs(token, mode, publish string) []string {
	return []string{token, mode, publish, "", "leave", "0", "10000"}
}
