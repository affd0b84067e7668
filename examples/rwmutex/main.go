// Command rwmutex shows redlock.RWMutex as a sync.RWMutex shared by several OS processes:
// one writer updates a configuration kept in Redis while readers read it, and the lock
// keeps readers from seeing half an update, while they still read together.
//
// The configuration is a Redis hash whose fields version, a and b are equal after every
// update. The writer sets them one at a time with a short pause between them, so a read in
// between sees them disagree: a torn read. The parent process starts the Redis servers and
// starts copies of itself: a writer process, which updates the configuration every few
// milliseconds under rw.Lock(), and -readers reader processes of -goroutines goroutines
// that each read it again and again under rw.RLock(), counting torn reads, where
//
//	rw := client.NewRWMutex("examples:config")
//
// in every process. Each reader also notes, in a Redis set, which readers hold the lock
// with it, to show that readers in one process and across processes hold it together.
// After -duration the parent prints the number of updates, reads, torn reads (none with
// the lock) and reads that overlapped other readers, and exits with status 1 if a read
// was torn under the lock or the run failed. With -nolock nobody takes the lock, and the
// program reports the torn reads (usually many) instead.
//
// It runs with no Redis installed, over embedded in-process servers (miniredis) that live in
// the parent and that the workers reach over TCP on 127.0.0.1, or over real servers (the
// configuration uses CONFIG_ADDR, by default the first of REDIS_ADDRS):
//
//	go run ./examples/rwmutex
//	go run ./examples/rwmutex -nolock
//	REDIS_ADDRS=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 go run ./examples/rwmutex
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
	"bytes"
	"context"
	"encoding/json"
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
	lockName   = "examples:config"          // the RWMutex's name
	configKey  = "examples:rwmutex:config"  // the configuration, a hash: version, a, b
	holdersKey = "examples:rwmutex:holders" // a set: the readers holding the lock now

	// pause is how long the writer waits between the fields it writes (the window in which,
	// without the lock, a reader sees a torn configuration), and how long a reader holds the
	// lock after reading (using the configuration, and sharing the lock with other readers).
	pause = time.Millisecond
	// interval is how long the writer waits between two updates.
	interval = 3 * time.Millisecond
)

// workerEnv holds a worker's job, as JSON: it is what makes a process a worker.
const workerEnv = "RWMUTEX_EXAMPLE_WORKER"

// job is what the parent asks of a worker.
type job struct {
	Name       string    // "writer", or "reader-N"
	Lock       []string  // the lock's Redis masters
	Data       string    // the configuration's Redis server
	Goroutines int       // a reader's reading goroutines
	NoLock     bool      // write or read without the lock
	Stop       time.Time // when to stop writing or reading
	Deadline   time.Time // when to exit, whatever the worker is doing
}

func main() {
	if os.Getenv(workerEnv) != "" {
		os.Exit(worker())
	}
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	} else if err != nil {
		os.Exit(2)
	}

	// Ctrl-C or SIGTERM ends the run as a timeout does: the workers are killed first.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	_, err = run(ctx, cfg, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rwmutex example failed:", err)
		os.Exit(1)
	}
}

// config is what the parent runs.
type config struct {
	Readers    int           // reader processes
	Goroutines int           // reading goroutines per reader process
	Duration   time.Duration // how long the workers write and read
	NoLock     bool          // write and read without the lock
	Timeout    time.Duration // bound on the whole run
}

