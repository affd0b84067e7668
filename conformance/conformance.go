package conformance

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
)

// Harness tells Run how to make the Node under test. Only NewNode is required.
type Harness struct {
	// NewNode returns a Node connected to the Redis server at addr ("127.0.0.1:port"). Run
	// calls it one or more times per check, from the check's goroutine (checks run in
	// parallel), sometimes with the address of a proxy that later stops answering or drops
	// its connections. Run closes nothing: register the client's cleanup with t.Cleanup. To
	// give up, call t.Fatal (or t.Skip).
	//
	// A Node that also implements core.Subscriber or core.Setter (found by type assertion)
	// is checked as one; for a Node that does not, those checks skip, with a message.
	NewNode func(t testing.TB, addr string) core.Node

	// NewClusterNode returns a Node over a cluster client of the Redis Cluster whose masters
	// are at addrs: one Node for the whole cluster, whose client routes each call to the
	// master that serves its keys' slot. Run calls it as it calls NewNode. Optional: without
	// it the RedisCluster checks do not run (Run reports a skipped "redis-cluster" subtest
	// that says so), and listing RedisCluster in Servers is an error.
	NewClusterNode func(t testing.TB, addrs []string) core.Node

	// CloseClient closes the driver client (pool, connection) under n, a Node that NewNode or
	// NewClusterNode made, as an application closes it at shutdown; the Node itself is left
	// as it is. The errors/closed-client check then calls the Node and wants an error that
	// matches core.ErrClosed (core stops at once on it; any other error makes AcquireWait
	// retry until its context ends). Run calls it at most once per Node, from the check's
	// goroutine. Optional: without it that check skips, saying so.
	CloseClient func(t testing.TB, n core.Node)

	// Servers are the Redis implementations every check runs against, in this order.
	// Default (nil): Miniredis and RedisServer, and RedisCluster if NewClusterNode is set.
	Servers []Server

	// RequireRedisServer makes the RedisServer checks fail, rather than skip, when
	// redis-server is not on PATH: set it in CI so that a missing binary cannot pass
	// unnoticed. Default false: they skip with a message saying how to install it.
	RequireRedisServer bool
}

// Server is a Redis implementation the suite runs against. Each check starts its own fresh
// servers, on 127.0.0.1 ports of their own, and stops them when it ends.
type Server string

const (
	// Miniredis is github.com/alicebob/miniredis/v2, in-process: always available. It has no
	// CLIENT KILL, CLIENT LIST or sharded pub/sub: the checks that need them cut connections
	// through a TCP proxy instead, or say in the log what they leave out.
	Miniredis Server = "miniredis"
	// RedisServer is a real redis-server process (the binary on PATH), started and stopped by
	// the suite. Without the binary, its checks skip with a message, or fail with
	// Harness.RequireRedisServer.
	RedisServer Server = "redis-server"
	// RedisCluster is a real Redis Cluster of 3 masters (redis-server 7 or later, with
	// --cluster-enabled), reached through Harness.NewClusterNode. Its checks share one
	// cluster, started for the Run, and take turns on it; each uses keys of its own. The
	// checks that need a server of their own behind a proxy (context, subscribe deadlines,
	// ready-means-confirmed) or several independent servers skip there, saying so (but
	// string/distinct, which starts a second cluster, of one master, to compare). Without
	// redis-server it skips, or fails with Harness.RequireRedisServer, as RedisServer does.
	RedisCluster Server = "redis-cluster"
)

// clusterMasters is the number of masters of the RedisCluster server.
const clusterMasters = 3

// Timing of the checks: a call that must end at a deadline or cancellation gets ctxBound to
// return; anything the suite waits for gets waitBound (generous: CI machines can be slow).
const (
	ctxDeadline = 50 * time.Millisecond // the deadline or cancellation delay the checks use
	ctxBound    = time.Second           // how soon after it Eval or Subscribe must return
	waitBound   = 5 * time.Second       // for a message, a reconnection or a call to finish
	quietPeriod = 200 * time.Millisecond
)

