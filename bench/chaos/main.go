// Command chaos checks the redlock library under faults: 5 redis-server processes on
// 127.0.0.1 (no persistence), each behind a fault-injecting TCP proxy per worker, and W
// workers that each take one lock through their own Client, write to a shared ledger with
// their fencing token, hold, sometimes extend, and release. Each nemesis (a kind of fault)
// runs for -duration; the record is then checked for mutual exclusion, token order and
// stale writes accepted, and the share of the time the lock was held is measured.
//
//	cd bench && go run ./chaos                          # every nemesis, 20 s each, go-redis
//	go run ./chaos -nemesis partition,sigstop -duration 5s -backend rueidis
//
// REDLOCK_TEST_SERVER=valkey-server runs valkey-server processes instead of redis-server.
//
// It prints a table per nemesis and ends with one line "chaos: N nemeses, V violations";
// the exit status is 1 if V > 0. Everything is local and bounded: servers and proxies
// listen on 127.0.0.1 only, every loop is bounded in count and time, and a watchdog kills
// the servers and exits if the run overruns. See docs/chaos.md.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-redlock/redlock"
)

// nodes is the number of servers; the asymmetric partition's shapes assume 5.
const nodes = 5

func main() { os.Exit(run()) }

func run() int {
	var (
		backend  = flag.String("backend", "goredis", "driver: goredis, redigo or rueidis")
		mode     = flag.String("mode", modeLease, "workers: lease (Acquire, hold 1-50 ms, Release), election (Campaign, lead until lost, campaign again) or election-turns (Campaign, lead 1-50 ms, resign)")
		nemFlag  = flag.String("nemesis", "all", "comma-separated nemeses to run, or all: "+nemesisNames())
		duration = flag.Duration("duration", 20*time.Second, "how long each nemesis runs")
		workers  = flag.Int("workers", 5, "workers, each with its own Client (1-16)")
		ttl      = flag.Duration("ttl", 500*time.Millisecond, "lock TTL (WithTTL)")
		nodeTO   = flag.Duration("node-timeout", 100*time.Millisecond, "per-node timeout (WithNodeTimeout)")
		guard    = flag.Duration("guard", 2*time.Second, "restart guard (WithRestartGuard)")
		seed     = flag.Uint64("seed", 0, "seed of the nemeses' and workers' randomness (0: from the time)")
		trace    = flag.Bool("trace", true, "print, per nemesis, what the traced node calls say about where availability went")
		gapDump  = flag.Duration("gap-dump", 0, "print every gap with no valid holder of at least this long, with the calls under way in it (0: none)")
		lossDump = flag.Bool("loss-dump", false, "print, for each lease that ended before its worker let go (a lost leadership), the extension rounds of its last TTL")
	)
	flag.Parse()
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	selected, err := pickNemeses(*nemFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	if _, ok := backends[*backend]; !ok {
		fmt.Fprintf(os.Stderr, "chaos: unknown backend %q (goredis, redigo, rueidis)\n", *backend)
		return 2
	}
	if !slices.Contains(modes, *mode) {
		fmt.Fprintf(os.Stderr, "chaos: unknown mode %q (%s)\n", *mode, strings.Join(modes, ", "))
		return 2
	}
	if *workers < 1 || *workers > 16 || *duration <= 0 || *duration > 10*time.Minute {
		fmt.Fprintln(os.Stderr, "chaos: -workers wants 1-16 and -duration (0, 10m]")
		return 2
	}
	ls := lockSettings{backend: *backend, opts: []redlock.Option{
		redlock.WithTTL(*ttl), redlock.WithNodeTimeout(*nodeTO), redlock.WithRestartGuard(*guard),
	}}
	cfg := phaseConfig{lock: ls, mode: *mode, workers: *workers, duration: *duration, ttl: *ttl, nodeTimeout: *nodeTO, guard: *guard, seed: *seed}

	// Stop the servers however the program ends: return, panic, SIGINT/SIGTERM, watchdog
	// (and on Linux, the parent-death signal if this process is killed).
	defer stopAll()
	defer func() {
		if r := recover(); r != nil {
			stopAll()
			panic(r)
		}
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "chaos: %v: stopping the servers\n", s)
		stopAll()
		os.Exit(130)
	}()
	// Each nemesis takes its duration, the restart guard before it, and the workers' and
	// clients' wind-down; the watchdog allows that and a margin.
	budget := time.Duration(len(selected))*(*duration+*guard+30*time.Second) + time.Minute
	watchdog := time.AfterFunc(budget, func() {
		fmt.Fprintf(os.Stderr, "chaos: watchdog: the run exceeded %v; killing the servers\n", budget)
		stopAll()
		os.Exit(3)
	})
	defer watchdog.Stop()

	header(os.Stdout, os.Args[1:], *seed)
	fmt.Fprintf(stderr, "chaos: starting %d %s processes\n", nodes, serverBinary())
	servers, err := startServers(nodes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	if busy, rested, err := roundTrips(servers[0].addr(), 200, 10*time.Millisecond); err == nil {
		fmt.Printf("loopback PING round trip, median of 200: %v back to back, %v after 10 ms idle each\n\n",
			busy.Round(time.Microsecond), rested.Round(time.Microsecond))
	}
	clk := newClock()
	quorum := nodes/2 + 1
	var verdicts []verdict
	violations := 0
	for i, nem := range selected {
		fmt.Fprintf(stderr, "chaos: %s for %v...\n", nem.name, *duration)
		ph, err := runPhase(clk, cfg, servers, nem, i)
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %s: %v\n", nem.name, err)
			return 1
		}
		v := check(ph, quorum, nodes)
		var ev *evidence
		if *trace {
			e := gather(ph, quorum)
			ev = &e
		}
		printPhase(os.Stdout, ph, v, ev)
		if *gapDump > 0 {
			v.gaps.dump(os.Stdout, ph, v.leases, quorum, *gapDump)
		}
		if *lossDump {
			dumpLosses(os.Stdout, ph, quorum)
		}
		verdicts = append(verdicts, v)
		violations += v.violations()
	}
	printSummary(os.Stdout, verdicts)
	fmt.Printf("chaos: %d nemeses, %d violations\n", len(verdicts), violations)
	if violations > 0 {
		return 1
	}
	return 0
}

func nemesisNames() string {
	var names []string
	for _, n := range nemeses {
		names = append(names, n.name)
	}
	return strings.Join(names, ",")
}

// pickNemeses parses -nemesis.
func pickNemeses(list string) ([]nemesis, error) {
	if strings.TrimSpace(list) == "all" {
		return nemeses, nil
	}
	var out []nemesis
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(nemeses, func(n nemesis) bool { return n.name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown nemesis %q (want all or some of %s)", name, nemesisNames())
		}
		out = append(out, nemeses[i])
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no nemesis given")
	}
	return out, nil
}

// newRand returns a generator seeded by seed and stream.
func newRand(seed, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }
