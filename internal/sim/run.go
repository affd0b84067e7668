package sim

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/internal/simlua"
)

// The run's timing, in virtual time.
const (
	nodeTimeout = 100 * time.Millisecond
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

	// Extra adds ExtraWorkloads to the cycle of workloads that Seed picks from.
	Extra bool

	// SkewAcrossRestarts lets Mix combine crashes with clock offsets beyond what the
	// restart guard covers: a mode expected to break the fencing tokens' order, outside
	// the library's contract (WithRestartGuard: the guard must exceed 2 s plus the largest
	// difference between the servers' clocks). A restarted server's fence counter starts
	// again from its own clock, and the counters can lead the slowest server's clock by
	// the skew (a token from a server a minute ahead, then, after a majority restarted,
	// tokens from the others' clocks: `-workload lease -kind mix -seed 105 -skew`). Off
	// in the default set and in `make sim`; the -skew flag turns it on.
	SkewAcrossRestarts bool

	// LooseKeys lets a script's command name a key the script was not given in KEYS. By
	// default the servers refuse it (simlua.Checks.StrictKeys), as Redis's scripting
	// contract asks, and each refusal is a violation of the run.
	LooseKeys bool
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

	writers map[string][]string // see Writers
}

// Writers returns the record of the run's writes: for each key that a script wrote on any
// of the run's servers, through redis.call or redis.pcall, the names of the scripts that
// wrote it (core.Script.Name), sorted, each once. A script writes a key when it calls a
// command that may modify it, naming the key, whether or not the call changed it (see
// simlua.Record); the clients' own commands (SetNX) are not recorded. The map is the
// caller's.
func (r Result) Writers() map[string][]string {
	out := make(map[string][]string, len(r.writers))
	for k, v := range r.writers {
		out[k] = slices.Clone(v)
	}
	return out
}

// Run runs one simulation: it must be called inside a testing/synctest bubble, on whose
// clock everything in it runs.
func Run(cfg Config) Result {
	kinds, works := Kinds(), Workloads()
	if cfg.Extra {
		works = append(works, ExtraWorkloads()...)
	}
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
	res.Clients = clientsOf(cfg.Workload)
	servers := res.N
	if cfg.Workload == wTwoAddrs {
		res.N, servers = 3, 2
	}
	from, to := start.Add(warmUp), start.Add(warmUp+window)
	if cfg.Workload == wHold { // holdings of several TTLs: a window for a few dozen of them
		to = from.Add(4 * window)
	}
	tm := drawTiming(rand.New(rand.NewPCG(cfg.Seed, 0x7171)))
	if cfg.Workload == wHold { // holdings of several validities
		tm.step = tm.ttl + time.Duration(rng.Int64N(int64(tm.ttl/2)))
	}
	p := newPlan(cfg.Kind, rng, start, from, to, servers, res.Clients, tm.ttl, nodeTimeout, cfg.SkewAcrossRestarts)
	if cfg.Workload == wTwoAddrs { // the second server out of reach: the first must not count twice
		p.cuts = append(p.cuts, cut{client: -1, server: 1, toServer: true, toClient: true, from: start, to: from.Add(window / 2)})
	}
	rec := newRecorder(start)
	e := &env{plan: p, rec: rec, timing: tm, nodes: res.N, quorum: res.N/2 + 1, bad: make(chan violation, 1)}
	e.mixedK = (cfg.Workload == wSemaphore || cfg.Workload == wCSemaphore) && rng.IntN(2) == 0
	e.sharded = sharded(cfg.Workload)
	e.crowd = cfg.Workload == wCrowd
	e.leaders = cfg.Workload == wElection
	e.spaced = cfg.Workload == wHold
	// Every workload of one lock, with one K, waits in one queue (sets: names in common
	// decide who waits for whom; twoaddrs grants nothing).
	e.fifo = cfg.Workload != wSets && cfg.Workload != wTwoAddrs && cfg.Workload != wCluster && !e.mixedK
	e.stopOnInvalid = cfg.Workload == wTwoAddrs
	if cfg.Workload == wSemaphore || cfg.Workload == wCSemaphore {
		e.permits = 2
	}
	rec.noteAt(start, "seed %d: %s, N=%d, %d clients, TTL %v, guard %v, steps<=%v, %s%s%s", cfg.Seed, cfg.Workload, res.N, res.Clients, tm.ttl, tm.guard, tm.step,
		p, map[bool]string{true: ", client 0 counts K=3"}[e.mixedK], describe(cfg.Workload))
	healed := scheduleNotes(rec, p, tm.guard, to)

	sc := scripting{scripts: &scriptNames{}, strict: !cfg.LooseKeys, writes: simlua.NewRecord(), report: e.report}
	for i := range servers {
		e.servers = append(e.servers, newServer(fmt.Sprintf("s%d", i), p.clocks[i], rand.New(rand.NewPCG(cfg.Seed, uint64(1000+i))), sc))
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

	bound := livenessBound(tm, res.Clients)
	end := healed.Add(bound + 200*time.Millisecond)
	res.Virtual = end.Sub(start)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()

	var closers []func()
	var actors sync.WaitGroup
	if cfg.Workload == wCrowd { // the crowd: the client after the actors (see crowd.go)
		p.deaths[res.Clients] = start.Add(crowdDies)
		c, _, closeClient := e.client(cfg.Seed, res.Clients, res.N, false)
		closers = append(closers, closeClient)
		a := &actor{id: res.Clients, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(2000+res.Clients))), env: e}
		actors.Go(func() { runCrowd(ctx, a, c) })
	}
	for i := range res.Clients {
		c, cl, closeClient := e.client(cfg.Seed, i, res.N, cfg.Workload == wSets)
		closers = append(closers, closeClient)
		a := &actor{id: i, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(2000+i))), env: e, keeps: true}
		if cfg.Workload == wCrowd {
			a.after = crowdDies + time.Duration(i)*crowdStagger
		}
		if cfg.Workload == wDo {
			actors.Go(func() { a.runDo(ctx, c) })
			continue
		}
		a.acquire = acquirer(cfg.Workload, a, c, cl)
		actors.Go(func() { a.run(ctx) })
	}
	if cfg.Workload == wElection {
		c, _, closeClient := e.client(cfg.Seed, res.Clients, res.N, false)
		closers = append(closers, closeClient)
		actors.Go(func() { observe(ctx, e, c, rand.New(rand.NewPCG(cfg.Seed, 0x1ead))) })
	}
	actors.Wait()
	crashes.Wait()
	e.checks.Wait()
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
	e.judge(&res, cfg.Lines, vs, from, to, healed, end, bound)
	res.writers = sc.writes.Writers(sc.scripts.name)
	return res
}

