package sim

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	seedFlag     = flag.Int64("seed", -1, "run this seed only (and print its trace with -v)")
	seedsFlag    = flag.Int("seeds", 0, "how many seeds to run, from -first on (default: the default set, see defaultSeeds)")
	firstFlag    = flag.Uint64("first", 0, "the first seed")
	kindFlag     = flag.String("kind", "", "run this fault kind only (see Kinds; clock-unsafe is expected to fail)")
	workloadFlag = flag.String("workload", "", "run this workload only (see Workloads)")
	linesFlag    = flag.Int("lines", 60, "the most lines of a trace to print")
	nFlag        = flag.Int("servers", 0, "the number of servers (default: drawn from the seed)")
	extraFlag    = flag.Bool("extra", false, "add the workloads that the default set leaves out (ExtraWorkloads: cluster-shaped nodes) to the cycle")
	skewFlag     = flag.Bool("skew", false, "let mix combine crashes with clock offsets, which breaks the tokens' order (see Config.SkewAcrossRestarts)")
	looseFlag    = flag.Bool("loosekeys", false, "let a script's command name a key not in its KEYS (see Config.LooseKeys)")
)

// TestMain runs the tests with less frequent garbage collection: a run allocates much (the
// clients' commands and replies, the scripts' Lua values), and the collector's share of its
// time is large.
func TestMain(m *testing.M) {
	debug.SetGCPercent(400)
	os.Exit(m.Run())
}

// defaultSeeds returns the seeds that `go test` runs: 0 to 287, each fault kind with each
// workload of the default set twice, in about a minute on two cores; under the race
// detector, which makes a seed cost eight times the CPU, one seed per kind or workload,
// whichever are more (12 now): the i-th has the i-th kind and the i-th workload, so every
// kind and every workload runs once. `make test` runs 144 seeds without it too. The seeds of
// regressionSeeds come last, in both.
func defaultSeeds() []uint64 {
	kinds, works := uint64(len(Kinds())), uint64(len(Workloads()))
	var seeds []uint64
	if raceDetector {
		for i := range max(kinds, works) {
			seeds = append(seeds, i%kinds+kinds*(i%works))
		}
	} else {
		for i := range 2 * kinds * works {
			seeds = append(seeds, i)
		}
	}
	return append(seeds, regressionSeeds()...)
}

// regressionSeeds returns seeds past the default range that failed once, each with the
// defect it caught: 21156 (crowd), a waiter behind more lapsed waiters than a call drops,
// refused with no wake-up to come, waited a refresh interval while a later reader took the
// lock.
func regressionSeeds() []uint64 { return []uint64{21156} }

func TestSim(t *testing.T) {
	var seeds []uint64
	switch {
	case *seedFlag >= 0:
		seeds = append(seeds, uint64(*seedFlag))
	case *seedsFlag > 0:
		for i := range *seedsFlag {
			seeds = append(seeds, *firstFlag+uint64(i))
		}
	default:
		seeds = defaultSeeds()
	}
	var held availability
	began := time.Now()
	// In batches, so that a soak of many seeds keeps few paused subtests at a time.
	for batch := range slices.Chunk(seeds, 64) {
		t.Run(fmt.Sprintf("seeds-%d-%d", batch[0], batch[len(batch)-1]), func(t *testing.T) {
			for _, seed := range batch {
				t.Run(fmt.Sprint(seed), func(t *testing.T) {
					t.Parallel()
					var res Result
					synctest.Test(t, func(t *testing.T) {
						res = Run(Config{Seed: seed, Kind: Kind(*kindFlag), Workload: *workloadFlag, Lines: *linesFlag, N: *nFlag, SkewAcrossRestarts: *skewFlag, Extra: *extraFlag,
							LooseKeys: *looseFlag})
					})
					held.add(res)
					report(t, res, *seedFlag >= 0)
				})
			}
		})
	}
	elapsed := time.Since(began)
	t.Logf("%d seeds in %v real time (%.1f seeds/s)", len(seeds), elapsed.Round(time.Millisecond), float64(len(seeds))/elapsed.Seconds())
	t.Logf("held share of the fault window, per fault kind (mean over runs):\n%s", held.String())
}

