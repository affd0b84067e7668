package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redlock/redlock"
	rlgoredis "github.com/go-redlock/redlock/backends/goredis"
	rlredigo "github.com/go-redlock/redlock/backends/redigo"
	rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
	rlvalkey "github.com/go-redlock/redlock/backends/valkey"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	rsrueidis "github.com/go-redsync/redsync/v4/redis/rueidis"
	redigo "github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidiscompat"
	"github.com/redis/rueidis/rueidislock"
	"github.com/valkey-io/valkey-go"
)

// locker is one lock name as a library exposes it: Lock blocks until held (or ctx ends).
type locker interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
}

// client is one process's view of the lock service: its own connections to the N nodes.
type client interface {
	Locker(name string) locker
	Close()
}

// impl is one row of the tables: a library, configured with its shipped defaults unless
// notes say otherwise.
type impl struct {
	key     string // for -impls
	name    string // row label
	single  bool   // the library locks on one Redis only: N=1 rows only
	handoff bool   // can wait for a held lock: takes part in the handoff test
	only    string // the one test the row takes part in ("": every test)
	ours    bool   // the library's own row: the run waits past its restart guard first
	// untargeted marks our rows that issue 6's targets (a Mutex's, a fenced Lease's) do
	// not apply to: they are not checked in the targets table.
	untargeted bool
	// mutex is the key of the redlock Mutex row over the same driver, which the ratio
	// columns divide by ("": no such column for the row).
	mutex string
	notes string
	// new returns a client over addrs (one per node). waiting is true for the handoff
	// test, where Lock must wait for a held lock.
	new func(addrs []string, waiting bool) (client, error)
}

// guardWait is how long after the servers start the measurements begin: past the
// library's default restart guard (30s), under which a fresh server abstains, and the two
// seconds the acquire script needs to prove the uptime from LASTSAVE alone.
const guardWait = 33 * time.Second

// noGuard are the options of the rows that turn the restart guard off; every other
// redlock row uses the library's defaults.
var noGuard = []redlock.Option{redlock.WithRestartGuard(0)}

