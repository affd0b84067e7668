package main

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-redlock/redlock/internal/redistest"
)

// TestRunPassesStatusOutputAndToken: the command runs with redlock's standard input and
// output, its exit status (or 128+N for signal N) is redlock's, it gets a fencing token in
// REDLOCK_TOKEN that grows from run to run, and the lock is released when it exits.
// $REDIS_ADDRS gives the addresses when -addrs does not.
func TestRunPassesStatusOutputAndToken(t *testing.T) {
	t.Parallel() // see main_test.go
	forEachN(t, func(t *testing.T, s *lockSetup) {
		dir := t.TempDir()
		tl := startTool(t, nil, "hello\n", s.args("status", sh(`echo "$REDLOCK_TOKEN" > "$1/token1"; read line; echo "got $line"; exit 3`, dir)...)...)
		code := tl.wait(t)
		wantCode(t, code, tl.stderr.String(), 3)
		if out := tl.stdout.String(); out != "got hello\n" {
			t.Errorf("stdout %q, want the command's %q", out, "got hello\n")
		}
		s.assertReleased(t, "status")
		first := readToken(t, filepath.Join(dir, "token1"))

		// The addresses from $REDIS_ADDRS this time.
		args := []string{"run", "-name", "status", "-restart-guard", "0", "-node-timeout", testNodeTimeout}
		code, _, stderr := runTool(t, []string{"REDIS_ADDRS=" + s.addrs}, append(args, sh(`echo "$REDLOCK_TOKEN" > "$1/token2"`, dir)...)...)
		wantCode(t, code, stderr, 0)
		if second := readToken(t, filepath.Join(dir, "token2")); second <= first {
			t.Errorf("second run's token %d is not above the first's %d", second, first)
		}
		s.assertReleased(t, "status")

		code, _, stderr = runTool(t, nil, s.args("status", sh(`kill -KILL $$`, dir)...)...)
		wantCode(t, code, stderr, 128+int(syscall.SIGKILL))
		s.assertReleased(t, "status")
	})
}

// TestRedisURL: an address can be a redis:// URL.
func TestRedisURL(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)
	dir := t.TempDir()
	code, _, stderr := runTool(t, nil, "run", "-addrs", "redis://"+s.servers[0].Addr()+"/0", "-restart-guard", "0", "-name", "url", "--", "sh", "-c", ranScript, "sh", dir)
	wantCode(t, code, stderr, 0)
	if !exists(filepath.Join(dir, "ran")) {
		t.Error("the command did not run")
	}
}

// TestConflict: while one redlock holds the lock, a -nonblock run exits with the conflict
// status (1, or -conflict-exit-code's) without running its command, saying why unless
// -quiet; once the holder is done, the lock is free at once.
func TestConflict(t *testing.T) {
	t.Parallel() // see main_test.go
	forEachN(t, func(t *testing.T, s *lockSetup) {
		holder, other := t.TempDir(), t.TempDir()
		hold := startTool(t, nil, "", s.args("conflict", sh(holdScript, holder)...)...)
		hold.awaitFile(t, filepath.Join(holder, "started"))

		code, _, stderr := runTool(t, nil, s.args("conflict", append([]string{"-nonblock"}, sh(ranScript, other)...)...)...)
		wantCode(t, code, stderr, exitConflictDefault, `lock "conflict" is held elsewhere: not running the command`)
		code, _, stderr = runTool(t, nil, s.args("conflict", append([]string{"-nonblock", "-quiet", "-conflict-exit-code", "9"}, sh(ranScript, other)...)...)...)
		wantCode(t, code, stderr, 9)
		if stderr != "" {
			t.Errorf("-quiet: stderr %q, want nothing", stderr)
		}
		if exists(filepath.Join(other, "ran")) {
			t.Fatal("a command ran while another redlock held the lock")
		}

		touch(t, filepath.Join(holder, "release"))
		wantCode(t, hold.wait(t), hold.stderr.String(), 0)
		code, _, stderr = runTool(t, nil, s.args("conflict", append([]string{"-nonblock"}, sh(ranScript, other)...)...)...)
		wantCode(t, code, stderr, 0)
		if !exists(filepath.Join(other, "ran")) {
			t.Error("the command did not run once the lock was free")
		}
	})
}

