package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
)

// deadHolder takes the lock called name over s's servers for a holder that is gone: it
// never extends it, and its TTL is long. It returns the lease.
func deadHolder(t *testing.T, s *lockSetup, name string) *redlock.Lease {
	t.Helper()
	addrs, err := parseAddrs(s.addrs)
	if err != nil {
		t.Fatal(err)
	}
	ns := newNodes(addrs)
	c, err := redlock.New(ns.nodes, redlock.WithRestartGuard(0), redlock.WithNodeTimeout(time.Second),
		redlock.WithTTL(time.Hour), redlock.WithAutoExtend(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		ns.close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.TryAcquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// breakTool runs `redlock break` over s with args and stdin, and returns its exit status
// and output.
func breakTool(t *testing.T, s *lockSetup, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	tl := startTool(t, nil, stdin, append([]string{"break", "-addrs", s.addrs, "-node-timeout", testNodeTimeout}, args...)...)
	return tl.wait(t), tl.stdout.String(), tl.stderr.String()
}

// broken reports whether status shows name broken, and the last report: free on every node
// and its fence above token on a quorum. Break raises the fence on a quorum, and releases on
// every node, the last perhaps after it returns: status is asked again, up to 20 times.
func broken(t *testing.T, s *lockSetup, name string, token uint64) (*statusReport, bool) {
	t.Helper()
	var rep *statusReport
	for range 20 {
		rep = statusOf(t, s.addrs, name, 0)
		raised := 0
		for _, n := range rep.Nodes {
			if n.Fence != nil && *n.Fence > token {
				raised++
			}
		}
		if everyNode(rep, func(n nodeStatus) bool { return n.Lock == nil }) && raised > len(rep.Nodes)/2 {
			return rep, true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return rep, false
}

// TestBreak: `redlock break NAME` shows the holder and asks; no (or no answer) breaks
// nothing and exits 1; yes, or -force, frees the lock on every node and raises its fence
// above the holder's token (on a quorum); a free name exits 0 without asking.
func TestBreak(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 3)
	l := deadHolder(t, s, "job")

	for _, stdin := range []string{"n\n", ""} {
		code, stdout, stderr := breakTool(t, s, stdin, "job")
		wantCode(t, code, stderr, exitConflictDefault, "not confirmed: nothing broken")
		if !strings.Contains(stdout, `"job" is held: writer `) || !strings.Contains(stdout, "[y/N]") {
			t.Errorf("stdout %q lacks the holder or the question", stdout)
		}
		if rep := statusOf(t, s.addrs, "job", 0); rep.Holder == nil || rep.Holder.Token != l.Token() {
			t.Fatalf("not confirmed, yet the holder is %+v", rep.Holder)
		}
	}

	code, stdout, stderr := breakTool(t, s, "y\n", "job")
	wantCode(t, code, stderr, 0)
	if !strings.Contains(stdout, "broken: 1 writers, 0 readers, 0 permit holders; fence raised to ") {
		t.Errorf("stdout %q", stdout)
	}
	if rep, ok := broken(t, s, "job", l.Token()); !ok {
		t.Errorf("after the break: %+v", rep.Nodes)
	}

	l = deadHolder(t, s, "job")
	code, stdout, stderr = breakTool(t, s, "", "-force", "job")
	wantCode(t, code, stderr, 0)
	if strings.Contains(stdout, "[y/N]") || !strings.Contains(stdout, "broken: 1 writers") {
		t.Errorf("-force: stdout %q", stdout)
	}
	if rep, ok := broken(t, s, "job", l.Token()); !ok {
		t.Errorf("after the break with -force: %+v", rep.Nodes)
	}

	code, stdout, stderr = breakTool(t, s, "", "free")
	wantCode(t, code, stderr, 0)
	if stdout != "\"free\": nothing holds it\n" {
		t.Errorf("a free name: stdout %q", stdout)
	}
}

// TestBreakReaders: the readers of an RWMutex are broken too.
func TestBreakReaders(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)
	c := libClient(t, s)
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := c.NewRWMutex("shared", redlock.WithTTL(time.Hour)).RLockContext(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	code, stdout, stderr := breakTool(t, s, "", "-force", "shared")
	wantCode(t, code, stderr, 0)
	if !strings.Contains(stdout, "2 readers") || !strings.Contains(stdout, "broken: 0 writers, 2 readers") {
		t.Errorf("stdout %q", stdout)
	}
	s.assertReleased(t, "shared")
}

// TestBreakUnavailable: with fewer than a majority of the nodes answering, nothing is
// broken and redlock break exits 69.
func TestBreakUnavailable(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)
	deadHolder(t, s, "job")
	s.addrs += ",127.0.0.1:1,127.0.0.1:2"
	code, _, stderr := breakTool(t, s, "", "-force", "job")
	wantCode(t, code, stderr, exitUnavailable, `reading "job"`, "no quorum")
	if !s.hasKey(t, keys("job").Lock) {
		t.Error("the lock was broken without a quorum")
	}
}

// TestBreakUsage: its help, and its usage errors (exit 2).
func TestBreakUsage(t *testing.T) {
	t.Parallel() // see main_test.go
	for _, args := range [][]string{{"help", "break"}, {"break", "-h"}} {
		code, stdout, stderr := runTool(t, nil, args...)
		wantCode(t, code, stderr, 0)
		for _, want := range []string{"redlock break [flags] NAME", "-force", "-addrs", "-prefix", "-node-timeout",
			"What it risks", "not stopped", "Exit status", "\n  0 ", "\n  1 ", "\n  2 ", "\n  69 "} {
			if !strings.Contains(stdout, want) {
				t.Errorf("redlock %q: the usage lacks %q", args, want)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"break", "-addrs", "127.0.0.1:1"}, "no name"},
		{[]string{"break", "-addrs", "127.0.0.1:1", "a", "b"}, "one name only"},
		{[]string{"break", "x"}, "no Redis address"},
		{[]string{"break", "-addrs", "127.0.0.1:1", "-node-timeout", "0", "x"}, "-node-timeout must be positive"},
		{[]string{"break", "-addrs", "127.0.0.1:1", "-prefix", "a{}", "x"}, "-prefix: key prefix"},
	} {
		code, _, stderr := runTool(t, nil, tc.args...)
		wantCode(t, code, stderr, exitUsage, tc.msg)
	}
}