func impls() []impl {
	return []impl{
		{key: "floor", name: "floor: SET NX PX ×N ∥, CAD Lua ×N ∥ (go-redis)",
			notes: "hand-written: SET NX PX to all N in parallel, wait for all; compare-and-delete (EVALSHA) to all N in parallel, wait for all. No waiting, no retries, no extension.",
			new:   newFloor},
		{key: "floor-rueidis", name: "floor: SET NX PX ×N ∥, CAD Lua ×N ∥ (rueidis)",
			notes: "the same floor over rueidis clients (defaults; concurrent commands are auto-pipelined): the leaner driver's floor.",
			new:   newFloorRueidis},
		{key: "floor-scripts", name: "floor with redlock's release script (rueidis)",
			notes: "the rueidis floor, but sending what an uncontended redlock Mutex sends: SET NX PX (its first attempt, without guard or fence), then redlock's release script instead of compare-and-delete. The server-side cost of the script, without core.",
			new:   newFloorScripts},
		{key: "floor-handoff", name: "floor: hand-over by release script + PUBLISH (rueidis)", single: true, handoff: true, only: "handoff",
			notes: "the handoff test's floor, N=1 only: a waiter subscribes to its own channel and queues in a list (one script with SET NX); the holder's release script sets the lock to the first waiter's token and publishes on its channel; the waiter's Lock returns on the message. One release round trip plus one message, with nothing else a lock needs (no waiter liveness, tickets, fencing, restart guard or deadlines).",
			new:   newHandoffFloor},
		{key: "redlock-goredis", name: "redlock Mutex (go-redis)", handoff: true, ours: true, mutex: "redlock-goredis",
			notes: "redis.Options{ContextTimeoutEnabled: true} as the README asks.",
			new:   func(a []string, _ bool) (client, error) { return newOurs(a, goredisNodes, false, false) }},
		{key: "redlock-redigo", name: "redlock Mutex (redigo)", handoff: true, ours: true, mutex: "redlock-redigo",
			notes: "redis.Pool{MaxIdle: 64, DialContext} (redigo's default MaxIdle 0 dials per call).",
			new:   func(a []string, _ bool) (client, error) { return newOurs(a, redigoNodes, false, false) }},
		{key: "redlock-rueidis", name: "redlock Mutex (rueidis)", handoff: true, ours: true, mutex: "redlock-rueidis",
			notes: "rueidis.ClientOption{InitAddress} defaults.",
			new:   func(a []string, _ bool) (client, error) { return newOurs(a, rueidisNodes, false, false) }},
		{key: "redlock-valkey", name: "redlock Mutex (valkey-go)", handoff: true, ours: true, mutex: "redlock-valkey",
			notes: "valkey.ClientOption{InitAddress} defaults.",
			new:   func(a []string, _ bool) (client, error) { return newOurs(a, valkeyNodes, false, false) }},
		{key: "redlock-rueidis-noguard", name: "redlock Mutex (rueidis), restart guard off", handoff: true, ours: true, mutex: "redlock-rueidis",
			notes: "as redlock-rueidis, with WithRestartGuard(0): what the guard costs.",
			new:   func(a []string, _ bool) (client, error) { return newOurs(a, rueidisNodes, false, false, noGuard...) }},
		{key: "redlock-goredis-noguard", name: "redlock Mutex (go-redis), restart guard off", handoff: true, ours: true, mutex: "redlock-goredis",
			notes: "as redlock-goredis, with WithRestartGuard(0): what the guard costs.",
			new:   func(a []string, _ bool) (client, error) { return newOurs(a, goredisNodes, false, false, noGuard...) }},
		{key: "redlock-lease", name: "redlock Lease, fenced (go-redis)", handoff: true, ours: true, mutex: "redlock-goredis",
			notes: "TryAcquire+Release (Acquire+Release in the handoff test); N>1 pays the fence-raise round.",
			new:   func(a []string, w bool) (client, error) { return newOurs(a, goredisNodes, true, w) }},
		{key: "redlock-lease-rueidis", name: "redlock Lease, fenced (rueidis)", handoff: true, ours: true, mutex: "redlock-rueidis",
			notes: "as redlock-lease, over rueidis nodes as for the Mutex row.",
			new:   func(a []string, w bool) (client, error) { return newOurs(a, rueidisNodes, true, w) }},
		{key: "redlock-all", name: "redlock Mutex over two names (go-redis)", ours: true, mutex: "redlock-goredis",
			notes: "NewMutexAll of the row's name and a second one: every name in one acquire script per node (a set takes no SET NX fast path). Go-redis nodes as for the Mutex row.",
			new:   func(a []string, _ bool) (client, error) { return newOursAll(a, goredisNodes) }},
		{key: "redlock-all-rueidis", name: "redlock Mutex over two names (rueidis)", ours: true, mutex: "redlock-rueidis",
			notes: "as redlock-all, over rueidis nodes as for the Mutex row.",
			new:   func(a []string, _ bool) (client, error) { return newOursAll(a, rueidisNodes) }},
		{key: "redlock-rlock", name: "redlock RWMutex, RLock (go-redis)", ours: true, untargeted: true, mutex: "redlock-goredis",
			notes: "RLockContext+RUnlockContext of an RWMutex per name: a reader's share (the rlock and runlock scripts; readers take no SET NX fast path). Go-redis nodes as for the Mutex row.",
			new:   func(a []string, _ bool) (client, error) { return newOursRead(a, goredisNodes, false) }},
		{key: "redlock-rlock-rueidis", name: "redlock RWMutex, RLock (rueidis)", ours: true, untargeted: true, mutex: "redlock-rueidis",
			notes: "as above, over rueidis nodes as for the Mutex row.",
			new:   func(a []string, _ bool) (client, error) { return newOursRead(a, rueidisNodes, false) }},
		{key: "redlock-semaphore-rueidis", name: "redlock Semaphore, one of 4 permits (rueidis)", ours: true, untargeted: true, mutex: "redlock-rueidis",
			notes: "TryAcquire+Release of one permit of a NewSemaphore per name with K = 4 (a permit is a Lease, the acquire and release scripts run over the K permits' keys). Rueidis nodes as for the Mutex row.",
			new:   func(a []string, _ bool) (client, error) { return newOursSemaphore(a, rueidisNodes) }},
		{key: "redlock-election-rueidis", name: "redlock Election, Campaign+Resign (rueidis)", handoff: true, ours: true, untargeted: true, mutex: "redlock-rueidis",
			notes: "Campaign (which waits for leadership, then records the value on a quorum: one more round) and Release of the leader's Lease (resign) of a NewElection per name. Rueidis nodes as for the Mutex row.",
			new:   func(a []string, _ bool) (client, error) { return newOursElection(a, rueidisNodes) }},
		{key: "redlock-rlock-one", name: "redlock RWMutex, RLock, one name (go-redis)", only: "throughput", ours: true, untargeted: true, mutex: "redlock-goredis",
			notes: "throughput test only: every goroutine's RLock+RUnlock is on ONE name, so the readers hold it together (one readers' sorted set per node). A Mutex row cannot do this: its goroutines would take turns.",
			new:   func(a []string, _ bool) (client, error) { return newOursRead(a, goredisNodes, true) }},
		{key: "redsync-goredis", name: "redsync v4 (go-redis pool)", handoff: true,
			notes: "defaults: 8s expiry, 32 tries, 50-250ms random retry delay; Lock returns ErrFailed after 32 tries (the handoff test then calls it again).",
			new:   newRedsyncGoredis},
		{key: "redsync-rueidis", name: "redsync v4 (rueidis pool)", handoff: true,
			notes: "as above, over rueidiscompat.NewAdapter(rueidis client with defaults).",
			new:   newRedsyncRueidis},
		{key: "redislock", name: "bsm/redislock", single: true, handoff: true,
			notes: "single-node. TTL 10s (a required argument). Its default is NoRetry: in the handoff test only, Options{RetryStrategy: LinearBackoff(10ms)} (our WithRetry minimum).",
			new:   newRedislock},
		{key: "rueidislock", name: "rueidislock", single: true, handoff: true,
			notes: "defaults: KeyMajority 2 (2 of 3 keys on ONE client: one server or one Redis Cluster, not independent masters, so N=1 only), KeyValidity 5s, client-side-caching invalidations wake waiters.",
			new:   newRueidislock},
	}
}

