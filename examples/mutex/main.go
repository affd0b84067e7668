// Command mutex shows redlock.Mutex as a sync.Locker shared by several OS processes: they
// all increment one counter kept in Redis, and the lock makes sure no update is lost.
//
// The counter is incremented the naive way, GET then a short pause then SET, so two
// writers that overlap both write the same value and one increment is lost. The parent
// process starts the Redis servers, sets the counter to 0, and starts -workers copies of
// itself (worker processes); each runs -goroutines goroutines that each do -increments
// increments, every one of them between mu.Lock() and mu.Unlock(), where
//
//	var mu sync.Locker = client.NewMutex("examples:counter")
//
// The parent then waits for the workers, reads the counter and compares it with
// workers x goroutines x increments. With -nolock the workers skip the lock, and the
// program reports how many updates were lost instead (usually most of them).
//
// It runs with no Redis installed, over embedded in-process servers (miniredis) that live in
// the parent and that the workers reach over TCP on 127.0.0.1, or over real servers (the
// counter uses COUNTER_ADDR, by default the first of REDIS_ADDRS):
//
//	go run ./examples/mutex
//	go run ./examples/mutex -nolock
//	REDIS_ADDRS=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 go run ./examples/mutex
//
// Over real servers (one or more), a server that started less than 30s ago abstains from
// granting locks (the restart guard, see redlock.WithRestartGuard), so over freshly
// started servers the workers wait for up to 30s before the first lock.
//
// Everything is bounded in time (-timeout): the parent kills its workers when it runs out,
// and a worker exits by itself at that deadline, or as soon as the parent is gone (its
// standard input, a pipe from the parent, reaches end of file).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/examples/internal/exampleservers"
	"github.com/redis/go-redis/v9"
)

const (
	lockName   = "examples:counter"       // the Mutex's name
	counterKey = "examples:mutex:counter" // the shared counter, a plain Redis string

	// pause is how long an increment waits between its GET and its SET: the window in
	// which, without the lock, another writer slips in and one of the two updates is lost.
	pause = time.Millisecond
)

// The parent passes a worker its settings in these environment variables. workerEnv, the
// worker's number, is what makes a process a worker.
const (
	workerEnv     = "MUTEX_EXAMPLE_WORKER"
	addrsEnv      = "MUTEX_EXAMPLE_ADDRS"   // the lock's Redis masters, comma-separated
	counterEnv    = "MUTEX_EXAMPLE_COUNTER" // the counter's Redis server
	goroutinesEnv = "MUTEX_EXAMPLE_GOROUTINES"
	incrementsEnv = "MUTEX_EXAMPLE_INCREMENTS"
	nolockEnv     = "MUTEX_EXAMPLE_NOLOCK"
	deadlineEnv   = "MUTEX_EXAMPLE_DEADLINE" // RFC 3339: the worker exits at this time
)

func main() {
	if os.Getenv(workerEnv) != "" {
		os.Exit(worker())
	}

	var cfg config
	flag.IntVar(&cfg.Workers, "workers", 4, "number of worker processes")
	flag.IntVar(&cfg.Goroutines, "goroutines", 4, "goroutines in each worker process")
	flag.IntVar(&cfg.Increments, "increments", 50, "increments done by each goroutine")
	flag.BoolVar(&cfg.NoLock, "nolock", false, "increment without the lock, to show lost updates")
	flag.DurationVar(&cfg.Timeout, "timeout", 60*time.Second, "bound on the whole run")
	flag.Parse()

	// Ctrl-C or SIGTERM ends the run as a timeout does: the workers are killed first.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	_, err := run(ctx, cfg, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutex example failed:", err)
		os.Exit(1)
	}
}

// config is what the parent runs.
type config struct {
	Workers    int           // worker processes
	Goroutines int           // goroutines per worker
	Increments int           // increments per goroutine
	NoLock     bool          // increment without the lock
	Timeout    time.Duration // bound on the whole run
}

// result is the outcome of a run: the counter's final value and what it should be.
type result struct {
	Count, Expected int64
}

