package sim

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// The run's timing, in virtual time.
const (
	ttl         = time.Second
	nodeTimeout = 100 * time.Millisecond
	guardN      = 2 * time.Second // the restart guard at N > 1 (at N = 1 the library's default)
	warmUp      = 200 * time.Millisecond
	window      = 3 * time.Second // the fault window, after the warm-up
	settle      = 5 * time.Second // after the Clients closed, for what is under way to end
)

// Config says what a run does; its zero fields are drawn from the seed.
type Config struct {
	Seed     uint64
	Kind     Kind   // "": Kinds()[Seed % len]
	Workload string // "": Workloads()[Seed / len(Kinds()) % len]
	Lines    int    // the most lines of trace to keep (the last ones); 0: 60
	N        int    // the number of servers; 0: 1, 3, 3 or 5, drawn from the seed
}

// Result is a run's outcome.
type Result struct {
	Seed       uint64
	Kind       Kind
	Workload   string
	N, Clients int
	Violations []string
	Trace      string         // the trace up to the first violation (or the whole run's end)
	Held       float64        // the share of the fault window in which some client held the lock
	Grants     int            // holdings granted
	Calls      map[string]int // calls sent to the servers, per script
	LongWait   time.Duration  // the longest wait after the faults healed (see longestWait)
	LongIdle   time.Duration  // the longest wait while the lock was free (see longestIdle)
	Bound      time.Duration  // the liveness bound it is checked against
	Virtual    time.Duration  // the run's length in virtual time
}

// env is what a run's actors share.
type env struct {
	plan    *plan
	rec     *recorder
	ttl     time.Duration
	mixedK  bool // Semaphore: client 0 counts 3 permits, the others 2
	permits int  // Semaphore: the permits its waiters count (2); else 0
	// stopOnInvalid: an actor stops at an error that matches ErrInvalid (twoaddrs, where
	// the library must refuse the configuration)
	stopOnInvalid bool
	servers       []*simServer // twoaddrs: checkServers looks at them
	quorum        int
	bad           chan violation // violations found during the run (twoaddrs)
}

// checkServers records a violation if fewer than a quorum of distinct servers hold the lock
// that client was just granted (twoaddrs: two of its three Nodes reach one server).
func (e *env) checkServers(client int) {
	key := core.NewKeys("redlock:", lockName).Lock
	holding := 0
	for _, s := range e.servers {
		if m := s.sync(); m != nil && m.Exists(key) {
			holding++
		}
	}
	if holding < e.quorum {
		select {
		case e.bad <- violation{time.Now(), fmt.Sprintf("c%d granted the lock held on %d distinct server(s), fewer than a quorum (%d): one server counted twice",
			client, holding, e.quorum)}:
		default:
		}
	}
}