// report logs run res and fails t with its violations and trace; trace says whether to log
// the trace of a run that passed too.
func report(t *testing.T, res Result, trace bool) {
	t.Logf("%s %s N=%d clients=%d: %d grants, held %.1f%% of the fault window, longest wait after healing %v of %v, longest idle wait %v, %v virtual, calls %v",
		res.Kind, res.Workload, res.N, res.Clients, res.Grants, 100*res.Held, res.LongWait.Round(time.Millisecond), res.Bound,
		res.LongIdle.Round(time.Millisecond), res.Virtual.Round(time.Millisecond), res.Calls)
	switch {
	case len(res.Violations) > 0:
		t.Errorf("seed %d (%s, %s, N=%d, %d clients) broke %d invariant(s):\n%s\ntrace to the first:\n%s\nreplay: go test ./internal/sim -run Sim%s -seed %d -v",
			res.Seed, res.Kind, res.Workload, res.N, res.Clients, len(res.Violations), joinLines(res.Violations), res.Trace, narrowed(), res.Seed)
	case trace:
		t.Logf("trace:\n%s", res.Trace)
	}
}

// narrowed returns the flags that narrowed the runs (-kind, -workload, -servers), which a
// replay needs too.
func narrowed() string {
	s := ""
	if *kindFlag != "" {
		s += " -kind " + *kindFlag
	}
	if *workloadFlag != "" {
		s += " -workload " + *workloadFlag
	}
	if *nFlag > 0 {
		s += fmt.Sprintf(" -servers %d", *nFlag)
	}
	if *skewFlag {
		s += " -skew"
	}
	if *extraFlag {
		s += " -extra"
	}
	if *looseFlag {
		s += " -loosekeys"
	}
	return s
}

func joinLines(lines []string) string {
	s := ""
	for _, l := range lines {
		s += "  " + l + "\n"
	}
	return s
}

// availability sums the held share of the fault window per fault kind, over every workload
// but twoaddrs; safe for concurrent use.
type availability struct {
	mu   sync.Mutex
	sum  map[Kind]float64
	runs map[Kind]int
}

func (a *availability) add(r Result) {
	if r.Workload == wTwoAddrs { // it grants nothing, by design
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sum == nil {
		a.sum, a.runs = make(map[Kind]float64), make(map[Kind]int)
	}
	a.sum[r.Kind] += r.Held
	a.runs[r.Kind]++
}

// String formats the mean per kind, in the order of Kinds.
func (a *availability) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := ""
	for _, k := range append(Kinds(), ClockUnsafe) {
		if n := a.runs[k]; n > 0 {
			s += fmt.Sprintf("  %-12s %5.1f%% (%d runs)\n", k, 100*a.sum[k]/float64(n), n)
		}
	}
	return s
}

// TestOnlyThreeScriptsWriteLockKeys: in a run of every workload (each under another fault
// kind), a lock key is written only by the acquire, extend and release scripts: the queue
// refuses and wakes, and never grants. The runs refuse a key a script did not declare.
func TestOnlyThreeScriptsWriteLockKeys(t *testing.T) {
	writers := map[string]bool{}
	k := uint64(len(Kinds()))
	for w := range uint64(len(Workloads())) {
		seed := w*k + w%k
		var res Result
		synctest.Test(t, func(t *testing.T) { res = Run(Config{Seed: seed}) })
		require.Empty(t, res.Violations, "seed %d", seed)
		for key, scripts := range res.Writers() {
			if !IsLockKey(key) {
				continue
			}
			for _, s := range scripts {
				writers[s] = true
				assert.Contains(t, []string{"acquire", "extend", "release"}, s, "seed %d: %s wrote the lock key %s", seed, s, key)
			}
		}
	}
	assert.Equal(t, []string{"acquire", "extend", "release"}, slices.Sorted(maps.Keys(writers)), "the writers of lock keys")
}