// TestWait: a redlock that waits for a held lock gives up when -wait runs out, with the
// conflict status and without running its command; one with a longer -wait runs its
// command once the holder is done, with a larger token.
func TestWait(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)
	holder, waiter := t.TempDir(), t.TempDir()
	hold := startTool(t, nil, "", s.args("wait", sh(holdScript, holder)...)...)
	hold.awaitFile(t, filepath.Join(holder, "started"))

	code, _, stderr := runTool(t, nil, s.args("wait", append([]string{"-wait", "1s"}, sh(ranScript, waiter)...)...)...)
	wantCode(t, code, stderr, exitConflictDefault, `lock "wait" was still held elsewhere after waiting 1s: not running the command`)
	if exists(filepath.Join(waiter, "ran")) {
		t.Fatal("the command ran though -wait ran out")
	}

	wait := startTool(t, nil, "", s.args("wait", append([]string{"-wait", "0"}, sh(ranScript, waiter)...)...)...)
	wait.await(t, "waiter queued in Redis", func() bool { return s.hasKey(t, keys("wait").Queue) })
	if exists(filepath.Join(waiter, "ran")) {
		t.Fatal("the command ran while another redlock held the lock")
	}
	touch(t, filepath.Join(holder, "release"))
	wantCode(t, hold.wait(t), hold.stderr.String(), 0)
	wantCode(t, wait.wait(t), wait.stderr.String(), 0)
	if a, b := readToken(t, filepath.Join(holder, "token")), readToken(t, filepath.Join(waiter, "token")); b <= a {
		t.Errorf("the waiter's token %d is not above the holder's %d", b, a)
	}
	s.assertReleased(t, "wait")
}

// TestSignalsReachTheCommand: SIGTERM and SIGINT sent to redlock reach the command, whose
// exit status redlock then reports (its own, or 128+N if the signal killed it), and the
// lock is released; SIGTSTP does not stop redlock.
func TestSignalsReachTheCommand(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)

	dir := t.TempDir()
	tl := startTool(t, nil, "", s.args("signals", sh(termScript, dir)...)...)
	tl.awaitFile(t, filepath.Join(dir, "started"))
	tl.signal(t, syscall.SIGTERM)
	wantCode(t, tl.wait(t), tl.stderr.String(), 7)
	if !exists(filepath.Join(dir, "term")) {
		t.Error("the command's SIGTERM trap did not run")
	}
	s.assertReleased(t, "signals")

	dir = t.TempDir()
	tl = startTool(t, nil, "", s.args("signals", sh(holdScript, dir)...)...)
	tl.awaitFile(t, filepath.Join(dir, "started"))
	tl.signal(t, syscall.SIGINT)
	wantCode(t, tl.wait(t), tl.stderr.String(), 128+int(syscall.SIGINT))
	s.assertReleased(t, "signals")

	dir = t.TempDir()
	tl = startTool(t, nil, "", s.args("signals", sh(holdScript, dir)...)...)
	tl.awaitFile(t, filepath.Join(dir, "started"))
	tl.signal(t, syscall.SIGTSTP)
	tl.await(t, "SIGTSTP notice", func() bool { return strings.Contains(tl.stderr.String(), "ignoring SIGTSTP") })
	touch(t, filepath.Join(dir, "release"))
	wantCode(t, tl.wait(t), tl.stderr.String(), 0)
	s.assertReleased(t, "signals")
}

// TestSignalWhileWaiting: a signal that ends redlock's wait for the lock makes it exit with
// 128+N, without running its command, and leaves the holder alone.
func TestSignalWhileWaiting(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)
	holder, waiter := t.TempDir(), t.TempDir()
	hold := startTool(t, nil, "", s.args("interrupted", sh(holdScript, holder)...)...)
	hold.awaitFile(t, filepath.Join(holder, "started"))

	wait := startTool(t, nil, "", s.args("interrupted", append([]string{"-wait", "0"}, sh(ranScript, waiter)...)...)...)
	wait.await(t, "waiter queued in Redis", func() bool { return s.hasKey(t, keys("interrupted").Queue) })
	wait.signal(t, syscall.SIGTERM)
	wantCode(t, wait.wait(t), wait.stderr.String(), 128+int(syscall.SIGTERM), `interrupted by SIGTERM while waiting for lock "interrupted"`)
	if exists(filepath.Join(waiter, "ran")) {
		t.Error("the command ran")
	}
	select {
	case <-hold.exited:
		t.Fatalf("the holder exited with %d", hold.code)
	default:
	}
	touch(t, filepath.Join(holder, "release"))
	wantCode(t, hold.wait(t), hold.stderr.String(), 0)
	s.assertReleased(t, "interrupted")
}