// ---- ours ----

type nodesFunc func(addrs []string) ([]redlock.Node, func(), error)

func goredisNodes(addrs []string) ([]redlock.Node, func(), error) {
	var nodes []redlock.Node
	var closers []func()
	for _, a := range addrs {
		rdb := goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true})
		n := rlgoredis.New(rdb)
		nodes = append(nodes, n)
		closers = append(closers, func() { n.Close(); rdb.Close() })
	}
	return nodes, runAll(closers), nil
}

func redigoNodes(addrs []string) ([]redlock.Node, func(), error) {
	var nodes []redlock.Node
	var closers []func()
	for _, a := range addrs {
		pool := &redigo.Pool{
			MaxIdle: 64,
			DialContext: func(ctx context.Context) (redigo.Conn, error) {
				return redigo.DialContext(ctx, "tcp", a)
			},
		}
		n := rlredigo.New(pool, a)
		nodes = append(nodes, n)
		closers = append(closers, func() { n.Close(); pool.Close() })
	}
	return nodes, runAll(closers), nil
}

func rueidisNodes(addrs []string) ([]redlock.Node, func(), error) {
	return eachNode(addrs, func(a string) (redlock.Node, func(), error) {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}})
		if err != nil {
			return nil, nil, err
		}
		n := rlrueidis.New(rc)
		return n, func() { n.Close(); rc.Close() }, nil
	})
}