// parseFlags returns the configuration given by the command line args, or an error, which
// it has written to errOut with the usage.
func parseFlags(args []string, errOut io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("rwmutex", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.IntVar(&cfg.Readers, "readers", 3, "number of reader processes")
	fs.IntVar(&cfg.Goroutines, "goroutines", 4, "reading goroutines in each reader process")
	fs.DurationVar(&cfg.Duration, "duration", 2*time.Second, "how long to update and read the configuration")
	fs.BoolVar(&cfg.NoLock, "nolock", false, "update and read without the lock, to show torn reads")
	fs.DurationVar(&cfg.Timeout, "timeout", 60*time.Second, "bound on the whole run")
	if err := fs.Parse(args); err != nil {
		return cfg, err // the flag package has said why
	}
	err := cfg.check()
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err != nil {
		fmt.Fprintln(errOut, err)
		fs.Usage()
	}
	return cfg, err
}

func (c config) check() error {
	if c.Readers < 1 || c.Goroutines < 1 {
		return fmt.Errorf("-readers and -goroutines must be at least 1, got %d and %d", c.Readers, c.Goroutines)
	}
	if c.Duration <= 0 || c.Timeout <= c.Duration {
		return fmt.Errorf("-duration must be positive and shorter than -timeout, got %v and %v", c.Duration, c.Timeout)
	}
	return nil
}

// report is what a worker did, sent to the parent as JSON on its standard output; the
// parent adds them up.
type report struct {
	Updates    int // updates of the configuration (by the writer)
	Reads      int // reads of the whole configuration (by the readers)
	Torn       int // reads that saw fields that disagree
	Shared     int // reads made while another reader held the lock
	Across     int // reads made while a reader in another process held the lock
	MaxReaders int // the most readers seen holding the lock at once
}

func (r *report) add(o report) {
	r.Updates += o.Updates
	r.Reads += o.Reads
	r.Torn += o.Torn
	r.Shared += o.Shared
	r.Across += o.Across
	r.MaxReaders = max(r.MaxReaders, o.MaxReaders)
}

// run is the parent: it starts (or finds) the servers, sets the configuration, starts the
// writer and cfg.Readers reader processes (copies of this executable), waits for them, and
// adds up their reports. It returns an error if a worker fails, if the run takes longer
// than cfg.Timeout, or if a read was torn while the workers used the lock; torn reads
// without the lock are only reported.
func run(ctx context.Context, cfg config, out io.Writer) (report, error) {
	if err := cfg.check(); err != nil {
		return report{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()

	// The workers' error output comes through pipes, copied by goroutines of exec: out
	// must take one write at a time.
	w := &syncWriter{w: out}

	// REDIS_ADDRS and CONFIG_ADDR, or else 3 + 1 embedded servers in this process,
	// listening on 127.0.0.1 so that the worker processes can reach them.
	srv, err := exampleservers.Start(3, "CONFIG_ADDR")
	if err != nil {
		return report{}, err
	}
	defer srv.Stop() // after every worker has exited: see below
	if srv.Embedded {
		fmt.Fprintln(w, "REDIS_ADDRS is not set: started 3 embedded Redis servers for the lock and 1 for the configuration (miniredis), in this process")
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Data, ContextTimeoutEnabled: true})
	defer rdb.Close()
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, configKey, "version", 0, "a", 0, "b", 0)
		p.Del(ctx, holdersKey)
		return nil
	}); err != nil {
		return report{}, fmt.Errorf("set the configuration on %s: %w", srv.Data, err)
	}
	fmt.Fprintf(w, "Configuration %q set to version 0 on %s; lock %q over %d Redis masters: %s\n",
		configKey, srv.Data, lockName, len(srv.Lock), strings.Join(srv.Lock, ", "))

	exe, err := os.Executable()
	if err != nil {
		return report{}, fmt.Errorf("find this program's executable: %w", err)
	}
	how := "under the lock"
	if cfg.NoLock {
		how = "WITHOUT the lock (-nolock)"
	}
	fmt.Fprintf(w, "For %v, 1 writer updates the configuration and %d reader processes x %d goroutines read it, %s\n",
		cfg.Duration, cfg.Readers, cfg.Goroutines, how)

	j := job{Lock: srv.Lock, Data: srv.Data, Goroutines: cfg.Goroutines, NoLock: cfg.NoLock,
		Stop: time.Now().Add(cfg.Duration),
		// A little after the parent's own deadline: the parent kills its workers first,
		// and this only ends a worker whose parent died (or hangs).
		Deadline: deadline.Add(2 * time.Second)}
	names := []string{"writer"}
	for i := range cfg.Readers {
		names = append(names, "reader-"+strconv.Itoa(i+1))
	}
	started := time.Now()
	reports := make([]report, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		j.Name = name
		settings, _ := json.Marshal(j)
		// exec.CommandContext kills the worker, by its PID, when ctx ends (the timeout).
		cmd := exec.CommandContext(ctx, exe)
		cmd.Env = append(os.Environ(), workerEnv+"="+string(settings))
		var stdout bytes.Buffer // the worker's report
		cmd.Stdout, cmd.Stderr = &stdout, w
		cmd.Cancel = func() error {
			fmt.Fprintf(w, "%s: killing %s (pid %d)\n", stopped(ctx, cfg.Timeout), name, cmd.Process.Pid)
			return cmd.Process.Kill()
		}
		cmd.WaitDelay = 2 * time.Second
		// The worker watches its standard input: it reaches end of file when this process
		// ends, however it ends, and the worker then exits. Nothing is written to it; Wait
		// closes it.
		_, err := cmd.StdinPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			cancel() // kills the workers already started
			wg.Wait()
			return report{}, fmt.Errorf("start %s: %w", name, err)
		}
		fmt.Fprintf(w, "Started %s: pid %d\n", name, cmd.Process.Pid)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cmd.Wait()
			if err == nil {
				err = json.Unmarshal(stdout.Bytes(), &reports[i])
			}
			if err != nil {
				errs[i] = fmt.Errorf("%s (pid %d): %w", name, cmd.Process.Pid, err)
				return
			}
			did := fmt.Sprintf("%d updates", reports[i].Updates)
			if name != "writer" {
				did = fmt.Sprintf("%d reads, %d torn", reports[i].Reads, reports[i].Torn)
			}
			fmt.Fprintf(w, "%s (pid %d): %s\n", name, cmd.Process.Pid, did)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%s: %w", stopped(ctx, cfg.Timeout), err)
		}
		return report{}, err
	}
	var sum report
	for _, r := range reports {
		sum.add(r)
	}
	fmt.Fprintf(w, "All %d workers finished in %v: %d updates, %d reads, %d torn reads\n",
		len(names), time.Since(started).Round(time.Millisecond), sum.Updates, sum.Reads, sum.Torn)
	fmt.Fprintf(w, "Readers together: %d of %d reads overlapped other readers, %d of them readers in other processes; up to %d readers at once\n",
		sum.Shared, sum.Reads, sum.Across, sum.MaxReaders)
	switch {
	case !cfg.NoLock && sum.Torn == 0:
		fmt.Fprintln(w, "No torn read: the writer held the lock alone, and readers never saw half an update")
	case !cfg.NoLock:
		return sum, fmt.Errorf("%d of %d reads were torn although every read and update held the lock", sum.Torn, sum.Reads)
	case sum.Torn == 0:
		fmt.Fprintln(w, "Without the lock no read was torn this time: no read fell inside an update (try a longer -duration)")
	default:
		fmt.Fprintf(w, "Without the lock, %d of %d reads were torn: they saw version, a and b disagree, in the middle of an update\n", sum.Torn, sum.Reads)
	}
	return sum, nil
}