// judge completes res from the run's record: the violations (vs, found during the run,
// and those of the invariants), the trace up to the first, and the figures. from and to
// are the fault window, healed when the faults healed, end the run's end, bound the
// liveness bound, lines the most lines of trace.
func (e *env) judge(res *Result, lines int, vs []violation, from, to, healed, end time.Time, bound time.Duration) {
	rec := e.rec
	select {
	case v := <-e.bad:
		vs = append(vs, v)
	default:
	}
	rec.mu.Lock()
	hs := slices.Clone(rec.holdings) // each still held when the run ended, to its end
	rec.mu.Unlock()
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
	res.LongWait, res.Bound = longestWait(rec, e.plan, healed, end), bound
	rec.mu.Lock()
	res.Grants, res.Calls = len(rec.holdings), maps.Clone(rec.calls)
	res.LongIdle, _ = longestIdle(rec, e.plan, hs, e.permits)
	rec.mu.Unlock()
	res.Trace = rec.trace(until, cmp.Or(lines, 60))
}

// observe watches an Election's leader, recording each value seen, until ctx ends; and,
// with reads, calls Leader every 100 to 300 ms besides (rng draws the gaps), recording each
// answer.
func observe(ctx context.Context, env *env, c *redlock.Client, rng *rand.Rand) {
	rec, reads := env.rec, env.leaders
	e := c.NewElection(lockName)
	var wg sync.WaitGroup
	if reads {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(100*time.Millisecond + time.Duration(rng.Int64N(int64(200*time.Millisecond)))):
				}
				rctx, cancel := context.WithTimeout(ctx, 3*nodeTimeout)
				from := time.Now()
				v, err := e.Leader(rctx)
				cancel()
				if ctx.Err() == nil {
					rec.read(from, v, err, env.standing())
				}
			}
		})
	}
	for v := range e.Observe(ctx) {
		rec.observe(v, reads && env.standing())
	}
	wg.Wait()
}