// valkeyNodes is rueidisNodes over valkey-go clients, with their defaults.
func valkeyNodes(addrs []string) ([]redlock.Node, func(), error) {
	return eachNode(addrs, func(a string) (redlock.Node, func(), error) {
		vc, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{a}})
		if err != nil {
			return nil, nil, err
		}
		n := rlvalkey.New(vc)
		return n, func() { n.Close(); vc.Close() }, nil
	})
}

// eachNode makes a Node per address with node, and returns them with a func that closes
// them all; if one fails, it closes those made and returns the error.
func eachNode(addrs []string, node func(addr string) (redlock.Node, func(), error)) ([]redlock.Node, func(), error) {
	var nodes []redlock.Node
	var closers []func()
	for _, a := range addrs {
		n, closer, err := node(a)
		if err != nil {
			runAll(closers)()
			return nil, nil, err
		}
		nodes, closers = append(nodes, n), append(closers, closer)
	}
	return nodes, runAll(closers), nil
}

func runAll(fs []func()) func() {
	return func() {
		for _, f := range fs {
			f()
		}
	}
}

type ours struct {
	c       *redlock.Client
	close   func()
	lease   bool
	waiting bool
}

func newOurs(addrs []string, nodes nodesFunc, lease, waiting bool, opts ...redlock.Option) (client, error) {
	ns, closer, err := nodes(addrs)
	if err != nil {
		return nil, err
	}
	c, err := redlock.New(ns, opts...)
	if err != nil {
		closer()
		return nil, err
	}
	return &ours{c: c, close: closer, lease: lease, waiting: waiting}, nil
}

func (o *ours) Locker(name string) locker {
	switch {
	case o.lease && o.waiting:
		return &ourLease{acquire: func(ctx context.Context) (*redlock.Lease, error) { return o.c.Acquire(ctx, name) }}
	case o.lease:
		return &ourLease{acquire: func(ctx context.Context) (*redlock.Lease, error) { return o.c.TryAcquire(ctx, name) }}
	}
	return ourMutex{o.c.NewMutex(name)}
}

func (o *ours) Close() { o.close() }

// oursRead is ours, locking for reading through RWMutexes; with one, every name is one.
type oursRead struct {
	*ours
	one bool
}

func newOursRead(addrs []string, nodes nodesFunc, one bool) (client, error) {
	c, err := newOurs(addrs, nodes, false, false)
	if err != nil {
		return nil, err
	}
	return &oursRead{ours: c.(*ours), one: one}, nil
}

func (o *oursRead) Locker(name string) locker {
	if o.one {
		name = "readers:one"
	}
	return ourReader{o.c.NewRWMutex(name)}
}

// oursAll is ours, locking two names at once through NewMutexAll: the row's name and the
// same with "/2".
type oursAll struct{ *ours }

func newOursAll(addrs []string, nodes nodesFunc) (client, error) {
	c, err := newOurs(addrs, nodes, false, false)
	if err != nil {
		return nil, err
	}
	return oursAll{c.(*ours)}, nil
}

func (o oursAll) Locker(name string) locker {
	return ourMutex{o.c.NewMutexAll([]string{name, name + "/2"})}
}

// semaphorePermits is K, the permits of each Semaphore of the Semaphore row.
const semaphorePermits = 4

// oursSemaphore is ours, holding one permit of a Semaphore of semaphorePermits per name.
type oursSemaphore struct{ *ours }

// newOursSemaphore returns an oursSemaphore over addrs, with the library's defaults.
func newOursSemaphore(addrs []string, nodes nodesFunc) (client, error) {
	c, err := newOurs(addrs, nodes, false, false)
	if err != nil {
		return nil, err
	}
	return oursSemaphore{c.(*ours)}, nil
}

// Locker takes and releases a permit of the name's Semaphore.
func (o oursSemaphore) Locker(name string) locker {
	return &ourLease{acquire: o.c.NewSemaphore(name, semaphorePermits).TryAcquire}
}

