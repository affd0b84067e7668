package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// TestMain makes the test binary a worker when run (by run, through os.Executable) as one.
func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		os.Exit(worker())
	}
	os.Exit(m.Run())
}

// small is a run that finishes in a few seconds, even with -race; its bound is generous,
// for a loaded machine.
var small = config{Workers: 3, Goroutines: 2, Increments: 20, Timeout: 3 * time.Minute}

// TestRun runs the parent in this process over embedded servers, with copies of the test
// binary as workers: no update may be lost.
func TestRun(t *testing.T) {
	t.Setenv("REDIS_ADDRS", "")
	var out strings.Builder
	res, err := run(context.Background(), small, &out)
	if err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	if res.Expected != 120 || res.Count != res.Expected {
		t.Errorf("final count %d, expected %d (want 120 and 120)", res.Count, res.Expected)
	}
	for _, want := range []string{"Final count: 120, expected 3 x 2 x 20 = 120", "No lost update"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), ": done, 2 goroutines x 20 increments in "); n != 3 {
		t.Errorf("%d workers reported done, want 3:\n%s", n, out.String())
	}
}

// TestRunNoLock runs without the lock. Lost updates are likely but not certain, so they are
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
	if res.Count < 1 || res.Count > res.Expected {
		t.Errorf("final count %d, want 1..%d", res.Count, res.Expected)
	}
	t.Logf("without the lock, %d of %d updates were lost", res.Expected-res.Count, res.Expected)
}

// TestRunTimeout gives the run far more work than its time: the parent must kill its workers
// and fail.
func TestRunTimeout(t *testing.T) {
	t.Setenv("REDIS_ADDRS", "")
	cfg := config{Workers: 2, Goroutines: 2, Increments: 1_000_000, Timeout: 1500 * time.Millisecond}
	var out strings.Builder
	start := time.Now()
	_, err := run(context.Background(), cfg, &out)
	if err == nil || !strings.Contains(err.Error(), "did not finish within 1.5s") {
		t.Fatalf("run: got error %v, want a timeout\noutput:\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), "the run did not finish within 1.5s: killing worker"); n != 2 {
		t.Errorf("%d workers killed, want 2:\n%s", n, out.String())
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("run returned after %v, long after its 1.5s timeout", d)
	}
}

// TestCommand builds the program and runs it as a user would: its exit code and output, with
// and without the lock, and its workers ending when it is killed.
func TestCommand(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the example with")
	}
	bin := filepath.Join(t.TempDir(), "mutex")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// No REDIS_ADDRS: embedded servers.
	env := []string{"REDIS_ADDRS="}
	args := []string{"-workers", "3", "-goroutines", "2", "-increments", "20", "-timeout", "30s"}

	t.Run("lock", func(t *testing.T) {
		out, code := runCommand(t, bin, env, args...)
		if code != 0 || !strings.Contains(out, "Final count: 120, expected 3 x 2 x 20 = 120") || !strings.Contains(out, "No lost update") {
			t.Errorf("exit code %d, want 0, and no lost update; output:\n%s", code, out)
		}
		for i := 1; i <= 3; i++ {
			if !strings.Contains(out, fmt.Sprintf("Worker %d (pid ", i)) {
				t.Errorf("output lacks worker %d's done line:\n%s", i, out)
			}
		}
	})

	t.Run("nolock", func(t *testing.T) {
		out, code := runCommand(t, bin, env, append(args, "-nolock")...)
		if code != 0 || !strings.Contains(out, "Final count: ") {
			t.Errorf("exit code %d, want 0 (lost updates are no error without the lock); output:\n%s", code, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "Without the lock") {
				t.Log(line)
			}
		}
	})

	t.Run("bad flags", func(t *testing.T) {
		out, code := runCommand(t, bin, env, "-workers", "0")
		if code != 1 || !strings.Contains(out, "must be positive") {
			t.Errorf("exit code %d, want 1 with an error; output:\n%s", code, out)
		}
	})

	t.Run("workers exit when the parent dies", func(t *testing.T) {
		if runtime.GOOS != "linux" {
			t.Skip("checks processes in /proc")
		}
		// The servers live in this test, so that they outlive the killed parent: only the
		// parent's death may stop the workers.
		var addrs []string
		for range 3 {
			addrs = append(addrs, miniredis.RunT(t).Addr())
		}
		cmd := exec.Command(bin, "-workers", "2", "-goroutines", "2", "-increments", "1000000", "-timeout", "60s")
		cmd.Env = append(os.Environ(), "REDIS_ADDRS="+strings.Join(addrs, ","), "COUNTER_ADDR="+miniredis.RunT(t).Addr())
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = cmd.Stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()

		var pids []int
		started := regexp.MustCompile(`^Started worker \d+: pid (\d+)$`)
		lines := bufio.NewScanner(stdout)
		for len(pids) < 2 && lines.Scan() {
			if m := started.FindStringSubmatch(lines.Text()); m != nil {
				pid, _ := strconv.Atoi(m[1])
				pids = append(pids, pid)
			}
		}
		if len(pids) < 2 {
			t.Fatalf("the program started %d workers before its output ended, want 2", len(pids))
		}
		for _, pid := range pids {
			if !alive(pid) {
				t.Fatalf("worker pid %d is not running right after its start", pid)
			}
		}

		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		go io.Copy(io.Discard, stdout)
		_ = cmd.Wait()

		deadline := time.Now().Add(5 * time.Second)
		for _, pid := range pids {
			for alive(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("worker pid %d still runs 5s after its parent was killed", pid)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
}

// runCommand runs bin with args, its environment extended with env, and returns its
// combined output and exit code.
func runCommand(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit) && ctx.Err() == nil:
		return string(out), exit.ExitCode()
	}
	t.Fatalf("run %s %s: %v\noutput:\n%s", bin, strings.Join(args, " "), err, out)
	return "", 0
}

// alive reports whether process pid exists and is not a zombie (a worker whose parent was
// killed is reparented, and may stay a zombie until its new parent reaps it).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}