// Run runs the conformance suite against the Node that h.NewNode makes: every check, as a
// named subtest "<server>/<group>/<check>", on each of h.Servers. A failure message says
// which part of the core.Node (or core.Subscriber) contract was broken.
//
// The checks of one server run in parallel, each on fresh servers of its own; the servers
// take turns. Run returns when every check has finished, and it takes a few seconds per
// server.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewNode == nil {
		t.Fatal("conformance: Harness.NewNode is nil")
	}
	servers := h.Servers
	if servers == nil {
		servers = []Server{Miniredis, RedisServer}
		if h.NewClusterNode != nil {
			servers = append(servers, RedisCluster)
		}
	}
	for _, kind := range servers {
		switch {
		case kind != Miniredis && kind != RedisServer && kind != RedisCluster:
			t.Fatalf("conformance: unknown Harness.Servers entry %q: want conformance.Miniredis, conformance.RedisServer or conformance.RedisCluster", kind)
		case kind == RedisCluster && h.NewClusterNode == nil:
			t.Fatal("conformance: Harness.Servers lists RedisCluster, but Harness.NewClusterNode is nil")
		}
	}
	for _, kind := range servers {
		t.Run(string(kind), func(t *testing.T) {
			if kind != Miniredis && !redistest.Available() {
				const msg = "conformance: redis-server is not on PATH; install it (apt-get install -y redis-server) to run the checks on a real server"
				if h.RequireRedisServer {
					t.Fatal(msg + " (Harness.RequireRedisServer is set)")
				}
				t.Skip(msg)
			}
			base := env{h: h, kind: kind}
			if kind == RedisCluster {
				base.cluster = startCluster(t)
			}
			// On the shared cluster the checks take turns: some flush it or kill its
			// connections. Elsewhere each check has servers of its own.
			parallel := func(t *testing.T) {
				if kind != RedisCluster {
					t.Parallel()
				}
			}
			for _, g := range groups {
				t.Run(g.name, func(t *testing.T) {
					parallel(t)
					if g.skip != nil {
						e := base
						g.skip(t, &e)
					}
					for _, c := range g.checks {
						t.Run(c.name, func(t *testing.T) {
							parallel(t)
							e := base
							c.run(t, &e)
						})
					}
				})
			}
		})
	}
	if h.NewClusterNode == nil {
		// A backend with no cluster client must not look as if it passed on one.
		t.Run(string(RedisCluster), func(t *testing.T) {
			t.Skip("conformance: the Harness gives no cluster client (Harness.NewClusterNode is nil), so no check ran on a Redis Cluster; " +
				"set NewClusterNode to a func(t testing.TB, addrs []string) core.Node that returns a Node over your driver's cluster client of the masters at addrs " +
				"to run the checks on a 3-master Redis Cluster")
		})
	}
}

// check is one named conformance check.
type check struct {
	name string
	run  func(t *testing.T, e *env)
}

// group is a named set of checks.
type group struct {
	name   string
	checks []check
	skip   func(t *testing.T, e *env) // if set, may skip the whole group
}

// groups is the whole suite, in the order it is reported.
var groups = []group{
	{name: "scripts", checks: scriptChecks()},
	{name: "sets", checks: setChecks()},
	{name: "noscript", checks: noscriptChecks()},
	{name: "errors", checks: append(append(errorChecks(), crossSlotChecks()...), closedChecks()...)},
	{name: "replies", checks: replyChecks()},
	{name: "strings", checks: stringsChecks()},
	{name: "arguments", checks: argumentChecks()},
	{name: "evalsha", checks: append(evalshaChecks(), resendChecks()...)},
	{name: "string", checks: stringChecks()},
	{name: "context", checks: append(append(contextChecks(), behindChecks()...), lateReplyChecks()...)},
	{name: "names", checks: nameChecks()},
	{name: "concurrency", checks: concurrencyChecks()},
	{name: "pubsub", checks: append(append(pubsubChecks(), pubsubRecoveryChecks()...), pubsubContractChecks()...), skip: skipUnlessSubscriber},
	{name: "independent-nodes", checks: independentNodesChecks()},
}