// TestLostLock: when the lock is lost while the command runs, redlock sends it SIGTERM,
// says why, and exits 75, whatever the command's own status; a command that ignores SIGTERM
// gets SIGKILL after -grace. The loss is seen as keys deleted (FLUSHALL: ErrLost) or as
// extensions that fail until the validity runs out (servers killed: ErrExpired).
func TestLostLock(t *testing.T) {
	forEachN(t, func(t *testing.T, s *lockSetup) {
		t.Run("keys deleted", func(t *testing.T) {
			dir := t.TempDir()
			tl := startTool(t, nil, "", s.args("lost", append([]string{"-ttl", "2s", "-grace", "60s"}, sh(termScript, dir)...)...)...)
			tl.awaitFile(t, filepath.Join(dir, "started"))
			s.flushAll(t)
			wantCode(t, tl.wait(t), tl.stderr.String(), exitLost, `lost lock "lost" while the command ran: the Redis nodes no longer hold it`)
			if !exists(filepath.Join(dir, "term")) {
				t.Error("the command did not get SIGTERM")
			}
		})
		t.Run("SIGKILL after grace", func(t *testing.T) {
			dir := t.TempDir()
			tl := startTool(t, nil, "", s.args("lost", append([]string{"-ttl", "2s", "-grace", "1s"}, sh(stubbornScript, dir)...)...)...)
			tl.awaitFile(t, filepath.Join(dir, "started"))
			s.flushAll(t)
			wantCode(t, tl.wait(t), tl.stderr.String(), exitLost, `lost lock "lost"`, "did not exit within 1s of SIGTERM: sending SIGKILL")
		})
		t.Run("servers killed", func(t *testing.T) {
			dir := t.TempDir()
			tl := startTool(t, nil, "", s.args("lost", append([]string{"-ttl", "2s", "-grace", "60s"}, sh(termScript, dir)...)...)...)
			tl.awaitFile(t, filepath.Join(dir, "started"))
			for _, srv := range s.servers[:len(s.servers)/2+1] { // a majority
				srv.Kill()
			}
			wantCode(t, tl.wait(t), tl.stderr.String(), exitLost, `lost lock "lost" while the command ran: it could not be extended`)
			if !exists(filepath.Join(dir, "term")) {
				t.Error("the command did not get SIGTERM")
			}
		})
	})
}

// TestTimeout: a command still running at -timeout gets SIGTERM, and redlock exits 124
// whatever the command's own status, and releases the lock.
func TestTimeout(t *testing.T) {
	s := newSetup(t, 1)
	dir := t.TempDir()
	code, _, stderr := runTool(t, nil, s.args("timeout", append([]string{"-timeout", "1s"}, sh(termScript, dir)...)...)...)
	wantCode(t, code, stderr, exitTimeout, "still ran after -timeout 1s")
	if !exists(filepath.Join(dir, "term")) {
		t.Error("the command did not get SIGTERM")
	}
	s.assertReleased(t, "timeout")
}

// TestUnavailable: when the nodes cannot grant the lock (unreachable, or abstaining under
// the restart guard), redlock exits 69 without running its command and says why.
func TestUnavailable(t *testing.T) {
	t.Parallel() // see main_test.go
	// Port 1: nothing listens there, and no test's server can take it (they take ports the
	// kernel picks, which are never below 1024), unlike the port of a closed listener,
	// which a server of a test running at the same time can be given.
	const closed = "127.0.0.1:1"
	dir := t.TempDir()
	for _, flag := range []string{"-nonblock", "-wait=1s"} {
		code, _, stderr := runTool(t, nil, "run", "-addrs", closed, "-name", "down", flag, "--", "sh", "-c", ranScript, "sh", dir)
		wantCode(t, code, stderr, exitUnavailable, `could not take lock "down"`, "not running the command", "connecting to "+closed, "connection refused")
	}

	// Fresh servers abstain under the restart guard, on by default at every N.
	for _, n := range []int{1, 3} {
		s := newSetup(t, n)
		code, _, stderr := runTool(t, nil, "run", "-addrs", s.addrs, "-name", "guarded", "-wait", "1s", "--", "sh", "-c", ranScript, "sh", dir)
		wantCode(t, code, stderr, exitUnavailable, "restart guard", "a node up for less than -restart-guard 30s abstains")
		if exists(filepath.Join(dir, "ran")) {
			t.Errorf("N=%d: the command ran", n)
		}
	}
}

