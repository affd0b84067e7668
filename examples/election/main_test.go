package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestMain makes the test binary a worker when run (by run, through os.Executable) as one.
func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		os.Exit(worker())
	}
	// Workers built with -race would sleep 1s on exit (the race detector's default).
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	os.Exit(m.Run())
}

// small is a run that finishes in a few seconds, even with -race; its bound is generous,
// for a loaded machine.
var small = config{Workers: 3, TTL: time.Second, Lead: 500 * time.Millisecond, Timeout: 3 * time.Minute}

// TestRun runs the parent in this process over embedded servers, with copies of the test
// binary as workers: the killed leader is replaced within its TTL + margin, and the record
// names at least 2 leaders, in order, and rejected no write.
func TestRun(t *testing.T) {
	t.Setenv("REDIS_ADDRS", "")
	var out strings.Builder
	start := time.Now()
	res, err := run(context.Background(), small, &out)
	if err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	t.Logf("run took %v; output:\n%s", time.Since(start).Round(time.Millisecond), out.String())

	if res.Killed == "" || res.Next == "" || res.Next == res.Killed {
		t.Fatalf("killed %q, then %q took over: want two different workers", res.Killed, res.Next)
	}
	if res.Takeover <= 0 || res.Takeover > small.TTL+margin {
		t.Errorf("%s took over %v after the kill, want within the TTL + margin, %v", res.Next, res.Takeover, small.TTL+margin)
	}
	if want := res.Next + " took over "; !strings.Contains(out.String(), want) ||
		!strings.Contains(out.String(), " after "+res.Killed+" was killed (TTL 1s)") {
		t.Errorf("output does not tell the takeover")
	}

	// The record's leaders: in order of their tokens, the killed one and then the one that
	// took over (and, with 3 workers, the one after the resignation, not checked here).
	killed, next := -1, -1
	distinct := map[string]bool{}
	for i, term := range res.Leaders {
		if i > 0 && term.Token <= res.Leaders[i-1].Token {
			t.Errorf("term %d's token %d does not follow %d", i, term.Token, res.Leaders[i-1].Token)
		}
		if term.Writes < 1 {
			t.Errorf("%s led with token %d without writing", term.Leader, term.Token)
		}
		distinct[term.Leader] = true
		switch term.Leader {
		case res.Killed:
			killed = i
		case res.Next:
			next = max(next, i)
		}
	}
	if len(distinct) < 2 || killed < 0 || next < killed {
		t.Errorf("leaders %+v: want at least 2 distinct, %s before %s", res.Leaders, res.Killed, res.Next)
	}
	// A leader before the killed one (a lease lost under a loaded machine's delays) may
	// come first.
	if !regexp.MustCompile(`Leaders in order: (\S+, )*` + regexp.QuoteMeta(res.Killed+", "+res.Next)).MatchString(out.String()) {
		t.Errorf("output lacks %q in the leaders' order", res.Killed+", "+res.Next)
	}
	if want := "the record rejected no write"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q", want)
	}
}

// TestFlags: the command line gives the defaults, or what it says; bad flags are refused.
func TestFlags(t *testing.T) {
	cfg, err := parseFlags(nil, io.Discard)
	if want := (config{Workers: 3, TTL: 2 * time.Second, Lead: time.Second, Timeout: time.Minute}); err != nil || cfg != want {
		t.Errorf("no flags: got %+v, %v; want %+v", cfg, err, want)
	}
	cfg, err = parseFlags([]string{"-workers", "2", "-ttl", "5s", "-lead", "300ms", "-timeout", "10s"}, io.Discard)
	if want := (config{Workers: 2, TTL: 5 * time.Second, Lead: 300 * time.Millisecond, Timeout: 10 * time.Second}); err != nil || cfg != want {
		t.Errorf("flags: got %+v, %v; want %+v", cfg, err, want)
	}

	for _, args := range [][]string{
		{"-workers", "1"},
		{"-workers", "three"},
		{"-ttl", "0"},
		{"-ttl", "100ms"},
		{"-ttl", "31s"},
		{"-lead", "0"},
		{"-lead", "-1s"},
		{"-timeout", "0"},
		{"-ttl", "5s", "-timeout", "7s"}, // no time for 3 x 1s + 5s + the margin
		{"-leaders", "2"},
		{"extra"},
	} {
		var usage strings.Builder
		if cfg, err := parseFlags(args, &usage); err == nil {
			t.Errorf("%q: accepted, as %+v", args, cfg)
		} else if !strings.Contains(usage.String(), "Usage of election") {
			t.Errorf("%q: refused (%v) without the usage:\n%s", args, err, usage.String())
		}
	}

	// run refuses a bad config too, before it starts anything.
	if _, err := run(context.Background(), config{Workers: 1, TTL: time.Second, Lead: time.Second, Timeout: time.Minute}, io.Discard); err == nil {
		t.Error("run accepted a single worker")
	}
}

