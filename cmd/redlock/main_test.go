package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
)

// The tests build the redlock binary once, in TestMain, and run it as a user would, against
// redis-server processes started by redistest. Every wait is bounded and generous: the
// suite must pass on a loaded 2-core machine. Most tests wait for the tool and the servers
// far more than they compute, and run in parallel (t.Parallel), each with servers of its
// own; those that time the tool (budget_test.go, TestTimeout, TestFreshServerWaitsAndSaysSo),
// watch processes (the orphan and sentinel tests) or pause the tool (TestLostLock) run alone.
const (
	toolTimeout  = 90 * time.Second // a run of the tool, start to exit
	stateTimeout = 30 * time.Second // an observable state (a file, a Redis key) to appear
	pollEvery    = 20 * time.Millisecond
)

// binary is the redlock binary that TestMain builds.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "redlock-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "redlock")
	args := []string{"build", "-o", binary}
	if raceEnabled { // the tool's own races show up in the integration tests
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// lockedBuffer is a bytes.Buffer that the tool's output is copied into while the test reads
// it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// tool is one run of the redlock binary.
type tool struct {
	cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	exited         chan struct{} // closed when it has exited
	code           int           // its exit status, once exited is closed
}

// startTool starts redlock with args, with the test's environment without REDIS_ADDRS,
// plus env, and stdin as its standard input. Cleanup stops it if the test did not wait for
// it: SIGTERM (which it passes on to its command), then SIGKILL.
func startTool(t *testing.T, env []string, stdin string, args ...string) *tool {
	t.Helper()
	tl := &tool{cmd: exec.Command(binary, args...), exited: make(chan struct{})}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDIS_ADDRS=") {
			tl.cmd.Env = append(tl.cmd.Env, kv)
		}
	}
	// A binary built with -race sleeps 1 s at exit by default.
	tl.cmd.Env = append(tl.cmd.Env, "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
	tl.cmd.Env = append(tl.cmd.Env, env...)
	tl.cmd.Stdin = strings.NewReader(stdin)
	tl.cmd.Stdout, tl.cmd.Stderr = &tl.stdout, &tl.stderr
	if err := tl.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", binary, err)
	}
	go func() {
		err := tl.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			tl.code = ee.ExitCode() // -1 if a signal killed it
		default:
			tl.code = -2
		}
		close(tl.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-tl.exited:
			return
		default:
		}
		_ = tl.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-tl.exited:
		case <-time.After(10 * time.Second):
			_ = tl.cmd.Process.Kill()
			<-tl.exited
		}
	})
	return tl
}

// runTool runs redlock to its end and returns its exit status and output.
func runTool(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	tl := startTool(t, env, "", args...)
	return tl.wait(t), tl.stdout.String(), tl.stderr.String()
}

// wait waits for the tool to exit and returns its exit status.
func (tl *tool) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-tl.exited:
		return tl.code
	case <-time.After(toolTimeout):
		t.Fatalf("redlock %q still runs after %v; stderr:\n%s", tl.cmd.Args[1:], toolTimeout, tl.stderr.String())
		return 0
	}
}

// signal sends sig to the tool's process (not to its command).
func (tl *tool) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := tl.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to redlock: %v", sig, err)
	}
}

// await polls until cond holds, and fails the test if the tool exits first or it takes
// longer than stateTimeout; what describes cond.
func (tl *tool) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(stateTimeout)
	for !cond() {
		select {
		case <-tl.exited:
			t.Fatalf("redlock %q exited with %d before %s; stderr:\n%s", tl.cmd.Args[1:], tl.code, what, tl.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v; redlock's stderr:\n%s", what, stateTimeout, tl.stderr.String())
		}
		time.Sleep(pollEvery)
	}
}

// awaitFile waits until path exists (see await).
func (tl *tool) awaitFile(t *testing.T, path string) {
	t.Helper()
	tl.await(t, path, func() bool { return exists(path) })
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// touch creates the file at path.
func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// readToken returns the fencing token that a command wrote to path.
func readToken(t *testing.T, path string) uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	token, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || token == 0 {
		t.Fatalf("%s holds %q: want a positive decimal token (%v)", path, b, err)
	}
	return token
}

