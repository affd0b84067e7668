// Command election shows redlock.Election electing one leader at a time among several OS
// processes, and electing another within the TTL when the leader's process dies without
// resigning.
//
// The parent process starts the Redis servers and -workers copies of itself (worker
// processes worker-1, worker-2, ...). Each one campaigns with its name as its value:
//
//	election := client.NewElection("examples:election", redlock.WithTTL(ttl))
//	lease, err := election.Campaign(ctx, "worker-2") // waits until worker-2 leads
//
// The leader does the leader's work: every 100ms it writes its name to a record in Redis,
// with its lease's fencing token, through a script that refuses a token lower than the
// highest it has accepted, so that a stale leader's write is rejected. The parent follows
// the leader with election.Observe and prints each change. After -lead it kills the leader
// with SIGKILL: that one cannot resign, so its lock stays until the TTL (-ttl) from its
// last extension runs out, and then the next candidate in line leads. After another -lead the parent stops the new
// leader with SIGTERM: that one resigns (lease.Release), and the next leads at once. Last,
// it stops the others, and prints the leaders in order, as the record saw them.
//
// The program exits with status 1 if nobody led within the TTL + 1s after the kill, if a
// stale leader's write was rejected (two processes acted as the leader at once), or if the
// run failed.
//
// It runs with no Redis installed, over embedded in-process servers (miniredis) that live in
// the parent and that the workers reach over TCP on 127.0.0.1, or over real servers (the
// record uses STORE_ADDR, by default the first of REDIS_ADDRS):
//
//	go run ./examples/election
//	go run ./examples/election -workers 5 -ttl 5s
//	REDIS_ADDRS=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 go run ./examples/election
//
// Over real servers (one or more), a server that started less than 30s ago abstains from
// granting locks (the restart guard, see redlock.WithRestartGuard), so over freshly
// started servers the workers wait for up to 30s before the first leader.
//
// Everything is bounded in time (-timeout): the parent kills its workers when it runs out,
// and a worker exits by itself at that deadline, or as soon as the parent is gone (its
// standard input, a pipe from the parent, reaches end of file).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-redlock/redlock/examples/internal/exampleservers"
	"github.com/redis/go-redis/v9"
)

const (
	electionName = "examples:election"
	// margin is how long after the TTL a new leader may take, after the kill, to be seen:
	// the waiting candidates' retry and the parent's Observe.
	margin = time.Second
)

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
		fmt.Fprintln(os.Stderr, "election example failed:", err)
		os.Exit(1)
	}
}

// config is what the parent runs.
type config struct {
	Workers int           // candidate processes
	TTL     time.Duration // the leader's lease TTL
	Lead    time.Duration // how long a leader leads before the parent kills or stops it
	Timeout time.Duration // bound on the whole run
}