// servers starts 3 embedded servers for the election and 1 for the record, owned by the
// test, and points REDIS_ADDRS and STORE_ADDR at them.
func servers(t *testing.T) (lock []string, data string) {
	for range 3 {
		lock = append(lock, miniredis.RunT(t).Addr())
	}
	data = miniredis.RunT(t).Addr()
	t.Setenv("REDIS_ADDRS", strings.Join(lock, ","))
	t.Setenv("STORE_ADDR", data)
	return lock, data
}

// TestRunTimeout: with the election's lock held elsewhere all along, nobody leads, and the
// parent kills its workers at the run's timeout and fails.
func TestRunTimeout(t *testing.T) {
	lock, _ := servers(t)
	client, closeClient, err := connect(lock)
	if err != nil {
		t.Fatal(err)
	}
	defer closeClient()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := client.Acquire(ctx, electionName) // the lock, with no value proclaimed
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)

	cfg := config{Workers: 2, TTL: 200 * time.Millisecond, Lead: 100 * time.Millisecond, Timeout: 1500 * time.Millisecond}
	var out strings.Builder
	start := time.Now()
	_, err = run(context.Background(), cfg, &out)
	if err == nil || !strings.Contains(err.Error(), "did not finish within 1.5s") {
		t.Fatalf("run: got error %v, want a timeout\noutput:\n%s", err, out.String())
	}
	if n := regexp.MustCompile(`Killing worker-\d \(pid \d+\): the run did not finish within 1.5s\n`).FindAllStringIndex(out.String(), -1); len(n) != 2 {
		t.Errorf("%d workers killed, want 2:\n%s", len(n), out.String())
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("run returned after %v, long after its 1.5s timeout", d)
	}
}

// TestStaleWriteIsRejected: the record refuses a write whose token is below the latest, and
// the report then fails the run: two processes acted as the leader at once.
func TestStaleWriteIsRejected(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	defer rdb.Close()
	s := &store{rdb: rdb}
	ctx := context.Background()
	for _, w := range []struct {
		leader string
		token  uint64
		ok     bool
	}{
		{"worker-1", 100, true},
		{"worker-1", 100, true},
		{"worker-2", 205, true},
		{"worker-1", 100, false}, // the stale leader
		{"worker-2", 205, true},
	} {
		if ok, err := s.write(ctx, w.token, w.leader); err != nil || ok != w.ok {
			t.Fatalf("%s's write with token %d: got %v, %v; want %v", w.leader, w.token, ok, err, w.ok)
		}
	}
	var out strings.Builder
	say := func(format string, args ...any) {
		out.WriteString(strings.TrimSpace(fmt.Sprintf(format, args...)) + "\n")
	}
	terms, err := report(ctx, s, say)
	if err == nil || !strings.Contains(err.Error(), "two leaders at once") ||
		!strings.Contains(err.Error(), "worker-1 with token 00000000000000000100 after worker-2 with token 00000000000000000205") {
		t.Errorf("report: got %v, want two leaders at once", err)
	}
	if want := []term{{"worker-1", 100, 2}, {"worker-2", 205, 2}}; len(terms) != 2 || terms[0] != want[0] || terms[1] != want[1] {
		t.Errorf("terms %+v, want %+v", terms, want)
	}
	if !strings.Contains(out.String(), "Leaders in order: worker-1, worker-2") {
		t.Errorf("report's output lacks the leaders:\n%s", out.String())
	}
}

// TestWorkerExitsWithoutParent starts a worker, as run does, and then closes its standard
// input, as the parent's death does: the worker must exit at once, leader or not.
func TestWorkerExitsWithoutParent(t *testing.T) {
	lock, data := servers(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	j, _ := json.Marshal(job{Name: "worker-1", Lock: lock, Store: data, TTL: time.Second,
		Start: time.Now(), Deadline: time.Now().Add(time.Minute)})
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(j))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	time.Sleep(500 * time.Millisecond) // let it lead for a while
	stdin.Close()

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(stderr.String(), "the parent process is gone") {
			t.Errorf("the worker exited with %v, want exit status 1 and a word on its parent; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the worker still runs 5s after its standard input was closed")
	}
	if !strings.Contains(stdout.String(), "leading, with token") {
		t.Errorf("the worker did not lead alone; stdout:\n%s", stdout.String())
	}
}