// TestBrokenStderr: a redlock whose standard error is a pipe that nobody reads (its reader
// gone, as in `redlock run ... 2>&1 | head -1`) still stops the command at -timeout,
// exits 124 and releases the lock: writing its message fails, but must not kill it
// (SIGPIPE) with the lock held and the command left running unsupervised.
func TestBrokenStderr(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)
	dir := t.TempDir()
	t.Cleanup(func() { touch(t, filepath.Join(dir, "release")) }) // the command, if orphaned
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer w.Close()
	cmd := exec.Command(binary, s.args("brokenpipe", append([]string{"-timeout", "1s"}, sh(holdScript, dir)...)...)...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(toolTimeout):
		_ = cmd.Process.Kill()
		t.Fatalf("redlock still runs after %v", toolTimeout)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		t.Errorf("exit status 0, want %d", exitTimeout)
	case !errors.As(err, &ee):
		t.Fatal(err)
	case ee.Sys().(syscall.WaitStatus).Signaled():
		t.Errorf("redlock was killed by %v, want exit status %d", ee.Sys().(syscall.WaitStatus).Signal(), exitTimeout)
	case ee.ExitCode() != exitTimeout:
		t.Errorf("exit status %d, want %d", ee.ExitCode(), exitTimeout)
	}
	s.assertReleased(t, "brokenpipe")
}

// TestCommandsGroupHoldsTheLock: the lock covers every process of the command's process
// group, not the command alone. When the command exits while others of its group run on
// (a job it put in the background), redlock keeps the lock, and the command's status, until
// they exit; when the command must stop, SIGKILL after -grace reaches those that ignored
// SIGTERM though the command itself has exited, before the lock is released.
func TestCommandsGroupHoldsTheLock(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)
	t.Run("background job", func(t *testing.T) {
		dir := t.TempDir()
		t.Cleanup(func() { touch(t, filepath.Join(dir, "release")) }) // the job, if left behind
		script := `( i=0; while [ ! -e "$1/release" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
: > "$1/job-done" ) >/dev/null 2>&1 &
: > "$1/started"; exit 3`
		tl := startTool(t, nil, "", s.args("group", sh(script, dir)...)...)
		tl.await(t, "a message that the group still runs", func() bool {
			return strings.Contains(tl.stderr.String(), "other processes of its process group still run")
		})
		if !s.hasKey(t, keys("group").Lock) {
			t.Fatal("the lock was released while the command's background job ran")
		}
		touch(t, filepath.Join(dir, "release"))
		wantCode(t, tl.wait(t), tl.stderr.String(), 3)
		if !exists(filepath.Join(dir, "job-done")) {
			t.Error("redlock exited before the background job did")
		}
		s.assertReleased(t, "group")
	})
	t.Run("SIGKILL after grace", func(t *testing.T) {
		dir := t.TempDir()
		script := `sh -c 'trap "" TERM; i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done' >/dev/null 2>&1 &
echo $! > "$1/job"; trap 'exit 7' TERM; : > "$1/started"
i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done`
		tl := startTool(t, nil, "", s.args("group", append([]string{"-timeout", "1s", "-grace", "1s"}, sh(script, dir)...)...)...)
		tl.awaitFile(t, filepath.Join(dir, "started"))
		job := int(readToken(t, filepath.Join(dir, "job"))) // a positive decimal, as a token is
		t.Cleanup(func() { _ = syscall.Kill(job, syscall.SIGKILL) })
		wantCode(t, tl.wait(t), tl.stderr.String(), exitTimeout, "still ran after -timeout 1s",
			"other processes of its process group still run", "did not exit within 1s of SIGTERM: sending SIGKILL")
		if err := syscall.Kill(job, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("the background job that ignores SIGTERM still runs after redlock exited (kill -0: %v)", err)
		}
		s.assertReleased(t, "group")
	})
}

// TestReleaseTriedAgain: a release that no node answered (its connection broke on the way,
// as many times as the driver sends a command) is tried again, so the lock is free when
// redlock exits rather than after -ttl.
func TestReleaseTriedAgain(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)
	proxy := redistest.DropRequests(t, s.servers[0].Addr(), "$5\r\nleave\r\n", 4) // an argument "leave": a release
	dir := t.TempDir()
	code, _, stderr := runTool(t, nil, "run", "-addrs", proxy.Addr(), "-restart-guard", "0", "-node-timeout", testNodeTimeout,
		"-name", "again", "--", "sh", "-c", ranScript, "sh", dir)
	wantCode(t, code, stderr, 0)
	if strings.Contains(stderr, "could not release") {
		t.Errorf("redlock gave up its release:\n%s", stderr)
	}
	if n := proxy.Dropped(); n != 4 {
		t.Errorf("%d releases dropped, want 4", n)
	}
	s.assertReleased(t, "again")
}