// electionValue is the value each leader of the Election row records.
const electionValue = "bench"

// oursElection is ours, leading an Election per name: Campaign, then resign.
type oursElection struct{ *ours }

// newOursElection returns an oursElection over addrs, with the library's defaults.
func newOursElection(addrs []string, nodes nodesFunc) (client, error) {
	c, err := newOurs(addrs, nodes, false, false)
	if err != nil {
		return nil, err
	}
	return oursElection{c.(*ours)}, nil
}

// Locker campaigns in the name's Election and resigns.
func (o oursElection) Locker(name string) locker {
	e := o.c.NewElection(name)
	return &ourLease{acquire: func(ctx context.Context) (*redlock.Lease, error) { return e.Campaign(ctx, electionValue) }}
}

type ourReader struct{ rw *redlock.RWMutex }

func (r ourReader) Lock(ctx context.Context) error   { return r.rw.RLockContext(ctx) }
func (r ourReader) Unlock(ctx context.Context) error { return r.rw.RUnlockContext(ctx) }

type ourMutex struct{ m *redlock.Mutex }

func (m ourMutex) Lock(ctx context.Context) error   { return m.m.LockContext(ctx) }
func (m ourMutex) Unlock(ctx context.Context) error { return m.m.UnlockContext(ctx) }

// ourLease locks by taking a Lease (a lock's, a Semaphore permit's, an Election
// leader's) with acquire, and unlocks by releasing it.
type ourLease struct {
	acquire func(context.Context) (*redlock.Lease, error)
	l       *redlock.Lease
}

func (l *ourLease) Lock(ctx context.Context) (err error) {
	l.l, err = l.acquire(ctx)
	return err
}

func (l *ourLease) Unlock(ctx context.Context) error { return l.l.Release(ctx) }

// ---- redsync ----

type redsyncClient struct {
	rs    *redsync.Redsync
	close func()
}

func newRedsyncGoredis(addrs []string, _ bool) (client, error) {
	var pools []rsredis.Pool
	var closers []func()
	for _, a := range addrs {
		rdb := goredis.NewClient(&goredis.Options{Addr: a})
		pools = append(pools, rsgoredis.NewPool(rdb))
		closers = append(closers, func() { rdb.Close() })
	}
	return &redsyncClient{rs: redsync.New(pools...), close: runAll(closers)}, nil
}

func newRedsyncRueidis(addrs []string, _ bool) (client, error) {
	var pools []rsredis.Pool
	var closers []func()
	for _, a := range addrs {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}})
		if err != nil {
			runAll(closers)()
			return nil, err
		}
		pools = append(pools, rsrueidis.NewPool(rueidiscompat.NewAdapter(rc)))
		closers = append(closers, rc.Close)
	}
	return &redsyncClient{rs: redsync.New(pools...), close: runAll(closers)}, nil
}

func (r *redsyncClient) Locker(name string) locker { return redsyncMutex{r.rs.NewMutex(name)} }
func (r *redsyncClient) Close()                    { r.close() }

type redsyncMutex struct{ m *redsync.Mutex }

func (m redsyncMutex) Lock(ctx context.Context) error {
	// redsync's Lock gives up with ErrFailed after 32 tries (about 4.8s): a blocking lock
	// as the other rows have it calls it again, until ctx ends.
	for {
		err := m.m.LockContext(ctx)
		if err == nil || ctx.Err() != nil || !errors.Is(err, redsync.ErrFailed) {
			return err
		}
	}
}

func (m redsyncMutex) Unlock(ctx context.Context) error {
	ok, err := m.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock: not held")
	}
	return err
}

// ---- bsm/redislock ----

type redislockClient struct {
	rdb  *goredis.Client
	c    *redislock.Client
	opts *redislock.Options
}

const redislockTTL = 10 * time.Second

