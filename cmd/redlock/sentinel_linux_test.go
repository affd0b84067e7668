package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKilledRedlockTakesItsCommandAlong: when redlock is killed with SIGKILL while its
// command runs, the command dies with it (its parent-death signal), and so does a job the
// command put in the background in its process group (redlock's sentinel): neither runs
// on without the lock.
func TestKilledRedlockTakesItsCommandAlong(t *testing.T) {
	s := newSetup(t, 1)
	dir := t.TempDir()
	script := `sleep 300 & echo $! > "$1/job.tmp"; mv "$1/job.tmp" "$1/job"
echo $$ > "$1/cmd.tmp"; mv "$1/cmd.tmp" "$1/cmd"
` + holdScript
	tl := startTool(t, nil, "", s.args("killed", sh(script, dir)...)...)
	tl.awaitFile(t, filepath.Join(dir, "started"))
	job, cmd := int(readToken(t, filepath.Join(dir, "job"))), int(readToken(t, filepath.Join(dir, "cmd")))
	t.Cleanup(func() { // if they outlived redlock
		_ = syscall.Kill(job, syscall.SIGKILL)
		_ = syscall.Kill(cmd, syscall.SIGKILL)
	})
	tl.signal(t, syscall.SIGKILL)
	tl.wait(t)
	for _, p := range []struct {
		what string
		pid  int
	}{{"the command", cmd}, {"the command's background job", job}} {
		deadline := time.Now().Add(stateTimeout)
		for state := processState(p.pid); state != "" && state != "Z"; state = processState(p.pid) {
			if time.Now().After(deadline) {
				t.Fatalf("%s (PID %d) still runs (state %s) %v after redlock was killed; redlock's stderr:\n%s", p.what, p.pid, state, stateTimeout, tl.stderr.String())
			}
			time.Sleep(pollEvery)
		}
	}
	if want := "killed the command's process group"; !strings.Contains(tl.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, tl.stderr.String())
	}
}
