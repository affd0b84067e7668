package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// env is what a nemesis acts on: the servers, each worker's proxies to them, and the
// workers' pause requests. It records the faults it injected, and when each server could
// not vote (so the report can say how much of the time a quorum was there at all).
type env struct {
	servers []*server
	proxies [][]*proxy // [worker][server]
	pause   []atomic.Bool
	ttl     time.Duration
	guard   time.Duration
	clk     clock
	rng     *rand.Rand

	mu     sync.Mutex
	faults map[string]int
	down   []downSpan
	log    []faultNote
	rtts   []rttSet
}

// rttSet is the round-trip delay the proxies add to each server's calls, from at on (the
// latency nemesis's steps), the same for every worker.
type rttSet struct {
	at  time.Duration
	rtt []time.Duration
}

// faultNote is one change of the faults, as the gap dump shows it.
type faultNote struct {
	at   time.Duration
	text string
}

// note records a change of the faults at the time of the call.
func (e *env) note(format string, args ...any) {
	at := e.clk.now()
	e.mu.Lock()
	if len(e.log) < maxSteps {
		e.log = append(e.log, faultNote{at, fmt.Sprintf(format, args...)})
	}
	e.mu.Unlock()
}

// downSpan is a time when one server could not vote: blackholed for everyone, stopped,
// dead, or restarted and abstaining under the restart guard.
type downSpan struct {
	server   int
	from, to time.Duration
}

// nemesis injects one kind of fault until ctx ends, and then lifts it (every nemesis
// leaves the servers running and continued, and the proxies healed).
type nemesis struct {
	name string
	help string
	run  func(ctx context.Context, e *env)
}

// nemeses are every nemesis, in the order they run.
var nemeses = []nemesis{
	{"none", "no fault", func(ctx context.Context, e *env) { <-ctx.Done() }},
	{"latency", "every 0.5-2 s, each server with probability 0.45 gets a one-way delay of 2-200 ms (one direction, on every worker's proxy)", latency},
	{"partition", "a random minority (1-2 servers) blackholed for 1-3 s, then 0.5-1.5 s healed", partition},
	{"conn-reset", "every 100-500 ms, every connection to a random server is reset (RST)", connReset},
	{"sigstop", "a random minority SIGSTOPped for 0.2-3 TTLs, then 0.2-1 s continued", sigstop},
	{"kill9-restart", "every 1-3 s, a random minority killed with SIGKILL and restarted at once, empty", kill9Restart},
	{"kill9-delayed", "a random minority killed with SIGKILL, restarted empty 1-3 s later, then 1-3 s up", kill9Delayed},
	{"client-pause", "every 0.5-1.5 s, a random worker pauses 1.2-2 TTLs at its next holding, between checking its validity and writing", clientPause},
	{"asym-partition", "every 2-4 s, each worker reaches its own majority of 3 servers (one server common to all, the other two differ per worker), the other 2 blackholed for it", asymPartition},
}

// Bound of every nemesis loop, beside ctx.
const maxSteps = 100_000

func (e *env) count(fault string) {
	e.mu.Lock()
	if e.faults == nil {
		e.faults = map[string]int{}
	}
	e.faults[fault]++
	e.mu.Unlock()
}

// markDown records that server i could not vote from from to to.
func (e *env) markDown(i int, from, to time.Duration) {
	e.mu.Lock()
	e.down = append(e.down, downSpan{i, from, to})
	e.mu.Unlock()
}

// sleep waits d or until ctx ends, and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// between returns a random duration in [lo, hi).
func (e *env) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(e.rng.Int64N(int64(hi-lo)))
}

// minority returns 1 or 2 distinct random servers.
func (e *env) minority() []int {
	return e.rng.Perm(len(e.servers))[:1+e.rng.IntN((len(e.servers)-1)/2)]
}

// eachProxy runs f on every worker's proxy to server i.
func (e *env) eachProxy(i int, f func(p *proxy)) {
	for _, ps := range e.proxies {
		f(ps[i])
	}
}

func latency(ctx context.Context, e *env) {
	defer e.healAll()
	for range maxSteps {
		var set []string
		rtt := make([]time.Duration, len(e.servers))
		for i := range e.servers {
			var up, down time.Duration
			if e.rng.Float64() < 0.45 {
				d := e.between(2*time.Millisecond, 200*time.Millisecond)
				if e.rng.IntN(2) == 0 {
					up = d
				} else {
					down = d
				}
				e.count("delay")
				set = append(set, fmt.Sprintf("n%d up %s down %s", i, up, down))
			}
			rtt[i] = up + down
			e.eachProxy(i, func(p *proxy) { p.setDelay(up, down) })
		}
		e.note("delays: %v", set)
		e.mu.Lock()
		e.rtts = append(e.rtts, rttSet{e.clk.now(), rtt})
		e.mu.Unlock()
		if !sleep(ctx, e.between(500*time.Millisecond, 2*time.Second)) {
			return
		}
	}
}

