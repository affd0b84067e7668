// Package redlocktest gives a test a ready *redlock.Client over N Redis servers that run
// inside the test's process: no Redis installed, no port opened. The test can fail a
// server, restart it empty, pause it, partition it from some Clients, and expire a lock, to
// see what the code under test does then.
//
//	func TestNightlyJob(t *testing.T) {
//		cluster := redlocktest.New(t) // 3 servers, shut down when the test ends
//		client := cluster.Client()    // closed when the test ends
//		cluster.Server(0).Fail()      // a minority down: locks still work
//		if err := runNightly(ctx, client); err != nil { ... }
//	}
//
// Each server is a miniredis (github.com/alicebob/miniredis/v2) that answers INFO server
// with an uptime and a run_id as redis-server does, so the restart guard and the check that
// no two nodes reach one server work as they do in production. It runs the lock's Lua
// scripts as miniredis does, but on Lua states kept in a pool rather than made for each
// call, which is much cheaper. A Client reaches each server through
// the go-redis backend (backends/goredis), over in-memory connections, with
// ContextTimeoutEnabled set as the README recommends; the servers' addresses
// (10.0.0.1:6379, 10.0.0.2:6379, ...) are labels, which errors name, and are never dialled.
// go-redis, which logs each failed dial to standard error, logs none of its faults: a dial
// to a failed or partitioned server gives go-redis a connection that fails its first write
// with the dial's error, which the call then returns.
//
// Its Clients are real ones: what a test sees of a lock through them (waits, hand-overs,
// extensions, errors) is what the library does over Redis, in time as well; only the
// network and the servers are simulated.
//
// # Time, and testing/synctest
//
// Keys expire on the clock of the goroutine that made the Cluster. In an ordinary test that
// is the real clock: a lock with a 10 s TTL lives 10 s. Inside a testing/synctest bubble
// (synctest.Test) it is the bubble's clock, which moves only when every goroutine of the
// bubble waits, so a test sees a 30 s lease lapse at exactly 30 s of virtual time, in no
// real time. Make the Cluster, its Clients and everything that uses them inside the one
// bubble (or all outside any bubble): a Cluster cannot be shared between bubbles, nor
// between a bubble and the outside.
//
// To make a test deterministic, run it in a bubble:
//
//	func TestReport(t *testing.T) {
//		synctest.Test(t, func(t *testing.T) {
//			cluster := redlocktest.New(t)
//			...
//		})
//	}
//
// There no call is slow, however loaded the machine: a call takes no virtual time unless
// it waits on a timer (a node timeout, a retry delay, a TTL), which then fires exactly on
// time, so the test may assert durations, and each run takes the same path. Start its
// goroutines from the bubble, and order them by what they do (channels, synctest.Wait,
// which returns once every other goroutine waits), not by sleeps. Its Clients keep
// redlock's defaults (a 100 ms node timeout).
//
// On the real clock a call to an in-process server still takes the time the machine gives
// it, which a loaded CI runner stretches: a Client made outside a bubble gets a node
// timeout of RealTimeNodeTimeout (1 s) unless its options say otherwise, so that load does
// not fail a call, and a test there should assert outcomes, not durations. A TTL must then
// be above that node timeout (redlock.New refuses one that is not, and so does a call given
// a shorter TTL): give a shorter node timeout with the TTL (redlock.WithNodeTimeout) where
// a test needs a TTL of a second or less.
//
// # Faults
//
// Server(i) returns a Server, whose methods fail it as a production server fails:
//
//   - Fail: the process dies: its data is gone, and calls to it fail (connection refused,
//     or the node timeout while go-redis tries again).
//   - Restart: it starts again, empty, with uptime 0 and a new run_id, as after a crash
//     without persistence. The restart guard then makes its node abstain (redlock's
//     ErrRestarted) for the guard, 30 s by default: in a bubble, let the clock run past
//     it (time.Sleep(31 * time.Second)); in an ordinary test, give the Client a shorter one
//     (cluster.Client(redlock.WithRestartGuard(2*time.Second), redlock.WithTTL(2*time.Second))),
//     or turn it off (redlock.WithRestartGuard(0)) to see the double grant it prevents.
//   - Pause and Resume: the process stops answering (as under SIGSTOP), keeping its data;
//     calls time out (after the node timeout: see Time, above). Resume serves what was held.
//   - Partition and Heal: the network between the server and some Clients (or all) lets
//     nothing through, either way, as a network that drops packets; the server runs on,
//     and other Clients still reach it. Calls time out. Heal delivers what was held back,
//     as TCP's resends would.
//
// Cluster.Expire makes every holding of a lock end now on every server, as if its TTL had
// run out: the holder finds out at its next extension (a Mutex's Lost channel closes, a
// Lease's Done, with ErrLost).
//
// At the test's end (t.Cleanup), the Cluster heals its partitions, resumes its servers,
// closes every Client it made and then stops its servers: no goroutine of it is left
// behind (inside a bubble, see New), and no lock is left held.
package redlocktest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"syscall"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/simnet"
	"github.com/redis/go-redis/v9"
)