// Run runs one simulation: it must be called inside a testing/synctest bubble, on whose
// clock everything in it runs.
func Run(cfg Config) Result {
	kinds, works := Kinds(), Workloads()
	if cfg.Kind == "" {
		cfg.Kind = kinds[cfg.Seed%uint64(len(kinds))]
	}
	if cfg.Workload == "" {
		cfg.Workload = works[cfg.Seed/uint64(len(kinds))%uint64(len(works))]
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5151))
	start := time.Now()
	res := Result{Seed: cfg.Seed, Kind: cfg.Kind, Workload: cfg.Workload}
	res.N = []int{1, 3, 3, 5}[rng.IntN(4)]
	if cfg.N > 0 {
		res.N = cfg.N
	}
	res.Clients = 3
	servers := res.N
	if cfg.Workload == wTwoAddrs {
		res.N, servers = 3, 2
	}
	from, to := start.Add(warmUp), start.Add(warmUp+window)
	p := newPlan(cfg.Kind, rng, start, from, to, servers, res.Clients, ttl, nodeTimeout)
	if cfg.Workload == wTwoAddrs { // the second server out of reach: the first must not count twice
		p.cuts = append(p.cuts, cut{client: -1, server: 1, toServer: true, toClient: true, from: start, to: from.Add(window / 2)})
	}
	rec := newRecorder(start)
	e := &env{plan: p, rec: rec, ttl: ttl, quorum: res.N/2 + 1, bad: make(chan violation, 1)}
	e.mixedK = cfg.Workload == wSemaphore && rng.IntN(2) == 0
	e.stopOnInvalid = cfg.Workload == wTwoAddrs
	if cfg.Workload == wSemaphore {
		e.permits = 2
	}
	rec.noteAt(start, "seed %d: %s, N=%d, %d clients, %s%s", cfg.Seed, cfg.Workload, res.N, res.Clients, p, map[bool]string{true: ", client 0 counts K=3"}[e.mixedK])
	healed := scheduleNotes(rec, p, to)

	for i := range servers {
		e.servers = append(e.servers, newServer(fmt.Sprintf("s%d", i), p.clocks[i], rand.New(rand.NewPCG(cfg.Seed, uint64(1000+i)))))
	}
	var crashes sync.WaitGroup
	for _, c := range p.crashes {
		crashes.Go(func() {
			time.Sleep(time.Until(c.at))
			e.servers[c.server].crash()
			time.Sleep(c.downFor)
			e.servers[c.server].restart()
		})
	}

	bound := livenessBound(res.Clients)
	end := healed.Add(bound + 200*time.Millisecond)
	res.Virtual = end.Sub(start)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()

	var closers []func()
	var actors sync.WaitGroup
	for i := range res.Clients {
		c, closeClient := e.client(cfg.Seed, i, res.N)
		closers = append(closers, closeClient)
		a := &actor{id: i, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(2000+i))), env: e, keeps: true}
		if cfg.Workload == wDo {
			actors.Go(func() { a.runDo(ctx, c) })
			continue
		}
		a.acquire = acquirer(cfg.Workload, a, c)
		actors.Go(func() { a.run(ctx) })
	}
	if cfg.Workload == wElection {
		c, closeClient := e.client(cfg.Seed, res.Clients, res.N)
		closers = append(closers, closeClient)
		actors.Go(func() { observe(ctx, rec, c) })
	}
	actors.Wait()
	crashes.Wait()
	time.Sleep(2 * nodeTimeout) // releases still on their way to slower nodes land
	var vs []violation
	vs = append(vs, e.checkTTLs()...)
	for _, f := range closers {
		f()
	}
	for _, s := range e.servers {
		s.crash()
	}
	// Time stops in the bubble once Run returns, and the bubble fails if a goroutine is
	// left: what is still under way (a call to its deadline, a dead client's lease to its
	// validity's end) has this long to end.
	time.Sleep(settle)
	select {
	case v := <-e.bad:
		vs = append(vs, v)
	default:
	}
	hs := slices.Clone(rec.holdings) // each still held when the run ended, to its end
	for i := range hs {
		if hs[i].to.IsZero() {
			hs[i].to = end
		}
	}
	vs = append(vs, check(rec, e, hs, healed, end, bound)...)
	slices.SortStableFunc(vs, func(a, b violation) int { return a.at.Compare(b.at) })
	for _, v := range vs {
		res.Violations = append(res.Violations, rec.since(v.at)+" "+v.text)
	}
	until := time.Time{}
	if len(vs) > 0 {
		until = vs[0].at
	}
	res.Held = heldShare(rec, from, to)
	res.Grants, res.Calls = len(rec.holdings), rec.calls
	res.LongWait, res.Bound = longestWait(rec, p, healed, end), bound
	rec.mu.Lock()
	res.LongIdle, _ = longestIdle(rec, p, hs, e.permits)
	rec.mu.Unlock()
	res.Trace = rec.trace(until, cmp.Or(cfg.Lines, 60))
	return res
}

// observe watches an Election's leader, recording each value seen, until ctx ends.
func observe(ctx context.Context, rec *recorder, c *redlock.Client) {
	for v := range c.NewElection(lockName).Observe(ctx) {
		rec.observe(v)
	}
}

// client returns client i's redlock Client over n nodes, each a go-redis client through
// its link, and the function that closes it all.
func (e *env) client(seed uint64, i, n int) (*redlock.Client, func()) {
	var nodes []redlock.Node
	var rdbs []*redis.Client
	for j := range n {
		s := j
		if len(e.servers) < n { // twoaddrs: nodes 0 and 1 reach server 0
			s = max(0, j-1)
		}
		srv := e.servers[s]
		rdb := redis.NewClient(&redis.Options{
			Addr:                     fmt.Sprintf("10.0.%d.%d:6379", s, j), // an IP: go-redis resolves a host name
			Dialer:                   func(context.Context, string, string) (net.Conn, error) { return srv.dial() },
			ContextTimeoutEnabled:    true,
			DisableIdentity:          true,
			Protocol:                 2,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		})
		rdbs = append(rdbs, rdb)
		l := &link{client: i, server: s, srv: srv, plan: e.plan, rec: e.rec, execTimeout: time.Second,
			rng: rand.New(rand.NewPCG(seed, uint64(3000+100*i+j)))}
		nodes = append(nodes, &node{inner: goredis.New(rdb), link: l})
	}
	opts := []redlock.Option{redlock.WithTTL(ttl), redlock.WithNodeTimeout(nodeTimeout)}
	if n > 1 {
		opts = append(opts, redlock.WithRestartGuard(guardN))
	}
	c, err := redlock.New(nodes, opts...)
	if err != nil {
		panic(err) // the configuration is the simulation's own
	}
	return c, func() {
		_ = c.Close()
		for _, r := range rdbs {
			_ = r.Close()
		}
	}
}

// checkTTLs returns a violation for each key that a server holds without a TTL.
func (e *env) checkTTLs() []violation {
	var out []violation
	for _, s := range e.servers {
		for _, k := range s.keys() {
			if k.ttl <= 0 {
				out = append(out, violation{time.Now(), fmt.Sprintf("key %q on %s has no TTL", k.key, s.name)})
			}
		}
	}
	return out
}