// run is the parent: it starts (or finds) the servers, starts cfg.Workers worker processes
// (copies of this executable), waits for them, and checks the counter. It returns an error
// if a worker fails, if the run takes longer than cfg.Timeout, or if updates were lost while
// the workers used the lock; lost updates without the lock are only reported.
func run(ctx context.Context, cfg config, out io.Writer) (result, error) {
	if cfg.Workers < 1 || cfg.Goroutines < 1 || cfg.Increments < 1 || cfg.Timeout <= 0 {
		return result{}, fmt.Errorf("workers, goroutines, increments and timeout must be positive, got %d, %d, %d and %v",
			cfg.Workers, cfg.Goroutines, cfg.Increments, cfg.Timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()

	// The workers' output comes through pipes, copied by goroutines of exec: out must take
	// one write at a time.
	w := &syncWriter{w: out}

	// The lock's Redis masters and the counter's Redis: REDIS_ADDRS and COUNTER_ADDR (by
	// default the first of REDIS_ADDRS; the counter's key differs from the lock's keys), or
	// else 3 + 1 embedded servers in this process, listening on 127.0.0.1 so that the
	// worker processes can reach them.
	srv, err := exampleservers.Start(3, "COUNTER_ADDR")
	if err != nil {
		return result{}, err
	}
	defer srv.Stop() // after every worker has exited: see below
	if srv.Embedded {
		fmt.Fprintln(w, "REDIS_ADDRS is not set: started 3 embedded Redis servers for the lock and 1 for the counter (miniredis), in this process")
	}
	lockAddrs, counterAddr := srv.Lock, srv.Data

	rdb := redis.NewClient(&redis.Options{Addr: counterAddr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	if err := rdb.Set(ctx, counterKey, 0, 0).Err(); err != nil {
		return result{}, fmt.Errorf("set the counter on %s: %w", counterAddr, err)
	}
	fmt.Fprintf(w, "Counter %q set to 0 on %s; lock %q over %d Redis masters: %s\n",
		counterKey, counterAddr, lockName, len(lockAddrs), strings.Join(lockAddrs, ", "))

	exe, err := os.Executable()
	if err != nil {
		return result{}, fmt.Errorf("find this program's executable: %w", err)
	}
	how := "under the lock"
	if cfg.NoLock {
		how = "WITHOUT the lock (-nolock)"
	}
	fmt.Fprintf(w, "Starting %d worker processes, each running %d goroutines that each do %d increments (GET, pause, SET) %s\n",
		cfg.Workers, cfg.Goroutines, cfg.Increments, how)

	env := append(os.Environ(),
		addrsEnv+"="+strings.Join(lockAddrs, ","),
		counterEnv+"="+counterAddr,
		goroutinesEnv+"="+strconv.Itoa(cfg.Goroutines),
		incrementsEnv+"="+strconv.Itoa(cfg.Increments),
		nolockEnv+"="+strconv.FormatBool(cfg.NoLock),
		// A little after the parent's own deadline: the parent kills its workers first,
		// and this only ends a worker whose parent died (or hangs).
		deadlineEnv+"="+deadline.Add(2*time.Second).Format(time.RFC3339Nano),
	)
	started := time.Now()
	errs := make([]error, cfg.Workers)
	var wg sync.WaitGroup
	for i := range cfg.Workers {
		n := i + 1
		// exec.CommandContext kills the worker, by its PID, when ctx ends (the timeout).
		cmd := exec.CommandContext(ctx, exe)
		cmd.Env = append(env[:len(env):len(env)], workerEnv+"="+strconv.Itoa(n))
		cmd.Stdout, cmd.Stderr = w, w
		cmd.Cancel = func() error {
			fmt.Fprintf(w, "%s: killing worker %d (pid %d)\n", stopped(ctx, cfg.Timeout), n, cmd.Process.Pid)
			return cmd.Process.Kill()
		}
		cmd.WaitDelay = 2 * time.Second
		// The worker watches its standard input: it reaches end of file when this process
		// ends, however it ends, and the worker then exits. Nothing is written to it; Wait
		// closes it.
		if _, err := cmd.StdinPipe(); err != nil {
			cancel()
			wg.Wait()
			return result{}, err
		}
		if err := cmd.Start(); err != nil {
			cancel() // kills the workers already started
			wg.Wait()
			return result{}, fmt.Errorf("start worker %d: %w", n, err)
		}
		fmt.Fprintf(w, "Started worker %d: pid %d\n", n, cmd.Process.Pid)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cmd.Wait(); err != nil {
				errs[i] = fmt.Errorf("worker %d (pid %d): %w", n, cmd.Process.Pid, err)
			}
		}()
	}
	res := result{Expected: int64(cfg.Workers) * int64(cfg.Goroutines) * int64(cfg.Increments)}

	// Wait for the workers, showing the counter now and then.
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case <-finished:
			waiting = false
		case <-tick.C:
			if n, err := rdb.Get(ctx, counterKey).Int64(); err == nil {
				fmt.Fprintf(w, "... counter at %d of %d after %v\n", n, res.Expected, time.Since(started).Round(time.Second))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%s: %w", stopped(ctx, cfg.Timeout), err)
		}
		return result{}, err
	}
	fmt.Fprintf(w, "All %d workers finished in %v\n", cfg.Workers, time.Since(started).Round(time.Millisecond))

	res.Count, err = rdb.Get(ctx, counterKey).Int64()
	if err != nil {
		return res, fmt.Errorf("read the counter on %s: %w", counterAddr, err)
	}
	fmt.Fprintf(w, "Final count: %d, expected %d x %d x %d = %d\n",
		res.Count, cfg.Workers, cfg.Goroutines, cfg.Increments, res.Expected)
	lost := res.Expected - res.Count
	switch {
	case !cfg.NoLock && lost == 0:
		fmt.Fprintln(w, "No lost update: the lock let one increment run at a time across all processes")
	case !cfg.NoLock:
		return res, fmt.Errorf("%d of %d updates were lost although every increment held the lock", lost, res.Expected)
	case lost == 0:
		fmt.Fprintln(w, "Without the lock no update was lost this time: the writers happened not to overlap (try more workers or goroutines)")
	default:
		fmt.Fprintf(w, "Without the lock, %d of %d updates were lost: writers read the same value and overwrote each other\n", lost, res.Expected)
	}
	return res, nil
}

// stopped says why ctx, the run's, ended early.
func stopped(ctx context.Context, timeout time.Duration) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("the run did not finish within %v", timeout)
	}
	return "interrupted"
}

