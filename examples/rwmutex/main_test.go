package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/redis/go-redis/v9"
)

// TestMain makes the test binary a worker when run (by run, through os.Executable) as one.
func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		os.Exit(worker())
	}
	os.Exit(m.Run())
}

// small is a run that finishes in a little more than its duration, even with -race; its
// bound is generous, for a loaded machine.
var small = config{Readers: 2, Goroutines: 3, Duration: 1500 * time.Millisecond, Timeout: 3 * time.Minute}

// TestRun runs the parent in this process over embedded servers, with copies of the test
// binary as workers: no read may be torn, and readers hold the lock together. A loaded
// machine can run the workers so slowly that no two reads meet in a short run: then it runs
// again, longer (at most twice more).
func TestRun(t *testing.T) {
	t.Setenv("REDIS_ADDRS", "")
	var out strings.Builder
	var res report
	for i, cfg := 0, small; i < 3; i, cfg.Duration = i+1, cfg.Duration*2 {
		out.Reset()
		var err error
		res, err = run(context.Background(), cfg, &out)
		if err != nil {
			t.Fatalf("run: %v\noutput:\n%s", err, out.String())
		}
		t.Logf("output:\n%s", out.String())
		if res.Shared > 0 && res.MaxReaders >= 2 || res.Torn != 0 {
			break
		}
	}
	if res.Updates == 0 || res.Reads == 0 || res.Torn != 0 {
		t.Errorf("%d updates, %d reads, %d torn; want some updates and reads, and no torn read", res.Updates, res.Reads, res.Torn)
	}
	if res.Shared == 0 || res.MaxReaders < 2 {
		t.Errorf("%d reads shared the lock with another reader, up to %d readers at once; want some, and at least 2", res.Shared, res.MaxReaders)
	}
	for _, want := range []string{" 0 torn reads\n", "No torn read"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, name := range []string{"writer", "reader-1", "reader-2"} {
		if !strings.Contains(out.String(), "\n"+name+" (pid ") {
			t.Errorf("output lacks %s's report", name)
		}
	}
}

// TestRunNoLock runs without the lock. Torn reads are likely but not certain, so they are
// only logged.
func TestRunNoLock(t *testing.T) {
	t.Setenv("REDIS_ADDRS", "")
	cfg := small
	cfg.NoLock = true
	var out strings.Builder
	res, err := run(context.Background(), cfg, &out)
	if err != nil {
		t.Fatalf("run -nolock: %v\noutput:\n%s", err, out.String())
	}
	if res.Updates == 0 || res.Reads == 0 || !strings.Contains(out.String(), "torn reads") {
		t.Errorf("%d updates and %d reads, want some of each, and a report\noutput:\n%s", res.Updates, res.Reads, out.String())
	}
	t.Logf("without the lock, %d of %d reads were torn", res.Torn, res.Reads)
}

// TestFlags: the command line gives the defaults, or what it says; bad flags are refused.
func TestFlags(t *testing.T) {
	cfg, err := parseFlags(nil, io.Discard)
	if want := (config{Readers: 3, Goroutines: 4, Duration: 2 * time.Second, Timeout: time.Minute}); err != nil || cfg != want {
		t.Errorf("no flags: got %+v, %v; want %+v", cfg, err, want)
	}
	cfg, err = parseFlags([]string{"-readers", "5", "-goroutines", "1", "-duration", "3s", "-nolock", "-timeout", "10s"}, io.Discard)
	if want := (config{Readers: 5, Goroutines: 1, Duration: 3 * time.Second, NoLock: true, Timeout: 10 * time.Second}); err != nil || cfg != want {
		t.Errorf("flags: got %+v, %v; want %+v", cfg, err, want)
	}

	for _, args := range [][]string{
		{"-readers", "0"},
		{"-goroutines", "-1"},
		{"-readers", "two"},
		{"-duration", "0"},
		{"-duration", "10s", "-timeout", "5s"},
		{"-timeout", "0"},
		{"-writers", "2"},
		{"extra"},
	} {
		var usage strings.Builder
		if cfg, err := parseFlags(args, &usage); err == nil {
			t.Errorf("%q: accepted, as %+v", args, cfg)
		} else if !strings.Contains(usage.String(), "Usage of rwmutex") {
			t.Errorf("%q: refused (%v) without the usage:\n%s", args, err, usage.String())
		}
	}

	// run refuses a bad config too, before it starts anything.
	if _, err := run(context.Background(), config{Readers: 1, Goroutines: 1, Duration: time.Second, Timeout: time.Second}, io.Discard); err == nil {
		t.Error("run accepted a duration as long as the timeout")
	}
}

// servers starts 3 embedded servers for the lock and 1 for the configuration, owned by
// the test, and points REDIS_ADDRS and CONFIG_ADDR at them.
func servers(t *testing.T) (lock []string, data string) {
	for range 3 {
		lock = append(lock, miniredis.RunT(t).Addr())
	}
	data = miniredis.RunT(t).Addr()
	t.Setenv("REDIS_ADDRS", strings.Join(lock, ","))
	t.Setenv("CONFIG_ADDR", data)
	return lock, data
}

// TestRunTimeout: with the lock held elsewhere all along, the workers wait for it until the
// run's timeout, when the parent kills them and fails.
func TestRunTimeout(t *testing.T) {
	lock, _ := servers(t)
	var nodes []redlock.Node
	for _, addr := range lock {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { rdb.Close() })
		nodes = append(nodes, goredis.New(rdb))
	}
	client, err := redlock.New(nodes, redlock.WithRestartGuard(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	rw := client.NewRWMutex(lockName)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rw.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer rw.Unlock()

	cfg := config{Readers: 2, Goroutines: 2, Duration: 500 * time.Millisecond, Timeout: 1500 * time.Millisecond}
	var out strings.Builder
	start := time.Now()
	_, err = run(context.Background(), cfg, &out)
	if err == nil || !strings.Contains(err.Error(), "did not finish within 1.5s") {
		t.Fatalf("run: got error %v, want a timeout\noutput:\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), "the run did not finish within 1.5s: killing "); n != 3 {
		t.Errorf("%d workers killed, want 3:\n%s", n, out.String())
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("run returned after %v, long after its 1.5s timeout", d)
	}
}

// TestWorkerExitsWithoutParent starts a reader, as run does, and then closes its standard
// input, as the parent's death does: the reader must exit at once.
func TestWorkerExitsWithoutParent(t *testing.T) {
	lock, data := servers(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	j, _ := json.Marshal(job{Name: "reader-1", Lock: lock, Data: data, Goroutines: 2,
		Stop: time.Now().Add(time.Minute), Deadline: time.Now().Add(2 * time.Minute)})
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(j))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	time.Sleep(500 * time.Millisecond) // let it read for a while
	stdin.Close()

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(stderr.String(), "the parent process is gone") {
			t.Errorf("the reader exited with %v, want exit status 1 and a word on its parent; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the reader still runs 5s after its standard input was closed")
	}
}