// parseFlags returns the configuration given by the command line args, or an error, which
// it has written to errOut with the usage.
func parseFlags(args []string, errOut io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("election", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.IntVar(&cfg.Workers, "workers", 3, "number of candidate processes (at least 2)")
	fs.DurationVar(&cfg.TTL, "ttl", 2*time.Second, "the leader's lease TTL: how long a killed leader keeps the lead")
	fs.DurationVar(&cfg.Lead, "lead", time.Second, "how long each leader leads before it is killed or stopped")
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
	switch {
	case c.Workers < 2:
		return fmt.Errorf("-workers must be at least 2 (one to kill, one to take over), got %d", c.Workers)
	case c.TTL < 200*time.Millisecond || c.TTL > 30*time.Second:
		return fmt.Errorf("-ttl must be from 200ms to 30s (the restart guard), got %v", c.TTL)
	case c.Lead <= 0:
		return fmt.Errorf("-lead must be positive, got %v", c.Lead)
	case c.Timeout < 3*c.Lead+c.TTL+margin:
		return fmt.Errorf("-timeout must leave time for 3 x -lead + -ttl + %v, got %v", margin, c.Timeout)
	}
	return nil
}

// result is the outcome of a run.
type result struct {
	Leaders  []term        // the leaders in order, as the record saw them
	Killed   string        // the leader killed with SIGKILL
	Next     string        // the one that took over from it
	Takeover time.Duration // from the kill to Observe naming Next
}

// run is the parent: it starts (or finds) the servers and cfg.Workers candidate processes
// (copies of this executable), plays the story of the package documentation, and checks
// the record of the leaders' writes. Every worker has exited when it returns.
func run(ctx context.Context, cfg config, out io.Writer) (res result, err error) {
	if err := cfg.check(); err != nil {
		return res, err
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, cfg.Timeout)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx) // a worker's failure ends the run too
	defer cancel(nil)
	start := time.Now()
	w := &syncWriter{w: out} // the workers' output comes through pipes, copied by goroutines
	p := &parent{ctx: ctx, cfg: cfg, procs: map[string]*proc{}, say: func(format string, args ...any) {
		fmt.Fprintf(w, "[%6.3fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}}

	srv, err := exampleservers.Start(3, "STORE_ADDR")
	if err != nil {
		return res, err
	}
	defer srv.Stop() // after every worker has exited: see below
	if srv.Embedded {
		p.say("REDIS_ADDRS is not set: started 3 embedded Redis servers for the election and 1 for the record (miniredis), in this process")
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Data, ContextTimeoutEnabled: true})
	defer rdb.Close()
	store := &store{rdb: rdb}
	if err := store.reset(ctx); err != nil {
		return res, fmt.Errorf("reset the record on %s: %w", srv.Data, err)
	}
	p.say("Election %q over %d Redis masters (%s), TTL %v; the leaders' record on %s",
		electionName, len(srv.Lock), strings.Join(srv.Lock, ", "), cfg.TTL, srv.Data)

	// The parent follows the election through a client of its own.
	client, closeClient, err := connect(srv.Lock)
	if err != nil {
		return res, err
	}
	defer closeClient()
	observing, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	p.changes = client.NewElection(electionName).Observe(observing)

	exe, err := os.Executable()
	if err != nil {
		return res, fmt.Errorf("find this program's executable: %w", err)
	}
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("%s: %w", stopped(ctx, cfg.Timeout), err)
		}
		cancel(errors.New("the run is over")) // kills the workers still running
		for _, wp := range p.procs {
			<-wp.exited
		}
	}()
	deadline, _ := ctx.Deadline()
	for i := range cfg.Workers {
		j := job{Name: fmt.Sprintf("worker-%d", i+1), Lock: srv.Lock, Store: srv.Data, TTL: cfg.TTL, Start: start,
			// A little after the parent's own deadline: the parent kills its workers first,
			// and this only ends a worker whose parent died (or hangs).
			Deadline: deadline.Add(2 * time.Second)}
		if err := p.start(exe, j, w, cancel); err != nil {
			return res, err
		}
	}

	if err := p.story(&res); err != nil {
		return res, err
	}
	for _, wp := range p.procs { // every worker but the killed one must exit with status 0
		if <-wp.exited; !wp.killed && wp.err != nil {
			return res, wp.err
		}
	}
	stopObserving()
	res.Leaders, err = report(ctx, store, p.say)
	return res, err
}

// parent is the parent process's view of the run.
type parent struct {
	ctx     context.Context
	cfg     config
	say     func(format string, args ...any) // prints a line, with the time since the start
	changes <-chan string                    // the election's leaders, from Observe
	leader  string                           // the latest of them
	procs   map[string]*proc                 // the workers, by name
}

// proc is a worker process.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when it has exited; err then says how
	err    error
	gone   atomic.Bool // killed or stopped by the parent
	killed bool        // by SIGKILL: its exit status is no error
}

// start starts a worker process for j, whose output goes to w; fail ends the run if the
// worker exits before the parent stops it.
func (p *parent) start(exe string, j job, w io.Writer, fail context.CancelCauseFunc) error {
	settings, _ := json.Marshal(j)
	// exec.CommandContext kills the worker, by its PID, when the run ends.
	cmd := exec.CommandContext(p.ctx, exe)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(settings))
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Cancel = func() error {
		p.say("Killing %s (pid %d): %s", j.Name, cmd.Process.Pid, stopped(p.ctx, p.cfg.Timeout))
		return cmd.Process.Kill()
	}
	cmd.WaitDelay = 2 * time.Second
	// The worker watches its standard input: it reaches end of file when this process
	// ends, however it ends, and the worker then exits. Nothing is written to it.
	if _, err := cmd.StdinPipe(); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", j.Name, err)
	}
	p.say("Started %s: pid %d", j.Name, cmd.Process.Pid)
	wp := &proc{cmd: cmd, exited: make(chan struct{})}
	p.procs[j.Name] = wp
	go func() {
		defer close(wp.exited)
		if err := cmd.Wait(); err != nil {
			wp.err = fmt.Errorf("%s (pid %d) failed: %w", j.Name, cmd.Process.Pid, err)
			if !wp.gone.Load() {
				fail(wp.err)
			}
		}
	}()
	return nil
}