func newRedislock(addrs []string, waiting bool) (client, error) {
	rdb := goredis.NewClient(&goredis.Options{Addr: addrs[0]})
	c := &redislockClient{rdb: rdb, c: redislock.New(rdb)}
	if waiting {
		c.opts = &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)}
	}
	return c, nil
}

func (r *redislockClient) Locker(name string) locker { return &redislockLock{c: r, name: name} }
func (r *redislockClient) Close()                    { r.rdb.Close() }

type redislockLock struct {
	c    *redislockClient
	name string
	l    *redislock.Lock
}

func (l *redislockLock) Lock(ctx context.Context) (err error) {
	for {
		l.l, err = l.c.c.Obtain(ctx, l.name, redislockTTL, l.c.opts)
		// Without a ctx deadline, Obtain stops retrying after the TTL: call it again.
		if err == nil || l.c.opts == nil || ctx.Err() != nil || !errors.Is(err, redislock.ErrNotObtained) {
			return err
		}
	}
}

func (l *redislockLock) Unlock(ctx context.Context) error { return l.l.Release(ctx) }

// ---- rueidislock ----

type rueidislockClient struct{ l rueidislock.Locker }

func newRueidislock(addrs []string, _ bool) (client, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{InitAddress: []string{addrs[0]}},
	})
	if err != nil {
		return nil, err
	}
	return &rueidislockClient{l: l}, nil
}

func (r *rueidislockClient) Locker(name string) locker { return &rueidislockLock{l: r.l, name: name} }
func (r *rueidislockClient) Close()                    { r.l.Close() }

type rueidislockLock struct {
	l      rueidislock.Locker
	name   string
	cancel context.CancelFunc
}

func (l *rueidislockLock) Lock(ctx context.Context) (err error) {
	_, l.cancel, err = l.l.WithContext(ctx, l.name)
	return err
}

// Unlock: rueidislock's cancel releases the keys and returns once they are deleted.
func (l *rueidislockLock) Unlock(context.Context) error { l.cancel(); return nil }

// ---- the floor ----

// floorClient is the least any Redlock can do: SET NX PX to every node in parallel, then
// compare-and-delete to every node in parallel. Two parallel round trips, no extras.
type floorClient struct {
	rdbs   []*goredis.Client
	quorum int
}

var cad = goredis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

const floorTTL = 10 * time.Second

func newFloor(addrs []string, _ bool) (client, error) {
	f := &floorClient{quorum: len(addrs)/2 + 1}
	for _, a := range addrs {
		f.rdbs = append(f.rdbs, goredis.NewClient(&goredis.Options{Addr: a}))
	}
	return f, nil
}

func (f *floorClient) Locker(name string) locker { return &floorLock{f: f, key: name} }
func (f *floorClient) Close() {
	for _, r := range f.rdbs {
		r.Close()
	}
}

type floorLock struct {
	f     *floorClient
	key   string
	token string
}

// each runs fn on every node, nodes 1..N-1 on their own goroutines and node 0 on this one,
// and returns how many returned true.
func each[T any](nodes []T, fn func(T) bool) int {
	if len(nodes) == 1 {
		if fn(nodes[0]) {
			return 1
		}
		return 0
	}
	var wg sync.WaitGroup
	var ok atomic.Int32
	for _, n := range nodes[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if fn(n) {
				ok.Add(1)
			}
		}()
	}
	if fn(nodes[0]) {
		ok.Add(1)
	}
	wg.Wait()
	return int(ok.Load())
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (l *floorLock) Lock(ctx context.Context) error {
	l.token = newToken()
	n := each(l.f.rdbs, func(r *goredis.Client) bool {
		ok, err := r.SetNX(ctx, l.key, l.token, floorTTL).Result()
		return err == nil && ok
	})
	if n < l.f.quorum {
		_ = l.Unlock(context.WithoutCancel(ctx))
		return fmt.Errorf("floor: %d of %d nodes", n, len(l.f.rdbs))
	}
	return nil
}