// stopped says why ctx, the run's, ended early.
func stopped(ctx context.Context, timeout time.Duration) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("the run did not finish within %v", timeout)
	}
	return "interrupted"
}

// worker is a worker process: the writer or a reader, until the stop time. It writes its
// report to its standard output, and returns its exit code.
func worker() int {
	var j job
	err := json.Unmarshal([]byte(os.Getenv(workerEnv)), &j)
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "%s (pid %d): %s\n", j.Name, os.Getpid(), fmt.Sprintf(format, args...))
		return 1
	}
	if err != nil || len(j.Lock) == 0 || j.Data == "" {
		return fail("bad job from the parent process: %v", err)
	}

	// Never outlive the parent, nor the deadline, whatever the goroutines are doing (Lock
	// and RLock, for two, wait as long as it takes).
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(fail("the parent process is gone, exiting"))
	}()
	time.AfterFunc(time.Until(j.Deadline), func() {
		os.Exit(fail("deadline passed, exiting"))
	})
	ctx, cancel := context.WithDeadline(context.Background(), j.Deadline)
	defer cancel()

	// One go-redis client per master, each wrapped as a redlock Node.
	var nodes []redlock.Node
	for _, addr := range j.Lock {
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
	defer client.Close()
	rdb := redis.NewClient(&redis.Options{Addr: j.Data, ContextTimeoutEnabled: true})
	defer rdb.Close()

	// The same RWMutex, by name, in every process. The writer locks it as a sync.Locker,
	// the readers through its RLocker, whose Lock and Unlock are RLock and RUnlock.
	rw := client.NewRWMutex(lockName)
	var rep report
	if j.Name == "writer" {
		var mu sync.Locker = rw
		if j.NoLock {
			mu = noLock{}
		}
		rep.Updates, err = write(ctx, rdb, mu, j.Stop)
	} else {
		rl := rw.RLocker()
		if j.NoLock {
			rl = noLock{}
		}
		rep, err = read(ctx, rdb, rl, j.Name, j.Goroutines, j.Stop)
	}
	if err == nil {
		err = json.NewEncoder(os.Stdout).Encode(rep)
	}
	if err != nil {
		return fail("%v", err)
	}
	return 0
}

