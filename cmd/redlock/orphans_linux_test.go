package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestOrphansReapedWhileCommandRuns: the orphans that redlock adopts as the command's
// subreaper are reaped as they exit, while the command still runs, whether they stayed in
// its process group or left it (setsid): none stays a zombie child of redlock, as none
// would under an init that reaps.
func TestOrphansReapedWhileCommandRuns(t *testing.T) {
	s := newSetup(t, 1)
	dir := t.TempDir()
	script := `(sh -c ': > "$1/in-group"' sh "$1" &)
(setsid sh -c ': > "$1/left-group"' sh "$1" &)
` + holdScript
	tl := startTool(t, nil, "", s.args("orphans", sh(script, dir)...)...)
	tl.awaitFile(t, filepath.Join(dir, "started"))
	tl.awaitFile(t, filepath.Join(dir, "in-group"))
	tl.awaitFile(t, filepath.Join(dir, "left-group"))
	var zombies []int
	tl.await(t, "reaping of the orphans redlock adopted", func() bool {
		zombies = zombieChildren(t, tl.cmd.Process.Pid)
		return len(zombies) == 0
	})
	touch(t, filepath.Join(dir, "release"))
	wantCode(t, tl.wait(t), tl.stderr.String(), 0)
	s.assertReleased(t, "orphans")
}

// zombieChildren returns the processes whose parent is pid and that have exited without
// being reaped, from /proc.
func zombieChildren(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var zombies []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil { // it exited and was reaped meanwhile
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == pid && fields[0] == "Z" {
			zombies = append(zombies, child)
		}
	}
	return zombies
}

// TestStoppedJobHoldsTheLock: a stopped process of the command's group counts as one that
// runs: when the command exits, redlock keeps the lock until the job is continued and
// exits. (Its parent gone, the job is redlock's, of another process group in the same
// session, so its group is not orphaned and the kernel does not send it SIGHUP.)
func TestStoppedJobHoldsTheLock(t *testing.T) {
	s := newSetup(t, 1)
	dir := t.TempDir()
	script := `sh -c 'echo $$ > "$1/job.tmp"; mv "$1/job.tmp" "$1/job"; kill -STOP $$; : > "$1/job-done"' sh "$1" >/dev/null 2>&1 &
: > "$1/started"`
	tl := startTool(t, nil, "", s.args("group", sh(script, dir)...)...)
	tl.awaitFile(t, filepath.Join(dir, "job"))
	job := int(readToken(t, filepath.Join(dir, "job")))
	t.Cleanup(func() { _ = syscall.Kill(job, syscall.SIGKILL) })
	tl.await(t, "a message that the group still runs", func() bool {
		return strings.Contains(tl.stderr.String(), "other processes of its process group still run")
	})
	tl.await(t, "the job stopped", func() bool { return processState(job) == "T" })
	if !s.hasKey(t, keys("group").Lock) {
		t.Fatal("the lock was released while a stopped job of the command's group remained")
	}
	if err := syscall.Kill(job, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	wantCode(t, tl.wait(t), tl.stderr.String(), 0)
	if !exists(filepath.Join(dir, "job-done")) {
		t.Error("redlock exited before the continued job did")
	}
	s.assertReleased(t, "group")
}

// processState returns the state letter of process pid (R, S, T, Z...) from /proc, or ""
// if it cannot be read.
func processState(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(fields) == 0 {
		return ""
	}
	return fields[0]
}
