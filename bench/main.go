// Command bench compares github.com/go-redlock/redlock with redsync, bsm/redislock and
// rueidislock, in one run on one machine, against a hand-written floor and a plain PING.
//
// It starts its own redis-server processes on 127.0.0.1 (no persistence), measures, and
// stops them by PID at exit (also on SIGINT/SIGTERM and on a panic; on Linux a server also
// dies with this process). Markdown tables go to stdout; the machine facts, every raw
// measurement and the tables go to -out (results.txt).
//
//	cd bench && go run .                     # everything, a few minutes
//	go run . -tests uncontended -n 5 -impls floor,redlock-goredis,redsync-goredis
//	go run . -list                           # the rows and their settings
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	ns, gs            []int
	tests             map[string]bool
	impls             []impl
	dur, handoffDur   time.Duration
	maxCount, rounds  int
	ping              bool
	hold, think       time.Duration
	goroutines, names int
}

func main() {
	os.Exit(run())
}

func run() (code int) {
	var (
		nsFlag     = flag.String("n", "1,5", "node counts N to measure (at most 5)")
		gsFlag     = flag.String("g", "2,8,32", "goroutine counts G for the handoff test")
		testsFlag  = flag.String("tests", "uncontended,throughput,handoff,servercost", "tests to run: uncontended (latency and allocations), throughput, handoff, servercost (the server's own time per lock+unlock pair, from INFO commandstats)")
		implsFlag  = flag.String("impls", "", "comma-separated row keys to run (default all; see -list); floor is always useful for the ratios")
		dur        = flag.Duration("d", 2*time.Second, "duration of each uncontended and throughput measurement")
		handoffDur = flag.Duration("hd", 2*time.Second, "duration of each handoff measurement")
		rounds     = flag.Int("rounds", 5, "uncontended and throughput: split each row's -d into this many rounds, interleaved with the other rows'")
		maxCount   = flag.Int("count", 20000, "at most this many pairs per uncontended measurement (and acquisitions per handoff)")
		hold       = flag.Duration("hold", time.Millisecond, "how long a handoff holder keeps the lock")
		think      = flag.Duration("think", 0, "handoff: how long a goroutine waits after its Unlock before its next Lock (0: at once)")
		goroutines = flag.Int("goroutines", 64, "goroutines in the throughput test")
		names      = flag.Int("names", 16, "names per goroutine in the throughput test (no two goroutines share one)")
		out        = flag.String("out", "results.txt", "file for the raw output and the tables (\"\" for none)")
		maxLoad    = flag.Float64("maxload", 0, "before measuring, wait until the 1-minute load average is below this (0: do not wait)")
		loadWait   = flag.Duration("loadwait", 10*time.Minute, "the longest -maxload waits")
		cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the measurements to this file")
		memProfile = flag.String("memprofile", "", "write an allocation profile to this file (sets MemProfileRate to -memrate: timings are then slower)")
		memRate    = flag.Int("memrate", 1, "runtime.MemProfileRate with -memprofile")
		ping       = flag.Bool("ping", true, "uncontended: include the PING rows")
		list       = flag.Bool("list", false, "list the rows and their settings, and exit")
	)
	flag.Parse()

	all := impls()
	if *list {
		for _, im := range all {
			fmt.Printf("%-16s %s\n%18s%s\n", im.key, im.name, "", im.notes)
		}
		return 0
	}
	cfg := config{think: *think, ping: *ping, rounds: *rounds, dur: *dur, handoffDur: *handoffDur, maxCount: *maxCount, hold: *hold, goroutines: *goroutines, names: *names}
	var err error
	if cfg.ns, err = ints(*nsFlag); err != nil || slices.ContainsFunc(cfg.ns, func(n int) bool { return n < 1 || n > 5 }) {
		fmt.Fprintln(os.Stderr, "bench: -n wants node counts from 1 to 5")
		return 2
	}
	if cfg.gs, err = ints(*gsFlag); err != nil || slices.ContainsFunc(cfg.gs, func(g int) bool { return g < 1 }) {
		fmt.Fprintln(os.Stderr, "bench: -g wants positive goroutine counts")
		return 2
	}
	cfg.tests = map[string]bool{}
	for _, t := range strings.Split(*testsFlag, ",") {
		switch t = strings.TrimSpace(t); t {
		case "uncontended", "throughput", "handoff", "servercost":
			cfg.tests[t] = true
		case "":
		default:
			fmt.Fprintf(os.Stderr, "bench: unknown test %q\n", t)
			return 2
		}
	}
	if *implsFlag == "" {
		cfg.impls = all
	} else {
		for _, k := range strings.Split(*implsFlag, ",") {
			i := slices.IndexFunc(all, func(im impl) bool { return im.key == strings.TrimSpace(k) })
			if i < 0 {
				fmt.Fprintf(os.Stderr, "bench: unknown row %q (see -list)\n", k)
				return 2
			}
			cfg.impls = append(cfg.impls, all[i])
		}
	}

	// Stop the servers however the program ends: return, panic, SIGINT/SIGTERM.
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
		fmt.Fprintf(os.Stderr, "bench: %v: stopping the servers\n", s)
		stopAll()
		os.Exit(130)
	}()

	if *maxLoad > 0 {
		waitForLoad(*maxLoad, *loadWait)
	}

	var raw strings.Builder
	logw := io.MultiWriter(os.Stderr, &raw)
	loadStart := loadavg()
	header := machineHeader(loadStart)
	fmt.Fprint(&raw, header)
	fmt.Fprintln(&raw, "## raw measurements")
	fmt.Fprintln(os.Stderr, "starting 5 redis-server processes...")

	servers, err := startServers(slices.Max(cfg.ns))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.addr()
	}
	fmt.Fprintf(logw, "servers: %s\n", strings.Join(addrs, " "))
	if slices.ContainsFunc(cfg.impls, func(im impl) bool { return im.ours }) {
		// Fresh servers abstain under the restart guard, which the redlock rows keep on.
		fmt.Fprintf(logw, "waiting %v: the restart guard, on in the redlock rows, counts from the servers' start\n", guardWait)
		time.Sleep(guardWait)
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		runtime.MemProfileRate = *memRate
		fmt.Fprintf(logw, "allocation profiling at MemProfileRate=%d: timings of this run are not comparable\n", *memRate)
	}

	var pids []int
	for _, s := range servers {
		pids = append(pids, s.cmd.Process.Pid)
	}
	cpu0 := sampleCPU(pids)
	// Every library is called as users call it: under a cancellable context (one that
	// context.Background's fast paths do not apply to).
	ctx, cancel := context.WithCancel(context.Background())
	res := measureAll(ctx, cfg, addrs, logw)
	cancel()
	foreign := foreignCPU(cpu0, sampleCPU(pids))

	if *memProfile != "" {
		runtime.GC() // the profile is as of the last completed GC
		runtime.GC()
		f, err := os.Create(*memProfile)
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	}

	tables := res.markdown(cfg, loadStart, loadavg(), foreign)
	fmt.Print(header)
	fmt.Print(tables)
	fmt.Fprint(&raw, "\n", tables)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(raw.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "wrote %s\n", *out)
	}
	return 0
}

// goSafe runs f on a new goroutine; a panic there stops the servers before it crashes the
// program (deferred calls of main do not run for another goroutine's panic).
func goSafe(f func()) {
	go func() {
		defer func() {
			if r := recover(); r != nil {
				stopAll()
				panic(r)
			}
		}()
		f()
	}()
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list")
	}
	return out, nil
}