// TestReleaseTriedUntilExpired: a release that no node answers until the lock's keys have
// expired says so, not that the lock was lost while the command ran, and keeps the
// command's status.
func TestReleaseTriedUntilExpired(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)
	proxy := redistest.DropRequests(t, s.servers[0].Addr(), "$5\r\nleave\r\n", math.MaxInt) // every release
	dir := t.TempDir()
	tl := startTool(t, nil, "", "run", "-addrs", proxy.Addr(), "-restart-guard", "0", "-node-timeout", testNodeTimeout,
		"-ttl", "2s", "-name", "expired", "--", "sh", "-c", ranScript, "sh", dir)
	tl.await(t, "a release dropped", func() bool { return proxy.Dropped() > 0 })
	tl.await(t, "the lock's keys expired", func() bool { return !s.hasKey(t, keys("expired").Lock) })
	// A release begun within the lease's validity and answered after its keys expired
	// counts as let go (see core.Cluster.Release): only a release begun since is sure to
	// find them expired. The driver sends one release at most 4 times (go-redis's
	// MaxRetries, 3), and each of those twice at most (EVALSHA, then EVAL if the script
	// was not loaded): 9 drops more cover one release begun since.
	gone := proxy.Dropped()
	tl.await(t, "a release begun since the keys expired", func() bool { return proxy.Dropped() >= gone+9 })
	proxy.Stop()
	wantCode(t, tl.wait(t), tl.stderr.String(), 0, `could not release lock "expired" before it expired`)
}

// TestFreshServerWaitsAndSaysSo: on a freshly started server, which abstains under the
// restart guard, redlock run waits by default until the guard has passed (its default
// -wait is no limit, as flock's), rather than giving up as the guard ends, and says at
// once, while it waits, which node abstains and for how long. The guard here, 35s, is
// above the 30s that -wait had by default, and the default guard.
func TestFreshServerWaitsAndSaysSo(t *testing.T) {
	s := newSetup(t, 1)
	dir := t.TempDir()
	tl := startTool(t, nil, "", append([]string{"run", "-addrs", s.addrs, "-node-timeout", testNodeTimeout, "-restart-guard", "35s", "-name", "fresh"}, sh(ranScript, dir)...)...)
	said := "node " + s.addrs + " abstains for another "
	tl.await(t, "a line that the node abstains", func() bool { return strings.Contains(tl.stderr.String(), said) })
	if exists(filepath.Join(dir, "ran")) {
		t.Fatal("the command ran while the node abstained")
	}
	wantCode(t, tl.wait(t), tl.stderr.String(), 0, "under the restart guard", "-restart-guard 35s", "waiting for it")
	if !exists(filepath.Join(dir, "ran")) {
		t.Error("the command did not run once the guard had passed")
	}
	if n := strings.Count(tl.stderr.String(), said); n != 1 {
		t.Errorf("the abstention is said %d times, want once:\n%s", n, tl.stderr.String())
	}
}

// TestRunNameFirst: redlock run takes NAME first, as elect and status do, with or without
// "--" before COMMAND, flags before and after it; it is the lock that -name NAME, the older
// form, takes: while one holds it, the other is refused.
func TestRunNameFirst(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)
	holder, other := t.TempDir(), t.TempDir()
	hold := startTool(t, nil, "", append(append([]string{"run", "first"}, s.flags...), "sh", "-c", holdScript, "sh", holder)...)
	hold.awaitFile(t, filepath.Join(holder, "started"))
	code, _, stderr := runTool(t, nil, s.args("first", append([]string{"-nonblock"}, sh(ranScript, other)...)...)...)
	wantCode(t, code, stderr, exitConflictDefault, `lock "first" is held elsewhere`)
	touch(t, filepath.Join(holder, "release"))
	wantCode(t, hold.wait(t), hold.stderr.String(), 0)

	code, _, stderr = runTool(t, nil, append(append([]string{"run", "-nonblock", "first"}, s.flags...), sh(ranScript, other)...)...)
	wantCode(t, code, stderr, 0)
	if token := readToken(t, filepath.Join(other, "token")); token <= readToken(t, filepath.Join(holder, "token")) {
		t.Errorf("the second holder's token %d is not above the first's", token)
	}
	s.assertReleased(t, "first")
}