// story kills the first leader, waits for another, stops that one (if a third worker can
// take over), and then stops the others.
func (p *parent) story(res *result) (err error) {
	anyone := func(v string) bool { return v != "" }
	nobody := func(string) bool { return false }
	if _, err := p.current(p.cfg.Timeout); err != nil { // the first leader
		return err
	}
	// The leader to kill has led for -lead, so that it wrote. On a loaded machine a leader
	// can lose its lease meanwhile: then its successor, once there is one, leads for -lead
	// (a few times at most).
	for range 5 {
		if _, err := p.current(p.cfg.TTL + margin); err != nil {
			return err
		}
		changed := false
		p.watch(p.cfg.Lead, nil, func(string) bool { changed = true; return true })
		if !changed || p.ctx.Err() != nil {
			break
		}
	}
	w, err := p.current(p.cfg.TTL + margin)
	if err != nil {
		return err
	}

	// SIGKILL: the leader cannot resign, and leads (as far as the lock goes) until its TTL
	// runs out; then the first candidate in line leads.
	res.Killed, w.killed = p.leader, true
	w.gone.Store(true)
	if err := w.cmd.Process.Kill(); err != nil {
		return err
	}
	killedAt := time.Now()
	p.say("Killed %s (pid %d) with SIGKILL: it cannot resign, so it leads until the TTL (%v) from its last extension runs out",
		res.Killed, w.cmd.Process.Pid, p.cfg.TTL)
	res.Next = p.watch(p.cfg.TTL+margin, nil, func(v string) bool { return anyone(v) && v != res.Killed })
	if res.Next == "" {
		if p.ctx.Err() != nil {
			return errors.New("the run ended early")
		}
		return fmt.Errorf("nobody took over within the TTL + %v (%v) after %s was killed", margin, p.cfg.TTL+margin, res.Killed)
	}
	res.Takeover = time.Since(killedAt)
	p.say("%s took over %v after %s was killed (TTL %v)", res.Next, res.Takeover.Round(time.Millisecond), res.Killed, p.cfg.TTL)
	p.watch(p.cfg.Lead, nil, nobody)

	// SIGTERM: the leader resigns (Release), and the next in line leads at once.
	if p.cfg.Workers > 2 {
		w, err := p.current(p.cfg.TTL + margin)
		if err != nil {
			return err
		}
		resigner := p.leader
		w.gone.Store(true)
		if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		resignedAt := time.Now()
		p.say("Stopped %s (pid %d) with SIGTERM: it resigns", resigner, w.cmd.Process.Pid)
		if next := p.watch(p.cfg.TTL+margin, nil, func(v string) bool { return anyone(v) && v != resigner }); next != "" {
			p.say("%s took over %v after %s resigned", next, time.Since(resignedAt).Round(time.Millisecond), resigner)
		}
		p.watch(p.cfg.Lead, nil, nobody)
	}

	// The others, the leader last, so that nobody takes over when it resigns.
	p.say("Stopping the other workers with SIGTERM, the leader last")
	for _, last := range []bool{false, true} {
		for name, w := range p.procs {
			if !w.gone.Load() && (name == p.leader) == last {
				w.gone.Store(true)
				_ = w.cmd.Process.Signal(syscall.SIGTERM)
				p.watch(p.cfg.Timeout, w.exited, nobody)
			}
		}
	}
	if p.ctx.Err() != nil {
		return errors.New("the run ended early")
	}
	return nil
}

// watch follows the election for up to d, or until until closes (if not nil), printing
// each change, until a leader for which want is true: it returns that leader, or "".
func (p *parent) watch(d time.Duration, until <-chan struct{}, want func(string) bool) string {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case v, ok := <-p.changes:
			if !ok { // the run is over
				return ""
			}
			if p.leader = v; v == "" {
				p.say("Observe: no leader")
			} else {
				p.say("Observe: %s leads", v)
			}
			if want(v) {
				return v
			}
		case <-until:
			return ""
		case <-timer.C:
			return ""
		case <-p.ctx.Done():
			return ""
		}
	}
}

// current returns the leader's process, waiting for up to d for a leader if there is none.
func (p *parent) current(d time.Duration) (*proc, error) {
	if p.leader == "" {
		p.watch(d, nil, func(v string) bool { return v != "" })
	}
	w := p.procs[p.leader]
	switch {
	case p.ctx.Err() != nil:
		return nil, errors.New("the run ended early")
	case p.leader == "":
		return nil, fmt.Errorf("no leader within %v", d)
	case w == nil || w.gone.Load():
		return nil, fmt.Errorf("the leader %q is not one of this run's workers: is another run campaigning in this election?", p.leader)
	}
	return w, nil
}

// report reads the record of the leaders' writes, prints the leaders in order, and returns
// them, with an error if a stale leader's write was rejected.
func report(ctx context.Context, s *store, say func(string, ...any)) ([]term, error) {
	terms, rejected, err := s.read(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the record: %w", err)
	}
	var names []string
	for _, t := range terms {
		names = append(names, t.Leader)
		say("  %s led with token %d: %d writes", t.Leader, t.Token, t.Writes)
	}
	say("Leaders in order: %s", strings.Join(names, ", "))
	if len(rejected) > 0 {
		return terms, fmt.Errorf("two leaders at once: the record rejected %d writes of a stale leader: %s",
			len(rejected), strings.Join(rejected, "; "))
	}
	say("One leader at a time: the record rejected no write")
	return terms, nil
}

// stopped says why ctx, the run's, ended early.
func stopped(ctx context.Context, timeout time.Duration) string {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, context.DeadlineExceeded):
		return fmt.Sprintf("the run did not finish within %v", timeout)
	case errors.Is(cause, context.Canceled):
		return "interrupted"
	default:
		return cause.Error() // a worker's failure
	}
}

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