// env is what one check runs in: the harness and the kind of server.
type env struct {
	h       Harness
	kind    Server
	cluster *redistest.Cluster // the shared cluster, for RedisCluster
}

// servers starts n fresh servers of the check's kind and returns their addresses. It skips
// the check when redis-server is missing. On RedisCluster it returns the address of the
// shared cluster's first master (which admin commands reach the others through), and skips
// a check that asks for more than one server.
func (e *env) servers(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	switch e.kind {
	case RedisCluster:
		if n > 1 {
			t.Skipf("conformance: the check needs %d independent servers; a Redis Cluster is one Node", n)
		}
		addrs[0] = e.cluster.Addrs()[0]
	case Miniredis:
		for i := range addrs {
			addrs[i] = miniredis.RunT(t).Addr()
		}
	default:
		for i, s := range redistest.StartN(t, n) {
			addrs[i] = s.Addr()
		}
	}
	return addrs
}

// server starts one fresh server and returns its address.
func (e *env) server(t *testing.T) string {
	t.Helper()
	return e.servers(t, 1)[0]
}

// node returns a Node on addr from the harness: on RedisCluster, a Node of the whole
// cluster (addr is then its first master's).
func (e *env) node(t *testing.T, addr string) core.Node {
	t.Helper()
	if e.kind == RedisCluster {
		return e.clusterNode(t, e.cluster.Addrs())
	}
	n := e.h.NewNode(t, addr)
	if n == nil || isNilNode(n) {
		t.Fatalf("conformance: Harness.NewNode(%q) returned a nil Node", addr)
	}
	return n
}

// clusterNode returns a Node from the harness over the cluster whose masters are at addrs.
func (e *env) clusterNode(t *testing.T, addrs []string) core.Node {
	t.Helper()
	n := e.h.NewClusterNode(t, addrs)
	if n == nil || isNilNode(n) {
		t.Fatalf("conformance: Harness.NewClusterNode(%q) returned a nil Node", addrs)
	}
	return n
}

// skipOnCluster skips the check on RedisCluster, saying why it does not apply there.
func (e *env) skipOnCluster(t *testing.T, why string) {
	t.Helper()
	if e.kind == RedisCluster {
		t.Skip("conformance: not on a Redis Cluster: " + why)
	}
}

// prefix returns a key prefix of the check's own, so that checks that share a cluster never
// share a key.
func prefix(t *testing.T) string { return "conformance:" + t.Name() + ":" }

func isNilNode(n core.Node) bool {
	_, err := core.NewCluster([]core.Node{n})
	return err != nil
}

// admin runs a command on addr through the suite's own client and fails the check on an
// error.
func admin(t testing.TB, addr string, args ...string) any {
	t.Helper()
	v, err := do(addr, args...)
	if err != nil {
		t.Fatalf("conformance: admin command %q on %s: %v", args, addr, err)
	}
	return v
}

// script returns the core script called name.
func script(t testing.TB, name string) *core.Script {
	t.Helper()
	i := slices.IndexFunc(core.Scripts(), func(s *core.Script) bool { return s.Name() == name })
	if i < 0 {
		t.Fatalf("conformance: core.Scripts() has no %q script", name)
	}
	return core.Scripts()[i]
}

// eval calls n.Eval with a generous deadline: a healthy node on loopback answers in
// milliseconds.
func eval(n core.Node, s *core.Script, keys []string, args ...string) ([]int64, error) {
	return evalWithin(waitBound, n, s, keys, args...)
}