// DefaultServers is the number of servers a Cluster has unless WithServers says otherwise:
// the smallest N that keeps working with one server failed.
const DefaultServers = 3

// RealTimeNodeTimeout is the node timeout of a Client of a Cluster made outside a
// testing/synctest bubble, unless its options say otherwise: a call in the test's process
// that a loaded machine (a busy CI runner, the race detector) makes slower than redlock's
// default 100 ms, the kit's servers being in-process, is no fault of the code under test.
// Inside a bubble a Client keeps redlock's default (see the package doc, Time).
const RealTimeNodeTimeout = time.Second

// MaxServers is the most servers a Cluster can have.
const MaxServers = 254

// DefaultPrefix is the key prefix of a Cluster's Clients, and where Expire looks for a
// lock's keys, unless WithPrefix says otherwise: redlock's own default.
const DefaultPrefix = "redlock:"

// TB is what New needs of a test: *testing.T, *testing.B and *testing.F satisfy it, as
// does testing.TB, and so can the test object of another framework.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Option configures a Cluster (see New).
type Option func(*config)

type config struct {
	servers    int
	prefix     string
	prefixSet  bool
	badServers bool // WithServers was given a number out of range
}

// WithServers sets the number of servers, N. Default 3 (DefaultServers). It must be from 1
// to MaxServers (254): New fails the test otherwise.
func WithServers(n int) Option {
	return func(c *config) {
		c.servers, c.badServers = n, n < 1 || n > MaxServers
	}
}

// WithPrefix sets the key prefix that every Client of the Cluster is given (as
// redlock.WithPrefix, before the Client's own options) and under which Expire looks for a
// lock's keys. Default "redlock:" (DefaultPrefix), redlock's own. New fails the test if
// redlock would refuse the prefix. A Client, or one call, given another prefix through
// redlock.WithPrefix uses keys that Expire does not see.
func WithPrefix(p string) Option {
	return func(c *config) { c.prefix, c.prefixSet = p, true }
}

// Cluster is N Redis servers in the test's process, and the Clients made over them. Make
// it with New. Its methods, and its Servers', are safe for concurrent use; those that fail
// the test on bad input (t.Fatalf) must be called from the test's goroutine, as t.Fatalf
// must.
type Cluster struct {
	t       TB
	prefix  string
	servers []*Server
	virtual bool // made inside a synctest bubble: its clock is the bubble's

	mu      sync.Mutex
	clients []*clientOf // in the order made
	done    bool        // the test ended: no more Clients
}

// clientOf is a Client the Cluster made, with its go-redis clients and its links, one per
// server (links[i] leads to servers[i]).
type clientOf struct {
	client *redlock.Client
	redis  []*redis.Client
	links  []*simnet.Link
}