// worker is a worker process: it increments the counter, Goroutines x Increments times,
// under the Mutex (unless told not to), prints one line when done, and returns its exit
// code.
func worker() int {
	id := os.Getenv(workerEnv)
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "worker %s (pid %d): %s\n", id, os.Getpid(), fmt.Sprintf(format, args...))
		return 1
	}
	goroutines, err1 := strconv.Atoi(os.Getenv(goroutinesEnv))
	increments, err2 := strconv.Atoi(os.Getenv(incrementsEnv))
	nolock, err3 := strconv.ParseBool(os.Getenv(nolockEnv))
	deadline, err4 := time.Parse(time.RFC3339Nano, os.Getenv(deadlineEnv))
	addrs := strings.Split(os.Getenv(addrsEnv), ",")
	counterAddr := os.Getenv(counterEnv)
	if err := errors.Join(err1, err2, err3, err4); err != nil || addrs[0] == "" || counterAddr == "" {
		return fail("bad settings from the parent process: %v", err)
	}

	// Never outlive the parent, nor the deadline, whatever the goroutines are doing (Lock,
	// for one, waits as long as it takes).
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(fail("the parent process is gone, exiting"))
	}()
	time.AfterFunc(time.Until(deadline), func() {
		os.Exit(fail("deadline passed, exiting"))
	})
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	// One go-redis client per master, each wrapped as a redlock Node.
	var nodes []redlock.Node
	for _, addr := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, goredis.New(rdb))
	}
	// The node timeout is generous, for a demo that may run on a busy machine (a node slower
	// than it counts as failed, and the attempt is made again); the default is 100ms.
	client, err := redlock.New(nodes, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(time.Second))
	if err != nil {
		return fail("%v", err)
	}
	counter := redis.NewClient(&redis.Options{Addr: counterAddr, ContextTimeoutEnabled: true})
	defer counter.Close()

	// The same Mutex, by name, in every process; any sync.Locker would do here.
	var mu sync.Locker = client.NewMutex(lockName)
	if nolock {
		mu = noLock{}
	}

	start := time.Now()
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range increments {
				mu.Lock()
				err := increment(ctx, counter)
				mu.Unlock()
				if err != nil {
					errs[g] = fmt.Errorf("goroutine %d: %w", g+1, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail("%v", err)
	}
	fmt.Printf("Worker %s (pid %d): done, %d goroutines x %d increments in %v\n",
		id, os.Getpid(), goroutines, increments, time.Since(start).Round(time.Millisecond))
	return 0
}

// increment adds 1 to the counter the unsafe way: read, pause, write. Two increments that
// overlap read the same value, and one of them is lost.
func increment(ctx context.Context, rdb *redis.Client) error {
	n, err := rdb.Get(ctx, counterKey).Int64()
	if err != nil {
		return fmt.Errorf("read the counter: %w", err)
	}
	time.Sleep(pause)
	if err := rdb.Set(ctx, counterKey, n+1, 0).Err(); err != nil {
		return fmt.Errorf("write the counter: %w", err)
	}
	return nil
}

// noLock is a sync.Locker that locks nothing, for -nolock.
type noLock struct{}

func (noLock) Lock()   {}
func (noLock) Unlock() {}

// syncWriter serializes writes to w: the workers' output and the parent's own lines go to
// one writer from several goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
