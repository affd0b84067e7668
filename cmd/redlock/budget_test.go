package main

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redlock/redlock/internal/redistest"
)

// timedRun runs redlock to its end and returns its exit status, its standard error, and
// how long it ran, from its start to its exit.
func timedRun(t *testing.T, args ...string) (code int, stderr string, took time.Duration) {
	t.Helper()
	start := time.Now()
	tl := startTool(t, nil, "", args...)
	code = tl.wait(t)
	return code, tl.stderr.String(), time.Since(start)
}

// TestNonblockDoesNotWaitForAPausedNode: with one of three servers paused (it accepts
// connections and never answers), a -nonblock run takes the lock on the other two and runs
// its command without first waiting out the paused node's connection timeout. Waiting for
// it costs connectTimeout (2 s) before the attempt; the run without it takes an attempt
// (a node timeout) and redlock's start, so a bound of connectTimeout tells them apart.
func TestNonblockDoesNotWaitForAPausedNode(t *testing.T) {
	s := newSetup(t, 3)
	s.servers[2].Pause()
	dir := t.TempDir()
	code, stderr, took := timedRun(t, s.args("paused", append([]string{"-nonblock", "-node-timeout", "100ms"}, sh(ranScript, dir)...)...)...)
	wantCode(t, code, stderr, 0)
	if !exists(filepath.Join(dir, "ran")) {
		t.Error("the command did not run")
	}
	if took >= connectTimeout {
		t.Errorf("-nonblock with one node of three paused took %v: it waited for that node's connection (%v)", took, connectTimeout)
	}
}

// TestWaitBoundsConnecting: -wait bounds everything before the command starts, connecting to
// the nodes included. Connecting to a node that never answers costs connectTimeout (2 s)
// when it comes before the wait instead of within it, so each run below would take at least
// connectTimeout + 500ms; within the wait it takes 500ms and redlock's start, and a bound
// of connectTimeout tells them apart.
func TestWaitBoundsConnecting(t *testing.T) {
	const wait = "500ms"
	t.Run("no node answers", func(t *testing.T) {
		addr := redistest.Hung(t)
		dir := t.TempDir()
		code, stderr, took := timedRun(t, "run", "-addrs", addr, "-restart-guard", "0", "-name", "hung", "-wait", wait, "--", "sh", "-c", ranScript, "sh", dir)
		wantCode(t, code, stderr, exitUnavailable, `could not take lock "hung"`, "within -wait "+wait, "connecting to "+addr)
		if took >= connectTimeout {
			t.Errorf("-wait %s took %v: connecting to the node was not bounded by the wait", wait, took)
		}
		if exists(filepath.Join(dir, "ran")) {
			t.Error("the command ran")
		}
	})
	t.Run("held, one node paused", func(t *testing.T) {
		s := newSetup(t, 3)
		holder, waiter := t.TempDir(), t.TempDir()
		hold := startTool(t, nil, "", s.args("held", sh(holdScript, holder)...)...)
		hold.awaitFile(t, filepath.Join(holder, "started"))
		s.servers[2].Pause()
		code, stderr, took := timedRun(t, s.args("held", append([]string{"-wait", wait, "-node-timeout", "100ms"}, sh(ranScript, waiter)...)...)...)
		wantCode(t, code, stderr, exitConflictDefault, `lock "held" was still held elsewhere after waiting `+wait)
		if took >= connectTimeout {
			t.Errorf("-wait %s took %v: connecting to the paused node was not bounded by the wait", wait, took)
		}
		if exists(filepath.Join(waiter, "ran")) {
			t.Error("the command ran while another redlock held the lock")
		}
		s.servers[2].Resume()
		touch(t, filepath.Join(holder, "release"))
		wantCode(t, hold.wait(t), hold.stderr.String(), 0)
	})
}

// TestMessagesNameTheLock: what redlock says about a lock it could not take names the lock
// as the user gave it, never its Redis key, and says it once per line: its own messages,
// and the library's errors and warnings that it prints (a wait that keeps failing is
// logged after 5 s; connecting to the closed port first takes up to 2 s).
func TestMessagesNameTheLock(t *testing.T) {
	const closed = "127.0.0.1:1" // see TestUnavailable
	for _, flag := range []string{"-nonblock", "-wait=10s"} {
		code, _, stderr := runTool(t, nil, "run", "-addrs", closed, "-restart-guard", "0", "-name", "named", flag, "--", "true")
		wantCode(t, code, stderr, exitUnavailable, `could not take lock "named"`)
		if flag == "-wait=10s" {
			wantCode(t, code, stderr, exitUnavailable, "still waiting for the lock")
		}
		key := keys("named").Lock
		for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
			if strings.Contains(line, key) || strings.Contains(line, strconv.Quote(key)) {
				t.Errorf("%s: a line names the Redis key %s:\n%s", flag, key, line)
			}
			if n := strings.Count(line, `"named"`); n > 1 {
				t.Errorf("%s: a line names the lock %d times:\n%s", flag, n, line)
			}
		}
	}
}

// TestSameServerTwice: two addresses of one server (127.0.0.1:P and localhost:P) are a
// misconfiguration that the library reports at the first acquisition that sees it
// (ErrInvalid): redlock exits with a usage error and does not run its command, every time.
func TestSameServerTwice(t *testing.T) {
	s := newSetup(t, 2)
	p, q := s.servers[0], s.servers[1]
	addrs := p.Addr() + ",localhost:" + strconv.Itoa(p.Port()) + "," + q.Addr()
	dir := t.TempDir()
	for _, flag := range []string{"-nonblock", "-wait=10s", "-nonblock", "-wait=10s", "-nonblock", "-wait=10s"} {
		code, stdout, stderr := runTool(t, nil, "run", "-addrs", addrs, "-restart-guard", "0", "-name", "twice", flag, "--", "sh", "-c", ranScript, "sh", dir)
		wantCode(t, code, stderr, exitUsage, "-addrs")
		if exists(filepath.Join(dir, "ran")) {
			t.Fatalf("%s: the command ran over two addresses of one server; stdout %q", flag, stdout)
		}
	}
}

// TestConnectGoesOnAtAMajority: connect returns once two of three nodes have connected,
// while the third (a listener that never answers) is still connecting: it does not wait
// for that node's connection to end.
func TestConnectGoesOnAtAMajority(t *testing.T) {
	servers := redistest.StartN(t, 2)
	addrs, err := parseAddrs(servers[0].Addr() + "," + servers[1].Addr() + "," + redistest.Hung(t))
	if err != nil {
		t.Fatal(err)
	}
	s := newNodes(addrs)
	defer s.close()
	s.connect(context.Background())
	s.mu.Lock()
	conns := slices.Clone(s.conns)
	s.mu.Unlock()
	for i, c := range conns[:2] {
		if !c.done || c.err != nil {
			t.Errorf("node %d: connected %v, error %v; want connected", i, c.done, c.err)
		}
	}
	if conns[2].done {
		t.Errorf("connect waited for the node that never answers (it ended with %v)", conns[2].err)
	}
	if err := s.failures(); err == nil || !strings.Contains(err.Error(), "no answer after") {
		t.Errorf("failures: %v; want the node that has not answered yet", err)
	}
}