func partition(ctx context.Context, e *env) {
	defer e.healAll()
	for range maxSteps {
		cut := e.minority()
		from := e.clk.now()
		for _, i := range cut {
			e.eachProxy(i, func(p *proxy) { p.setBlackhole(true) })
			e.count("blackhole")
		}
		e.note("blackholed: %v", cut)
		live := sleep(ctx, e.between(time.Second, 3*time.Second))
		for _, i := range cut {
			e.eachProxy(i, func(p *proxy) { p.setBlackhole(false) })
			e.markDown(i, from, e.clk.now())
		}
		e.note("healed: %v", cut)
		if !live || !sleep(ctx, e.between(500*time.Millisecond, 1500*time.Millisecond)) {
			return
		}
	}
}

func connReset(ctx context.Context, e *env) {
	for range maxSteps {
		i := e.rng.IntN(len(e.servers))
		e.eachProxy(i, func(p *proxy) {
			for range p.reset() {
				e.count("reset")
			}
		})
		if !sleep(ctx, e.between(100*time.Millisecond, 500*time.Millisecond)) {
			return
		}
	}
}

func sigstop(ctx context.Context, e *env) {
	for range maxSteps {
		stop := e.minority()
		from := e.clk.now()
		for _, i := range stop {
			e.servers[i].signal(true)
			e.count("sigstop")
		}
		e.note("stopped: %v", stop)
		live := sleep(ctx, e.between(e.ttl/5, 3*e.ttl))
		for _, i := range stop {
			e.servers[i].signal(false)
			e.markDown(i, from, e.clk.now())
		}
		e.note("continued: %v", stop)
		if !live || !sleep(ctx, e.between(200*time.Millisecond, time.Second)) {
			return
		}
	}
}

// restart kills server i with SIGKILL and, after wait (0: at once), starts it again on
// its port, empty; it records the server as unable to vote until its restart guard ends.
func (e *env) restart(ctx context.Context, i int, wait time.Duration) bool {
	from := e.clk.now()
	e.servers[i].kill()
	e.count("kill9")
	live := wait == 0 || sleep(ctx, wait)
	if err := e.servers[i].start(); err != nil {
		e.count("restart-failed")
		return live
	}
	e.markDown(i, from, e.clk.now()+guardEnd(e.guard))
	return live
}

func kill9Restart(ctx context.Context, e *env) {
	for range maxSteps {
		for _, i := range e.minority() {
			e.restart(ctx, i, 0)
		}
		if !sleep(ctx, e.between(time.Second, 3*time.Second)) {
			return
		}
	}
}

func kill9Delayed(ctx context.Context, e *env) {
	for range maxSteps {
		victims := e.minority()
		wait := e.between(time.Second, 3*time.Second)
		live := true
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, i := range victims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok := e.restart(ctx, i, wait)
				mu.Lock()
				live = live && ok
				mu.Unlock()
			}()
		}
		wg.Wait()
		if !live || !sleep(ctx, e.between(time.Second, 3*time.Second)) {
			return
		}
	}
}

func clientPause(ctx context.Context, e *env) {
	for range maxSteps {
		e.pause[e.rng.IntN(len(e.pause))].Store(true)
		e.count("pause")
		if !sleep(ctx, e.between(500*time.Millisecond, 1500*time.Millisecond)) {
			break
		}
	}
	for i := range e.pause {
		e.pause[i].Store(false)
	}
}

func asymPartition(ctx context.Context, e *env) {
	defer e.healAll()
	n := len(e.servers)
	for range maxSteps {
		order := e.rng.Perm(n)
		common, others := order[0], order[1:]
		// Every pair of the other servers, shuffled: worker w reaches common and pair w.
		var pairs [][2]int
		for a := range others {
			for b := a + 1; b < len(others); b++ {
				pairs = append(pairs, [2]int{others[a], others[b]})
			}
		}
		e.rng.Shuffle(len(pairs), func(a, b int) { pairs[a], pairs[b] = pairs[b], pairs[a] })
		var reach []string
		for w, ps := range e.proxies {
			pair := pairs[w%len(pairs)]
			for i, p := range ps {
				p.setBlackhole(i != common && i != pair[0] && i != pair[1])
			}
			reach = append(reach, fmt.Sprintf("w%d %v", w, []int{common, pair[0], pair[1]}))
		}
		e.note("reach: %v", reach)
		e.count("asym")
		if !sleep(ctx, e.between(2*time.Second, 4*time.Second)) {
			return
		}
	}
}

// healAll lifts every proxy fault.
func (e *env) healAll() {
	for _, ps := range e.proxies {
		for _, p := range ps {
			p.heal()
		}
	}
}