func (l *floorLock) Unlock(ctx context.Context) error {
	n := each(l.f.rdbs, func(r *goredis.Client) bool {
		v, err := cad.Run(ctx, r, []string{l.key}, l.token).Int64()
		return err == nil && v == 1
	})
	if n < l.f.quorum {
		return fmt.Errorf("floor: released on %d of %d nodes", n, len(l.f.rdbs))
	}
	return nil
}

// floorRueidis is the floor over rueidis clients.
type floorRueidis struct {
	cs     []rueidis.Client
	quorum int
}

var cadRueidis = rueidis.NewLuaScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

func newFloorRueidis(addrs []string, _ bool) (client, error) {
	f := &floorRueidis{quorum: len(addrs)/2 + 1}
	for _, a := range addrs {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}})
		if err != nil {
			f.Close()
			return nil, err
		}
		f.cs = append(f.cs, c)
	}
	return f, nil
}

func (f *floorRueidis) Locker(name string) locker { return &floorRueidisLock{f: f, key: name} }
func (f *floorRueidis) Close() {
	for _, c := range f.cs {
		c.Close()
	}
}

type floorRueidisLock struct {
	f     *floorRueidis
	key   string
	token string
}

func (l *floorRueidisLock) Lock(ctx context.Context) error {
	l.token = newToken()
	n := each(l.f.cs, func(c rueidis.Client) bool {
		return c.Do(ctx, c.B().Set().Key(l.key).Value(l.token).Nx().PxMilliseconds(floorTTL.Milliseconds()).Build()).Error() == nil
	})
	if n < l.f.quorum {
		_ = l.Unlock(context.WithoutCancel(ctx))
		return fmt.Errorf("floor: %d of %d nodes", n, len(l.f.cs))
	}
	return nil
}

func (l *floorRueidisLock) Unlock(ctx context.Context) error {
	n := each(l.f.cs, func(c rueidis.Client) bool {
		v, err := cadRueidis.Exec(ctx, c, []string{l.key}, []string{l.token}).AsInt64()
		return err == nil && v == 1
	})
	if n < l.f.quorum {
		return fmt.Errorf("floor: released on %d of %d nodes", n, len(l.f.cs))
	}
	return nil
}

// floorScripts is the rueidis floor sending what an uncontended redlock Mutex sends.
type floorScripts struct{ floorRueidis }

var releaseLua = rueidis.NewLuaScript(core.Scripts()[2].Source())

func newFloorScripts(addrs []string, w bool) (client, error) {
	f, err := newFloorRueidis(addrs, w)
	if err != nil {
		return nil, err
	}
	return &floorScripts{*f.(*floorRueidis)}, nil
}

func (f *floorScripts) Locker(name string) locker {
	k := core.NewKeys("redlock:", name)
	return &floorScriptsLock{f: &f.floorRueidis, keys: k}
}

type floorScriptsLock struct {
	f     *floorRueidis
	keys  core.Keys
	token string
}

func (l *floorScriptsLock) Lock(ctx context.Context) error {
	l.token = newToken()
	n := each(l.f.cs, func(c rueidis.Client) bool {
		return c.Do(ctx, c.B().Set().Key(l.keys.Lock).Value(l.token).Nx().PxMilliseconds(floorTTL.Milliseconds()).Build()).Error() == nil
	})
	if n < l.f.quorum {
		_ = l.Unlock(context.WithoutCancel(ctx))
		return fmt.Errorf("floor: %d of %d nodes", n, len(l.f.cs))
	}
	return nil
}

func (l *floorScriptsLock) Unlock(ctx context.Context) error {
	n := each(l.f.cs, func(c rueidis.Client) bool {
		v, err := releaseLua.Exec(ctx, c, l.keys.ScriptKeys(), []string{l.token, l.keys.Channel, "PUBLISH", "", "leave"}).AsIntSlice()
		return err == nil && len(v) > 0 && v[0] == 1
	})
	if n < l.f.quorum {
		return fmt.Errorf("floor: released on %d of %d nodes", n, len(l.f.cs))
	}
	return nil
}