// The shell commands the tool runs in the tests. Each takes a directory as $1 and writes
// its token to $1/token and then creates $1/started, so that a test can wait for it; a
// waiting command waits at most 60 s.
const (
	// holdScript waits until $1/release exists, then exits 0.
	holdScript = `echo "$REDLOCK_TOKEN" > "$1/token"; : > "$1/started"
i=0; while [ ! -e "$1/release" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done`
	// termScript waits until SIGTERM, then creates $1/term and exits 7.
	termScript = `trap ': > "$1/term"; exit 7' TERM; echo "$REDLOCK_TOKEN" > "$1/token"; : > "$1/started"
i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done`
	// stubbornScript ignores SIGTERM (its sleeps too) and waits.
	stubbornScript = `trap '' TERM; echo "$REDLOCK_TOKEN" > "$1/token"; : > "$1/started"
i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done`
	// ranScript creates $1/ran and exits 0.
	ranScript = `echo "$REDLOCK_TOKEN" > "$1/token"; : > "$1/ran"`
)

// sh returns the arguments that make redlock run script with dir as $1.
func sh(script, dir string) []string { return []string{"--", "sh", "-c", script, "sh", dir} }

// lockSetup is N Redis servers and the redlock flags that lock over them.
type lockSetup struct {
	servers []*redistest.Server
	addrs   string   // comma-separated
	flags   []string // -addrs, and -restart-guard 0 (the servers are fresh)
}

// newSetup starts n redis-servers.
func newSetup(t *testing.T, n int) *lockSetup {
	t.Helper()
	s := &lockSetup{servers: redistest.StartN(t, n)}
	var addrs []string
	for _, srv := range s.servers {
		addrs = append(addrs, srv.Addr())
	}
	s.addrs = strings.Join(addrs, ",")
	s.flags = []string{"-addrs", s.addrs, "-restart-guard", "0", "-node-timeout", testNodeTimeout}
	return s
}

// testNodeTimeout is the runs' node timeout: one that no loaded machine misses (at the
// default, 100ms, a release missed it now and then beside other test binaries, and left its
// lock for a TTL). It must stay below the tests' shortest -ttl, 2s. A test about a node that
// does not answer passes a shorter one after the setup's flags.
const testNodeTimeout = "1s"

// args returns redlock's arguments: run, the setup's flags, -name name, then rest.
func (s *lockSetup) args(name string, rest ...string) []string {
	args := append([]string{"run"}, s.flags...)
	return append(append(args, "-name", name), rest...)
}

// forEachN runs test over 1 and over 3 servers, in subtests.
func forEachN(t *testing.T, test func(t *testing.T, s *lockSetup)) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) { test(t, newSetup(t, n)) })
	}
}

// hasKey reports whether any server has key.
func (s *lockSetup) hasKey(t *testing.T, key string) bool {
	t.Helper()
	for _, srv := range s.servers {
		n, err := srv.Do("EXISTS", key)
		if err != nil {
			t.Fatalf("EXISTS %s on %s: %v", key, srv.Addr(), err)
		}
		if n != int64(0) {
			return true
		}
	}
	return false
}

// keys returns the Redis keys of the lock called name, under the default prefix.
func keys(name string) core.Keys { return core.NewKeys("redlock:", name) }

// assertReleased fails the test if any server still has the lock called name.
func (s *lockSetup) assertReleased(t *testing.T, name string) {
	t.Helper()
	if s.hasKey(t, keys(name).Lock) {
		t.Errorf("lock %q is still held on a server after redlock exited", name)
	}
}

// flushAll deletes every key on every server.
func (s *lockSetup) flushAll(t *testing.T) {
	t.Helper()
	for _, srv := range s.servers {
		if _, err := srv.Do("FLUSHALL"); err != nil {
			t.Fatalf("FLUSHALL on %s: %v", srv.Addr(), err)
		}
	}
}

// wantCode fails the test unless the tool exited with want and its stderr contains each of
// msgs.
func wantCode(t *testing.T, code int, stderr string, want int, msgs ...string) {
	t.Helper()
	if code != want {
		t.Errorf("exit status %d, want %d; stderr:\n%s", code, want, stderr)
	}
	for _, msg := range msgs {
		if !strings.Contains(stderr, msg) {
			t.Errorf("stderr lacks %q:\n%s", msg, stderr)
		}
	}
}