// New starts a Cluster of N servers (3 unless WithServers says otherwise) for the test t
// (a *testing.T, *testing.B or anything else with TB's methods), each up, empty, and
// reporting an uptime of an hour, so that the restart guard lets its node take part at
// once. When the test ends (t.Cleanup), every partition heals, every paused server
// resumes, every Client made by Cluster.Client is closed, and the servers stop; inside a
// synctest bubble the bubble's clock then runs on for a minute, in no real time, for the
// Clients' calls still under way to end (a bubble ends only once all its goroutines have).
// Bad options (a number of servers out of range, a prefix redlock refuses) fail the test
// with t.Fatalf, naming them. New must be called from the test's goroutine; inside a
// synctest bubble, from the bubble (see the package doc).
func New(t TB, opts ...Option) *Cluster {
	t.Helper()
	cfg := config{servers: DefaultServers, prefix: DefaultPrefix}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.badServers {
		t.Fatalf("redlocktest: WithServers(%d): a Cluster has from 1 to %d servers", cfg.servers, MaxServers)
		return nil
	}
	if cfg.prefixSet {
		if err := checkPrefix(cfg.prefix); err != nil {
			t.Fatalf("redlocktest: WithPrefix(%q): %v", cfg.prefix, err)
			return nil
		}
	}
	c := &Cluster{t: t, prefix: cfg.prefix, virtual: inBubble()}
	t.Cleanup(c.cleanup)
	for i := range cfg.servers {
		s, err := simnet.Start(fmt.Sprintf("10.0.0.%d:6379", i+1))
		if err != nil {
			t.Fatalf("redlocktest: %v", err)
			return nil
		}
		s.SetPooledScripts(true) // far cheaper than a Lua state per script call
		c.servers = append(c.servers, &Server{c: c, i: i, s: s})
	}
	return c
}

// checkPrefix returns redlock's error for a Client with prefix p, if any.
func checkPrefix(p string) error { return checkOptions([]redlock.Option{redlock.WithPrefix(p)}) }

// checkOptions returns redlock's error for a Client with opts, if any.
func checkOptions(opts []redlock.Option) error {
	// A node that is never called: redlock.New checks the options without calling it.
	c, err := redlock.New([]redlock.Node{idle{}}, opts...)
	if err != nil {
		return err
	}
	return c.Close()
}

// idle is a Node for checkOptions, never called.
type idle struct{}

func (idle) Eval(context.Context, *core.Script, []string, ...string) ([]int64, error) {
	return nil, fmt.Errorf("%w: not a node", core.ErrInvalid)
}
func (idle) EvalStrings(context.Context, *core.Script, []string, ...string) ([]string, error) {
	return nil, fmt.Errorf("%w: not a node", core.ErrInvalid)
}
func (idle) String() string { return "idle" }

// Len returns N, the number of servers.
func (c *Cluster) Len() int { return len(c.servers) }

// Server returns the i-th server, from 0 to Len()-1. An i out of range fails the test
// (t.Fatalf), naming it.
func (c *Cluster) Server(i int) *Server {
	c.t.Helper()
	if i < 0 || i >= len(c.servers) {
		c.t.Fatalf("redlocktest: Server(%d): the Cluster has servers 0 to %d", i, len(c.servers)-1)
		return nil
	}
	return c.servers[i]
}

