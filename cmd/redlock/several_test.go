package main

import (
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// argsAll returns redlock's arguments: run, the setup's flags, -name for each of names in
// turn, then rest.
func (s *lockSetup) argsAll(names []string, rest ...string) []string {
	args := append([]string{"run"}, s.flags...)
	for _, name := range names {
		args = append(args, "-name", name)
	}
	return append(args, rest...)
}

// get returns the string value of key on server i, or "" if it has none.
func (s *lockSetup) get(t *testing.T, i int, key string) string {
	t.Helper()
	v, err := s.servers[i].Do("GET", key)
	if err != nil {
		t.Fatalf("GET %s on %s: %v", key, s.servers[i].Addr(), err)
	}
	str, _ := v.(string)
	return str
}

// assertHeldTogether fails the test unless one owner holds the lock keys of every one of
// names on a quorum of the servers, with each name's fence counter the same on each server
// that holds them and equal to token on at least one, and no server has them held by
// different owners. A server may have missed the grant (a node timeout on a loaded
// machine), but the script that takes the names is atomic on each server.
func (s *lockSetup) assertHeldTogether(t *testing.T, names []string, token uint64) {
	t.Helper()
	owner, holding, fenced := "", 0, false
	for i := range s.servers {
		var vals, fences []string
		for _, name := range names {
			vals = append(vals, s.get(t, i, keys(name).Lock))
			fences = append(fences, s.get(t, i, keys(name).Fence))
		}
		if vals[0] == "" {
			for j, v := range vals {
				if v != "" {
					t.Errorf("server %d: %q held by %s while %q is free", i, names[j], v, names[0])
				}
			}
			continue
		}
		for j := range names {
			if vals[j] != vals[0] || fences[j] != fences[0] {
				t.Errorf("server %d: %q held by %s (fence %s), %q by %s (fence %s): want one owner and one fence",
					i, names[0], vals[0], fences[0], names[j], vals[j], fences[j])
			}
		}
		if owner == "" {
			owner = vals[0]
		} else if vals[0] != owner {
			t.Errorf("server %d: held by %s, another by %s", i, vals[0], owner)
		}
		holding++
		fenced = fenced || fences[0] == strconv.FormatUint(token, 10)
	}
	if quorum := len(s.servers)/2 + 1; holding < quorum {
		t.Errorf("%q held on %d servers, want a quorum of %d", names, holding, quorum)
	}
	if !fenced {
		t.Errorf("no server that holds %q has its fence counter at the command's token %d", names, token)
	}
}

// TestRunSeveralNames: -name given twice holds both names while the command runs, with one
// owner and one token (above both names' earlier tokens, and below their next ones), so a
// run of either name alone, or of a set that shares one of them, does not get it; a
// -nonblock run over a held name and a free one exits 1 without running its command and
// leaves the free one untaken. Both are released when the command exits.
func TestRunSeveralNames(t *testing.T) {
	t.Parallel() // see main_test.go
	forEachN(t, func(t *testing.T, s *lockSetup) {
		names := []string{"accounts/b", "accounts/a"}
		dir := t.TempDir()
		var before []uint64
		for i, name := range names { // a token for each name, b's first
			code, _, stderr := runTool(t, nil, s.args(name, sh(ranScript, dir)...)...)
			wantCode(t, code, stderr, 0)
			before = append(before, readToken(t, filepath.Join(dir, "token")))
			if i > 0 && before[i] <= before[i-1] {
				t.Fatalf("%q's token %d is not above %q's %d", name, before[i], names[i-1], before[i-1])
			}
		}

		holder := t.TempDir()
		hold := startTool(t, nil, "", s.argsAll(names, sh(holdScript, holder)...)...)
		hold.awaitFile(t, filepath.Join(holder, "started"))
		token := readToken(t, filepath.Join(holder, "token"))
		for i, name := range names {
			if token <= before[i] {
				t.Errorf("the token %d over both names is not above %q's earlier token %d", token, name, before[i])
			}
		}
		s.assertHeldTogether(t, names, token)

		other := t.TempDir()
		for _, name := range names {
			code, _, stderr := runTool(t, nil, s.args(name, append([]string{"-nonblock"}, sh(ranScript, other)...)...)...)
			wantCode(t, code, stderr, exitConflictDefault, `lock "`+name+`" is held elsewhere: not running the command`)
		}
		// A set with a free name: none taken.
		code, _, stderr := runTool(t, nil, s.argsAll([]string{"accounts/c", "accounts/a"}, append([]string{"-nonblock"}, sh(ranScript, other)...)...)...)
		wantCode(t, code, stderr, exitConflictDefault,
			`lock ["accounts/c" "accounts/a"] is held elsewhere (one of its names at least): not running the command`)
		if exists(filepath.Join(other, "ran")) {
			t.Fatal("a command ran while another redlock held its lock")
		}
		s.assertReleased(t, "accounts/c")
		code, _, stderr = runTool(t, nil, s.args("accounts/c", append([]string{"-nonblock"}, sh(ranScript, other)...)...)...)
		wantCode(t, code, stderr, 0)
		if !exists(filepath.Join(other, "ran")) {
			t.Error("the free name could not be taken after a set failed to take it")
		}
		s.assertHeldTogether(t, names, token) // still, while its command runs

		touch(t, filepath.Join(holder, "release"))
		wantCode(t, hold.wait(t), hold.stderr.String(), 0)
		for _, name := range names {
			s.assertReleased(t, name)
			after := t.TempDir()
			code, _, stderr := runTool(t, nil, s.args(name, append([]string{"-nonblock"}, sh(ranScript, after)...)...)...)
			wantCode(t, code, stderr, 0)
			if next := readToken(t, filepath.Join(after, "token")); next <= token {
				t.Errorf("%q's next token %d is not above the set's %d", name, next, token)
			}
		}
	})
}

// TestRunSeveralNamesFold: a name given twice counts once: the run holds that one lock,
// which messages name as one name.
func TestRunSeveralNamesFold(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)
	names := []string{"fold", "fold"}
	holder := t.TempDir()
	hold := startTool(t, nil, "", s.argsAll(names, sh(holdScript, holder)...)...)
	hold.awaitFile(t, filepath.Join(holder, "started"))
	s.assertHeldTogether(t, names[:1], readToken(t, filepath.Join(holder, "token")))

	other := t.TempDir()
	code, _, stderr := runTool(t, nil, s.args("fold", append([]string{"-nonblock"}, sh(ranScript, other)...)...)...)
	wantCode(t, code, stderr, exitConflictDefault, `lock "fold" is held elsewhere: not running the command`)
	code, _, stderr = runTool(t, nil, s.argsAll(names, append([]string{"-nonblock"}, sh(ranScript, other)...)...)...)
	wantCode(t, code, stderr, exitConflictDefault, `redlock: lock "fold" is held elsewhere: not running the command`)
	if exists(filepath.Join(other, "ran")) {
		t.Fatal("a command ran while another redlock held its lock")
	}

	touch(t, filepath.Join(holder, "release"))
	wantCode(t, hold.wait(t), hold.stderr.String(), 0)
	s.assertReleased(t, "fold")
}