// write updates the configuration every few milliseconds, at least once and until stopAt,
// under mu, and returns the number of updates. An update sets the fields one at a time,
// with a pause between them: a read between two of the writes sees them disagree.
func write(ctx context.Context, rdb *redis.Client, mu sync.Locker, stopAt time.Time) (int, error) {
	n := 0
	for ; n == 0 || time.Now().Before(stopAt); n++ {
		mu.Lock()
		v, err := rdb.HIncrBy(ctx, configKey, "version", 1).Result()
		for _, field := range []string{"a", "b"} {
			if err == nil {
				time.Sleep(pause)
				err = rdb.HSet(ctx, configKey, field, v).Err()
			}
		}
		mu.Unlock()
		if err != nil {
			return n, fmt.Errorf("update the configuration: %w", err)
		}
		time.Sleep(interval)
	}
	return n, nil
}

// read runs goroutines that each read the configuration under rl, at least once and until
// stopAt, and returns what they saw. name, this process's, goes into the set of holders.
func read(ctx context.Context, rdb *redis.Client, rl sync.Locker, name string, goroutines int, stopAt time.Time) (report, error) {
	reports := make([]report, goroutines)
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			me := name + "/" + strconv.Itoa(g+1)
			for reads := 0; reads == 0 || time.Now().Before(stopAt); reads++ {
				rl.Lock()
				err := readOnce(ctx, rdb, me, &reports[g])
				rl.Unlock()
				if err != nil {
					errs[g] = fmt.Errorf("goroutine %d: %w", g+1, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var sum report
	for _, r := range reports {
		sum.add(r)
	}
	return sum, errors.Join(errs...)
}

// readOnce reads the whole configuration and checks that its fields agree. Meanwhile, me
// (process/goroutine) is in the set of readers holding the lock, where it sees the others.
func readOnce(ctx context.Context, rdb *redis.Client, me string, rep *report) error {
	var fields *redis.SliceCmd
	var holders *redis.StringSliceCmd
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		fields = p.HMGet(ctx, configKey, "version", "a", "b")
		p.SAdd(ctx, holdersKey, me)
		holders = p.SMembers(ctx, holdersKey)
		return nil
	}); err != nil {
		return fmt.Errorf("read the configuration: %w", err)
	}
	time.Sleep(pause) // use the configuration, still holding the lock
	if err := rdb.SRem(ctx, holdersKey, me).Err(); err != nil {
		return fmt.Errorf("leave the set of readers: %w", err)
	}

	rep.Reads++
	if f := fields.Val(); f[0] != f[1] || f[0] != f[2] {
		rep.Torn++
	}
	processes := map[string]bool{}
	for _, h := range holders.Val() {
		process, _, _ := strings.Cut(h, "/")
		processes[process] = true
	}
	rep.MaxReaders = max(rep.MaxReaders, len(holders.Val()))
	if len(holders.Val()) > 1 {
		rep.Shared++
	}
	if len(processes) > 1 {
		rep.Across++
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
