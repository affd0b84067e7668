package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/redis/go-redis/v9"
)

// workerEnv holds a worker's job, as JSON: it is what makes a process a worker.
const workerEnv = "ELECTION_EXAMPLE_WORKER"

// job is what the parent asks of a worker.
type job struct {
	Name     string        // "worker-N": its value in the election
	Lock     []string      // the election's Redis masters
	Store    string        // the record's Redis server
	TTL      time.Duration // the leader's lease TTL
	Start    time.Time     // the run's start, for the times printed
	Deadline time.Time     // when to exit, whatever the worker is doing
}

// worker is a worker process: it campaigns, leads when elected (again if it loses the
// lead), and on SIGTERM resigns or stops campaigning. It returns its exit code.
func worker() int {
	var j job
	err := json.Unmarshal([]byte(os.Getenv(workerEnv)), &j)
	say := func(to io.Writer, format string, args ...any) {
		fmt.Fprintf(to, "[%6.3fs] %s (pid %d): %s\n", time.Since(j.Start).Seconds(), j.Name, os.Getpid(), fmt.Sprintf(format, args...))
	}
	fail := func(format string, args ...any) int {
		say(os.Stderr, format, args...)
		return 1
	}
	if err != nil || len(j.Lock) == 0 || j.Store == "" {
		return fail("bad job from the parent process: %v", err)
	}

	// Never outlive the parent, nor the deadline, whatever the worker is doing (Campaign,
	// for one, waits as long as it takes).
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(fail("the parent process is gone, exiting"))
	}()
	time.AfterFunc(time.Until(j.Deadline), func() {
		os.Exit(fail("deadline passed, exiting"))
	})
	ctx, cancel := context.WithDeadline(context.Background(), j.Deadline)
	defer cancel()
	// SIGTERM ends stop: the worker then resigns, or stops campaigning. SIGKILL gives it no
	// such chance: its lease stays until its TTL runs out.
	stop, stopSignals := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stopSignals()

	client, closeClient, err := connect(j.Lock)
	if err != nil {
		return fail("%v", err)
	}
	defer closeClient()
	rdb := redis.NewClient(&redis.Options{Addr: j.Store, ContextTimeoutEnabled: true})
	defer rdb.Close()
	s := &store{rdb: rdb}

	// The same election, by name, in every process. The node timeout is generous, for a
	// demo that may run on a busy machine (the default is 100ms; a node slower than it
	// counts as failed).
	election := client.NewElection(electionName, redlock.WithTTL(j.TTL), redlock.WithNodeTimeout(min(j.TTL/4, time.Second)))
	for {
		say(os.Stdout, "campaigning")
		lease, err := election.Campaign(stop, j.Name)
		if err != nil {
			if stop.Err() != nil {
				say(os.Stdout, "stopped campaigning")
				return 0
			}
			return fail("campaign: %v", err)
		}
		say(os.Stdout, "leading, with token %d", lease.Token())
		if err := lead(stop, ctx, lease, s, j.Name, func(format string, args ...any) { say(os.Stdout, format, args...) }); err != nil {
			return fail("%v", err)
		}
		if stop.Err() != nil {
			return 0
		}
	}
}

// lead does the leader's work while lease holds: every 100ms, a write to the record fenced
// by the lease's token. It resigns when stop ends (SIGTERM) or when the record rejects a
// write, and returns when the lease has ended.
func lead(stop, ctx context.Context, lease *redlock.Lease, s *store, name string, say func(string, ...any)) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	writes := 0
	for {
		// The lease is checked before each write (Until too: Err changes only when the
		// lease's timer runs, which may be late), so only a leader that stalls between the
		// check and the write can write stale; the token's fence catches that one.
		if lease.Err() == nil && time.Now().Before(lease.Until()) {
			ok, err := s.write(ctx, lease.Token(), name)
			switch {
			case err != nil:
				_ = lease.Release(ctx)
				return fmt.Errorf("write the record: %w", err)
			case !ok:
				say("my write with token %d was rejected: a newer leader has written; resigning", lease.Token())
				return lease.Release(ctx)
			}
			writes++
		}
		select {
		case <-stop.Done():
			if err := lease.Release(ctx); err != nil {
				return fmt.Errorf("resign: %w", err)
			}
			say("resigned after %d writes", writes)
			return nil
		case <-lease.Done():
			say("lost the lead after %d writes: %v", writes, lease.Err())
			return nil
		case <-tick.C:
		}
	}
}

// connect returns a redlock Client over the Redis masters at addrs, one go-redis client
// per master, each wrapped as a redlock Node, and a function that closes them all.
func connect(addrs []string) (*redlock.Client, func(), error) {
	var nodes []redlock.Node
	var rdbs []*redis.Client
	for _, addr := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		rdbs = append(rdbs, rdb)
		nodes = append(nodes, goredis.New(rdb))
	}
	closeAll := func() {
		for _, rdb := range rdbs {
			rdb.Close()
		}
	}
	client, err := redlock.New(nodes)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return client, func() { client.Close(); closeAll() }, nil
}