// Client returns a new redlock.Client over every server of the Cluster, one Node each
// (the go-redis backend), with opts as redlock.New's options after the Cluster's prefix
// (see WithPrefix) and, outside a synctest bubble, after a node timeout of
// RealTimeNodeTimeout (1 s; see the package doc, Time): redlock's defaults otherwise (a
// 10 s TTL, a 100 ms node timeout in a bubble, a 30 s restart guard...). Each Client has
// connections of its own, so a partition can cut some Clients off a server and not others:
// several Clients of one Cluster act as several processes. The Client is closed when the
// test ends; closing it earlier is fine. Options that redlock.New refuses fail the test
// (t.Fatalf) with its error (and, for a TTL at or below the kit's node timeout, a word on
// it), as does a call after the test ended.
func (c *Cluster) Client(opts ...redlock.Option) *redlock.Client {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		c.t.Fatalf("redlocktest: Client called after the test ended")
		return nil
	}
	co := &clientOf{}
	nodes := make([]redlock.Node, len(c.servers))
	for i, s := range c.servers {
		l := simnet.NewLink()
		if s.cutAll {
			l.Cut()
		}
		o := simnet.Options(s.s)
		o.Dialer = func(ctx context.Context, _, _ string) (net.Conn, error) {
			conn, err := s.s.DialVia(ctx, l)
			if err != nil {
				// go-redis logs every failed dial, for the whole process: a connection
				// that fails its first write with the dial's error fails the call alike,
				// in silence.
				return failedConn{err}, nil
			}
			return conn, nil
		}
		o.ContextTimeoutEnabled = true
		// A refused dial fails the call at once, as the server is down: no dial retries
		// spent on it. simnet.Options's pool is large enough that go-redis never reaches
		// its size in failed dials either, past which it probes the server from a goroutine
		// that outlives the client by up to a second (which a goroutine leak check would
		// report).
		o.DialerRetries = 1
		rdb := redis.NewClient(o)
		co.redis = append(co.redis, rdb)
		co.links = append(co.links, l)
		nodes[i] = goredis.New(rdb)
	}
	given := append([]redlock.Option{redlock.WithPrefix(c.prefix)}, opts...)
	kit := []redlock.Option{redlock.WithPrefix(c.prefix)}
	if !c.virtual {
		kit = append(kit, redlock.WithNodeTimeout(RealTimeNodeTimeout))
	}
	client, err := redlock.New(nodes, append(kit, opts...)...)
	if err != nil {
		co.close()
		c.t.Fatalf("redlocktest: Client: %v%s", err, c.timeoutHint(given))
		return nil
	}
	co.client = client
	c.clients = append(c.clients, co)
	return client
}

// failedConn is a connection whose dial failed with err: it reads and writes nothing,
// failing with err.
type failedConn struct{ err error }

func (c failedConn) Read([]byte) (int, error)       { return 0, c.err }
func (c failedConn) Write([]byte) (int, error)      { return 0, c.err }
func (failedConn) Close() error                     { return nil }
func (failedConn) LocalAddr() net.Addr              { return failedAddr{} }
func (failedConn) RemoteAddr() net.Addr             { return failedAddr{} }
func (failedConn) SetDeadline(time.Time) error      { return nil }
func (failedConn) SetReadDeadline(time.Time) error  { return nil }
func (failedConn) SetWriteDeadline(time.Time) error { return nil }

// failedAddr is a failedConn's address.
type failedAddr struct{}

func (failedAddr) Network() string { return "tcp" }
func (failedAddr) String() string  { return "failed dial" }

// timeoutHint returns what to add to redlock.New's error when the options given, without
// the kit's node timeout, would have been accepted: a TTL at or below RealTimeNodeTimeout.
func (c *Cluster) timeoutHint(given []redlock.Option) string {
	if c.virtual || checkOptions(given) != nil {
		return ""
	}
	return fmt.Sprintf(" (outside a synctest bubble a Client's node timeout is %v, redlocktest.RealTimeNodeTimeout: "+
		"give a longer TTL, or a shorter node timeout with redlock.WithNodeTimeout)", RealTimeNodeTimeout)
}

// close closes co's Client, if any, and then its go-redis clients.
func (co *clientOf) close() {
	if co.client != nil {
		_ = co.client.Close() // also closes the Nodes' subscriptions
	}
	for _, r := range co.redis {
		_ = r.Close()
	}
}

// clientOf returns the record of client, or nil if c did not make it.
func (c *Cluster) clientOf(client *redlock.Client) *clientOf {
	for _, co := range c.clients {
		if co.client == client {
			return co
		}
	}
	return nil
}

