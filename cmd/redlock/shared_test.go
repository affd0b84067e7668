package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRunShared: runs with -shared hold the lock's read side together, without a fencing
// token; a run without -shared is refused while they hold it, waits for them all, and
// then holds it alone: a -shared run is refused behind it, as a reader is behind a
// waiting writer, and while it holds. Over several names, -shared holds the read side of
// each; a reader whose share vanishes is stopped (75).
func TestRunShared(t *testing.T) {
	t.Parallel() // see main_test.go
	forEachN(t, func(t *testing.T, s *lockSetup) {
		reader, other, writer := t.TempDir(), t.TempDir(), t.TempDir()
		shared := func(rest ...string) []string { return s.args("shared", append([]string{"-shared"}, rest...)...) }
		r := startTool(t, nil, "", shared(sh(holdScript, reader)...)...)
		r.awaitFile(t, filepath.Join(reader, "started"))

		code, _, stderr := runTool(t, []string{"REDLOCK_TOKEN=7"}, shared(append([]string{"-nonblock"}, sh(ranScript, other)...)...)...)
		wantCode(t, code, stderr, 0)
		if b, err := os.ReadFile(filepath.Join(other, "token")); err != nil || string(b) != "\n" {
			t.Errorf("a reader's $REDLOCK_TOKEN: %q (%v), want none", b, err)
		}
		code, _, stderr = runTool(t, nil, s.args("shared", append([]string{"-nonblock"}, sh(ranScript, writer)...)...)...)
		wantCode(t, code, stderr, exitConflictDefault, `lock "shared" is held elsewhere`)

		w := startTool(t, nil, "", s.args("shared", sh(holdScript, writer)...)...)
		w.await(t, "the writer queued in Redis", func() bool { return s.hasKey(t, keys("shared").Queue) })
		code, _, stderr = runTool(t, nil, shared(append([]string{"-nonblock"}, sh(ranScript, other)...)...)...)
		wantCode(t, code, stderr, exitConflictDefault, `shared lock "shared" is held elsewhere`)
		if exists(filepath.Join(writer, "started")) {
			t.Fatal("the writer's command ran while a reader held the lock")
		}
		touch(t, filepath.Join(reader, "release"))
		wantCode(t, r.wait(t), r.stderr.String(), 0)
		w.awaitFile(t, filepath.Join(writer, "started"))
		code, _, stderr = runTool(t, nil, shared(append([]string{"-nonblock"}, sh(ranScript, other)...)...)...)
		wantCode(t, code, stderr, exitConflictDefault, `shared lock "shared" is held elsewhere`)
		touch(t, filepath.Join(writer, "release"))
		wantCode(t, w.wait(t), w.stderr.String(), 0)
		s.assertReleased(t, "shared")
		if s.hasKey(t, keys("shared").Readers) {
			t.Error("a reader's share is left on a server")
		}

		// Over several names, -shared holds the read side of each.
		both, writer2, reader2 := t.TempDir(), t.TempDir(), t.TempDir()
		w = startTool(t, nil, "", s.args("shared-b", sh(holdScript, writer2)...)...)
		w.awaitFile(t, filepath.Join(writer2, "started"))
		code, _, stderr = runTool(t, nil, s.args("shared-a", append([]string{"-name", "shared-b", "-shared", "-nonblock"}, sh(ranScript, both)...)...)...)
		wantCode(t, code, stderr, exitConflictDefault, `shared lock ["shared-a" "shared-b"] is held elsewhere`)
		touch(t, filepath.Join(writer2, "release"))
		wantCode(t, w.wait(t), w.stderr.String(), 0)
		r = startTool(t, nil, "", s.args("shared-a", append([]string{"-name", "shared-b", "-shared"}, sh(holdScript, reader2)...)...)...)
		r.awaitFile(t, filepath.Join(reader2, "started"))
		code, _, stderr = runTool(t, nil, s.args("shared-b", append([]string{"-shared", "-nonblock"}, sh(ranScript, both)...)...)...)
		wantCode(t, code, stderr, 0)
		code, _, stderr = runTool(t, nil, s.args("shared-a", append([]string{"-nonblock"}, sh(ranScript, both)...)...)...)
		wantCode(t, code, stderr, exitConflictDefault, `lock "shared-a" is held elsewhere`)
		touch(t, filepath.Join(reader2, "release"))
		wantCode(t, r.wait(t), r.stderr.String(), 0)

		// A reader whose share vanishes from the nodes has lost it: its command is stopped.
		lost := t.TempDir()
		l := startTool(t, nil, "", shared(append([]string{"-ttl", "2s", "-grace", "60s"}, sh(termScript, lost)...)...)...)
		l.awaitFile(t, filepath.Join(lost, "started"))
		s.flushAll(t)
		wantCode(t, l.wait(t), l.stderr.String(), exitLost, `lost shared lock "shared" while the command ran: the Redis nodes no longer hold it`)
		if !exists(filepath.Join(lost, "term")) {
			t.Error("the reader's command did not get SIGTERM")
		}
	})
}