// TestRunSeveralNamesWait: a run over two names, one of them held, gives up when -wait
// runs out; one that waits longer queues for the held name, and runs its command, with a
// larger token, once the holder is done. A signal ends such a wait (128+N), without the
// command.
func TestRunSeveralNamesWait(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)
	names := []string{"wait/a", "wait/b"}
	holder, waiter := t.TempDir(), t.TempDir()
	hold := startTool(t, nil, "", s.args("wait/b", sh(holdScript, holder)...)...)
	hold.awaitFile(t, filepath.Join(holder, "started"))

	code, _, stderr := runTool(t, nil, s.argsAll(names, append([]string{"-wait", "1s"}, sh(ranScript, waiter)...)...)...)
	wantCode(t, code, stderr, exitConflictDefault,
		`lock ["wait/a" "wait/b"] was still held elsewhere (one of its names at least) after waiting 1s: not running the command`)

	wait := startTool(t, nil, "", s.argsAll(names, append([]string{"-wait", "0"}, sh(ranScript, waiter)...)...)...)
	wait.await(t, "waiter queued in Redis", func() bool { return s.hasKey(t, keys("wait/b").Queue) })
	wait.signal(t, syscall.SIGTERM)
	wantCode(t, wait.wait(t), wait.stderr.String(), 128+int(syscall.SIGTERM), `interrupted by SIGTERM while waiting for lock ["wait/a" "wait/b"]`)
	if exists(filepath.Join(waiter, "ran")) {
		t.Fatal("the command ran while another redlock held one of its names")
	}

	wait = startTool(t, nil, "", s.argsAll(names, append([]string{"-wait", "0"}, sh(ranScript, waiter)...)...)...)
	wait.await(t, "waiter queued in Redis", func() bool { return s.hasKey(t, keys("wait/b").Queue) })
	if exists(filepath.Join(waiter, "ran")) {
		t.Fatal("the command ran while another redlock held one of its names")
	}
	touch(t, filepath.Join(holder, "release"))
	wantCode(t, hold.wait(t), hold.stderr.String(), 0)
	wantCode(t, wait.wait(t), wait.stderr.String(), 0)
	if a, b := readToken(t, filepath.Join(holder, "token")), readToken(t, filepath.Join(waiter, "token")); b <= a {
		t.Errorf("the waiter's token %d is not above the holder's %d", b, a)
	}
	for _, name := range names {
		s.assertReleased(t, name)
	}
}

// TestRunSeveralNamesLostAndSignals: a signal to a run over two names reaches its command
// and both names are released after it; the loss of one of the names while the command
// runs stops it (SIGTERM) and makes redlock exit 75, and the other name is released.
func TestRunSeveralNamesLostAndSignals(t *testing.T) {
	t.Parallel() // see main_test.go
	forEachN(t, func(t *testing.T, s *lockSetup) {
		names := []string{"lost/a", "lost/b"}
		dir := t.TempDir()
		tl := startTool(t, nil, "", s.argsAll(names, sh(termScript, dir)...)...)
		tl.awaitFile(t, filepath.Join(dir, "started"))
		tl.signal(t, syscall.SIGTERM)
		wantCode(t, tl.wait(t), tl.stderr.String(), 7)
		if !exists(filepath.Join(dir, "term")) {
			t.Error("the command's SIGTERM trap did not run")
		}
		for _, name := range names {
			s.assertReleased(t, name)
		}

		dir = t.TempDir()
		tl = startTool(t, nil, "", s.argsAll(names, append([]string{"-ttl", "2s", "-grace", "60s"}, sh(termScript, dir)...)...)...)
		tl.awaitFile(t, filepath.Join(dir, "started"))
		for _, srv := range s.servers {
			if _, err := srv.Do("DEL", keys("lost/b").Lock); err != nil {
				t.Fatalf("DEL on %s: %v", srv.Addr(), err)
			}
		}
		wantCode(t, tl.wait(t), tl.stderr.String(), exitLost,
			`lost lock ["lost/a" "lost/b"] while the command ran: the Redis nodes no longer hold every one of its names`)
		if !exists(filepath.Join(dir, "term")) {
			t.Error("the command did not get SIGTERM")
		}
		for _, name := range names {
			s.assertReleased(t, name)
		}
	})
}