// evalWithin calls n.Eval with a deadline bound away.
func evalWithin(bound time.Duration, n core.Node, s *core.Script, keys []string, args ...string) ([]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	return n.Eval(ctx, s, keys, args...)
}

// mustEval is eval that fails the check on an error.
func mustEval(t testing.TB, n core.Node, s *core.Script, keys []string, args ...string) []int64 {
	t.Helper()
	got, err := eval(n, s, keys, args...)
	if err != nil {
		t.Fatalf("Eval(%s) on a healthy server returned error %v: the Node must run the script and return its reply", s.Name(), err)
	}
	return got
}

// withinBound runs f in a goroutine and waits up to bound for it. If f has not returned
// by then, it calls unblock (which must make f return, by closing connections, say), waits
// waitBound more, and returns false.
func withinBound(t testing.TB, bound time.Duration, unblock func(), f func()) (time.Duration, bool) {
	t.Helper()
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); f() }()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case <-done:
		return time.Since(start), true
	case <-timer.C:
	}
	unblock()
	select {
	case <-done:
	case <-time.After(waitBound):
		t.Errorf("conformance: the call still had not returned %v after that", waitBound)
	}
	return time.Since(start), false
}

// eventually polls cond every few milliseconds until it holds or bound passes.
func eventually(bound time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(bound)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// format renders a reply for failure messages.
func format(v []int64) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprint(v)
}

// acquireKeys and acquireArgs are the KEYS and ARGV of core's acquire script as core passes
// them for a writer that does not wait: no restart guard, advance the fence counter, no
// waiter id (so never queued), ticket 0, a place kept for 10 s, no need to say which server
// this is, mode "w", no permit hinted.
func acquireKeys(k core.Keys) []string { return k.ScriptKeys() }

func acquireArgs(token, ttl string) []string { return lockArgs(token, ttl, "1", "", "0", "w") }

// waiterArgs are acquire's ARGV for a writer waiter with id waiter and ticket.
func waiterArgs(token, ttl, waiter, ticket string) []string {
	return lockArgs(token, ttl, "1", waiter, ticket, "w")
}

// readerArgs are acquire's ARGV as core passes them for a reader that does not wait: a
// writer's, but with no fence (a reader advances none) and mode "r".
func readerArgs(token, ttl string) []string { return lockArgs(token, ttl, "0", "", "0", "r") }

// readerWaiterArgs are acquire's ARGV for a reader waiter with id waiter and ticket.
func readerWaiterArgs(token, ttl, waiter, ticket string) []string {
	return lockArgs(token, ttl, "0", waiter, ticket, "r")
}

// lockArgs are acquire's ten ARGV: token, TTL ms, no restart guard, the fence floor, waiter
// id, ticket, a place kept for 10 s, "0" (no need to say which server this is), the mode and
// no permit hinted.
func lockArgs(token, ttl, floor, waiter, ticket, mode string) []string {
	return []string{token, ttl, "0", floor, waiter, ticket, "10000", "0", mode, "-1"}
}

// identifying returns args, acquire's ARGV, with ARGV[8] "1": say which server this is.
func identifying(args []string) []string {
	args = slices.Clone(args)
	args[7] = "1"
	return args
}

// extendKeys are the KEYS of core's extend script for a writer's lock: the lock key and the
// fence counter. readerExtendKeys are a reader's: the lock key and the readers key.
func extendKeys(k core.Keys) []string { return []string{k.Lock, k.Fence} }

func readerExtendKeys(k core.Keys) []string { return []string{k.Lock, k.Readers} }

// releaseKeys and releaseArgs are the KEYS and ARGV of core's release script as core passes
// them when an owner without a waiter id lets go of its holding of mode ("w" a writer's
// lock, "r" a reader's share), on a node without sharded pub/sub.
func releaseKeys(k core.Keys) []string { return k.ScriptKeys() }

func releaseArgs(token, mode string) []string {
	return []string{token, mode, "PUBLISH", "", "leave", "0", "10000"}
}