// cleanup ends the Cluster at the test's end: it heals every partition and resumes every
// server, so that nothing waits on them, closes every Client, and then stops the servers.
func (c *Cluster) cleanup() {
	c.mu.Lock()
	c.done = true
	clients := slices.Clone(c.clients)
	for _, s := range c.servers {
		s.cutAll = false
		s.s.Resume()
	}
	for _, co := range clients {
		for _, l := range co.links {
			l.Heal()
		}
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, co := range slices.Backward(clients) {
		wg.Go(co.close)
	}
	wg.Wait()
	for _, s := range c.servers {
		s.s.Crash()
	}
	if c.virtual {
		// Calls of the Clients may still run in the background, each until its node
		// timeout or go-redis's own (seconds): a bubble ends only once its goroutines have,
		// and its clock stands still once the test's function has returned.
		time.Sleep(time.Minute)
	}
}

// inBubble reports whether the calling goroutine runs in a testing/synctest bubble, where
// synctest.Wait returns once the bubble's other goroutines all wait; outside one, it
// panics.
func inBubble() (in bool) {
	defer func() {
		if recover() != nil {
			in = false
		}
	}()
	synctest.Wait()
	return true
}

// Expire ends every holding of the lock called name on every server that is up, now, as if
// each holder's TTL had run out there: the Mutex, Lease, RWMutex (writer and readers),
// Semaphore (every permit, and its waiters' turn) and Election leader of that name, under
// the Cluster's prefix (see WithPrefix). It deletes their holders' keys, each server's at
// once (in one step, atomic on that server), on paused and partitioned servers too, and
// leaves the rest as an expiry would: waiters stay queued (and take the lock at their
// next attempt, within their retry delay, as no release wakes them), the fencing counter
// stays, so tokens keep increasing, and a Semaphore keeps its number of permits.
//
// A holder learns of it at its next extension, which fails: a Mutex's Lost channel
// closes, a Lease that extends itself (WithAutoExtend, Do, an Election's leader) ends with
// ErrLost; a Lease that does not extend itself ends at its Until, as always, and its
// Extend and Release report ErrNotHeld. In a bubble the next extension comes when a third
// of the validity is left; in an ordinary test, that is real time (6.6 s into a 10 s
// TTL), so give the Client a short TTL (redlock.WithTTL, above the node timeout) there.
//
// An empty name, or one longer than redlock.MaxNameLen, fails the test (t.Fatalf). Expiring
// a lock that nobody holds does nothing.
func (c *Cluster) Expire(name string) {
	c.t.Helper()
	switch {
	case name == "":
		c.t.Fatalf("redlocktest: Expire: empty lock name")
		return
	case len(name) > redlock.MaxNameLen:
		c.t.Fatalf("redlocktest: Expire: lock name of %d bytes: at most %d", len(name), redlock.MaxNameLen)
		return
	}
	base := core.NewKeys(c.prefix, name).Lock
	for _, s := range c.servers {
		if err := s.run("EVAL", expireScript, "0", base); err != nil {
			c.t.Fatalf("redlocktest: Expire(%q) on %s: %v", name, s, err)
			return
		}
	}
}

// expireScript deletes the holders' keys of the lock whose lock key is ARGV[1] (see
// core.NewKeys and core.NewSemaphoreKeys): that key and its readers, and the same of each part
// (a Semaphore's permits and turn). A key belongs to the lock if it is the lock key, or the
// lock key, ':' and more without '}' (the name's keys end with its last '}'); the lock's own
// suffixes after that are fixed, and any other is a part's.
const expireScript = `
local base = ARGV[1]
local own = {fence = true, queue = true, alive = true, waiters = true, readers = true,
  leader = true, released = true, permits = true}
local n = 0
for _, k in ipairs(redis.call('KEYS', '*')) do
  local rest = nil
  if k == base then
    rest = ''
  elseif #k > #base + 1 and string.sub(k, 1, #base + 1) == base .. ':' then
    rest = string.sub(k, #base + 2)
    if string.find(rest, '}', 1, true) then
      rest = nil
    end
  end
  if rest then
    local first, second = string.match(rest, '^([^:]*):?(.*)$')
    local holding = rest == '' or rest == 'readers' or
      (not own[first] and (second == '' or second == 'readers'))
    if holding then
      n = n + redis.call('DEL', k)
    end
  end
end
return n
`

// Server is one server of a Cluster (see Cluster.Server). Its faults combine: a paused
// server that fails and restarts stays paused until Resume, and a partition outlasts a
// restart. Its methods are safe for concurrent use.
type Server struct {
	c *Cluster
	i int
	s *simnet.Server

	// cutAll (guarded by c.mu) is set by Partition() without Clients: Clients made later
	// start cut off too.
	cutAll bool
}

// String returns the server's address, by which errors name its node: 10.0.0.1:6379 for
// server 0, 10.0.0.2:6379 for server 1, and so on. Nothing listens there.
func (s *Server) String() string { return s.s.Addr() }

// Up reports whether the server runs: true unless it failed (Fail) and has not restarted.
// A paused or partitioned server is up.
func (s *Server) Up() bool { return s.s.Up() }

// Fail stops the server as a killed process stops: its connections close, its data is
// lost, and until Restart its connections are refused, so calls to it fail: with that
// error, or at the node timeout, as go-redis dials again. Failing a server that is down
// does nothing.
func (s *Server) Fail() { s.s.Crash() }

// Restart starts the server again as a new process, empty, with an uptime of 0 and a new
// run_id, as a server restarted without persistence is: from up, it fails first. Its node
// then abstains under the restart guard for as long as the Client's guard (30 s by
// default; see the package doc): the calls it gets fail with redlock.ErrRestarted inside
// a redlock.QuorumError, and the other nodes must make the quorum.
func (s *Server) Restart() {
	s.s.Crash()
	s.s.Restart()
}

// Pause makes the server stop answering, as a process stopped by SIGSTOP: connections
// are accepted and requests are held back, unanswered, so calls to it time out (each after
// the node timeout). Its keys still expire on time. Pausing a paused server does nothing.
func (s *Server) Pause() { s.s.Hang() }

// Resume ends a Pause: the requests held back are served, in order (those whose callers
// gave up too).
func (s *Server) Resume() { s.s.Resume() }

// Partition cuts the network between the server and the given Clients, or, with none,
// every Client of the Cluster, including those made later. Across the cut nothing moves,
// either way: calls time out (each after the node timeout) and release notifications do
// not arrive; the server runs on, its keys expire on time, and Clients on the server's
// side of the cut still reach it. Partitioning a cut link does nothing. A Client that the
// Cluster did not make (or nil) fails the test (t.Fatalf).
func (s *Server) Partition(clients ...*redlock.Client) {
	s.c.t.Helper()
	s.setCut(true, "Partition", clients)
}

// Heal ends a partition between the server and the given Clients, or, with none, every
// partition of the server: what was held back on the way is delivered, in order, as TCP's
// resends would deliver it. Healing a whole link does nothing. A Client that the Cluster did
// not make (or nil) fails the test (t.Fatalf).
func (s *Server) Heal(clients ...*redlock.Client) {
	s.c.t.Helper()
	s.setCut(false, "Heal", clients)
}

// setCut cuts (or heals) the links to s of clients, or of every client if there are none.
func (s *Server) setCut(cut bool, op string, clients []*redlock.Client) {
	c := s.c
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var links []*simnet.Link
	if len(clients) == 0 {
		s.cutAll = cut
		for _, co := range c.clients {
			links = append(links, co.links[s.i])
		}
	}
	for i, client := range clients {
		co := c.clientOf(client)
		if co == nil {
			c.t.Fatalf("redlocktest: %s: client %d of %d (%p) was not made by this Cluster's Client", op, i+1, len(clients), client)
			return
		}
		links = append(links, co.links[s.i])
	}
	for _, l := range links {
		if cut {
			l.Cut()
		} else {
			l.Heal()
		}
	}
}

// run runs one command on the server directly, past its connections (so also while it is
// paused or partitioned), and returns its error reply, if any. It does nothing while the
// server is down.
func (s *Server) run(args ...string) error {
	if !s.s.Up() {
		return nil
	}
	_, err := s.s.Do(args...)
	if errors.Is(err, syscall.ECONNREFUSED) { // it went down meanwhile
		return nil
	}
	return err
}
