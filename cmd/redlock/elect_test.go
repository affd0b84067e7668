package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// electArgs returns redlock's arguments to campaign for the election name over s, and run
// script with dir as $1 once elected; rest go between the name and the command.
func (s *lockSetup) electArgs(name, script, dir string, rest ...string) []string {
	args := append([]string{"elect", name}, s.flags...)
	return append(append(args, rest...), sh(script, dir)...)
}

// TestElect: redlock elect runs its command once elected, with the leader's token in
// REDLOCK_TOKEN, and exits with the command's status; a second candidate waits, without
// running its command, until the first's command exits, and then leads with a larger
// token; the leader's -value is the election's.
func TestElect(t *testing.T) {
	t.Parallel() // see main_test.go
	forEachN(t, func(t *testing.T, s *lockSetup) {
		first, second := t.TempDir(), t.TempDir()
		a := startTool(t, nil, "", s.electArgs("elect", holdScript, first, "-value", "first")...)
		a.awaitFile(t, filepath.Join(first, "started"))
		rep := statusOf(t, s.addrs, "elect", 0)
		if rep.Leader == nil || rep.Leader.Value != "first" || rep.Holder == nil || rep.Holder.Token != readToken(t, filepath.Join(first, "token")) {
			t.Fatalf("leader %+v, holder %+v; want the first candidate, with its token", rep.Leader, rep.Holder)
		}

		b := startTool(t, nil, "", s.electArgs("elect", `echo "$REDLOCK_TOKEN" > "$1/token"; : > "$1/ran"; exit 4`, second, "-value", "second")...)
		b.await(t, "second candidate queued in Redis", func() bool { return s.hasKey(t, keys("elect").Queue) })
		if exists(filepath.Join(second, "ran")) {
			t.Fatal("the second candidate's command ran while the first led")
		}
		touch(t, filepath.Join(first, "release"))
		wantCode(t, a.wait(t), a.stderr.String(), 0)
		wantCode(t, b.wait(t), b.stderr.String(), 4)
		if x, y := readToken(t, filepath.Join(first, "token")), readToken(t, filepath.Join(second, "token")); y <= x {
			t.Errorf("the second leader's token %d is not above the first's %d", y, x)
		}
		s.assertReleased(t, "elect")
	})
}

// TestElectLost: when leadership is lost while the command runs (the keys deleted, or the
// servers gone), the command gets SIGTERM and redlock elect exits 75, saying why.
func TestElectLost(t *testing.T) {
	t.Parallel() // see main_test.go
	forEachN(t, func(t *testing.T, s *lockSetup) {
		t.Run("keys deleted", func(t *testing.T) {
			dir := t.TempDir()
			tl := startTool(t, nil, "", s.electArgs("lost", termScript, dir, "-ttl", "2s", "-grace", "60s")...)
			tl.awaitFile(t, filepath.Join(dir, "started"))
			s.flushAll(t)
			wantCode(t, tl.wait(t), tl.stderr.String(), exitLost, `lost leadership of election "lost" while the command ran: the Redis nodes no longer hold it`)
			if !exists(filepath.Join(dir, "term")) {
				t.Error("the command did not get SIGTERM")
			}
		})
		t.Run("servers killed", func(t *testing.T) {
			dir := t.TempDir()
			tl := startTool(t, nil, "", s.electArgs("lost", termScript, dir, "-ttl", "2s", "-grace", "60s")...)
			tl.awaitFile(t, filepath.Join(dir, "started"))
			for _, srv := range s.servers[:len(s.servers)/2+1] { // a majority
				srv.Kill()
			}
			wantCode(t, tl.wait(t), tl.stderr.String(), exitLost, `lost leadership of election "lost" while the command ran: it could not be extended`)
			if !exists(filepath.Join(dir, "term")) {
				t.Error("the command did not get SIGTERM")
			}
		})
	})
}

// TestElectWaitAndSignals: a candidate whose -wait runs out while another leads exits with
// the conflict status, and one that a signal interrupts with 128+N, neither running its
// command; a signal sent to the leader reaches its command, whose status is redlock's.
func TestElectWaitAndSignals(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)
	leader, other := t.TempDir(), t.TempDir()
	lead := startTool(t, nil, "", s.electArgs("signals", termScript, leader)...)
	lead.awaitFile(t, filepath.Join(leader, "started"))

	code, _, stderr := runTool(t, nil, s.electArgs("signals", ranScript, other, "-wait", "1s")...)
	wantCode(t, code, stderr, exitConflictDefault, `leadership of election "signals" was still held elsewhere after waiting 1s: not running the command`)

	wait := startTool(t, nil, "", s.electArgs("signals", ranScript, other)...)
	wait.await(t, "candidate queued in Redis", func() bool { return s.hasKey(t, keys("signals").Queue) })
	wait.signal(t, syscall.SIGINT)
	wantCode(t, wait.wait(t), wait.stderr.String(), 128+int(syscall.SIGINT), `interrupted by SIGINT while waiting for leadership of election "signals"`)
	if exists(filepath.Join(other, "ran")) {
		t.Error("a candidate's command ran while another led")
	}

	lead.signal(t, syscall.SIGTERM)
	wantCode(t, lead.wait(t), lead.stderr.String(), 7)
	if !exists(filepath.Join(leader, "term")) {
		t.Error("the leader's command did not get SIGTERM")
	}
	s.assertReleased(t, "signals")
}

// TestElectObserve: redlock elect -observe NAME prints the election's leader as it is
// (an empty line: none), then each new leader's value as candidates lead in turn, and an
// empty line once none leads; SIGINT ends it with status 0.
func TestElectObserve(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)
	obs := startTool(t, nil, "", append([]string{"elect", "-observe", "observed"}, s.flags...)...)
	lines := func() []string { return strings.SplitAfter(obs.stdout.String(), "\n") }
	obs.await(t, "the first line: no leader", func() bool { return obs.stdout.String() != "" })
	if got := obs.stdout.String(); got != "\n" {
		t.Fatalf("first output %q, want an empty line (no leader)", got)
	}
	first, second := t.TempDir(), t.TempDir()
	a := startTool(t, nil, "", s.electArgs("observed", holdScript, first, "-value", "first")...)
	a.awaitFile(t, filepath.Join(first, "started"))
	obs.await(t, "the first leader", func() bool { return slices.Contains(lines(), "first\n") })
	b := startTool(t, nil, "", s.electArgs("observed", holdScript, second, "-value", "second")...)
	b.await(t, "second candidate queued in Redis", func() bool { return s.hasKey(t, keys("observed").Queue) })
	touch(t, filepath.Join(first, "release"))
	wantCode(t, a.wait(t), a.stderr.String(), 0)
	obs.await(t, "the second leader", func() bool { return slices.Contains(lines(), "second\n") })
	touch(t, filepath.Join(second, "release"))
	wantCode(t, b.wait(t), b.stderr.String(), 0)
	obs.await(t, "no leader after the second", func() bool { return strings.HasSuffix(obs.stdout.String(), "second\n\n") })
	obs.signal(t, syscall.SIGINT)
	wantCode(t, obs.wait(t), obs.stderr.String(), 0)
	var leaders []string
	for _, line := range lines() {
		if line != "\n" && line != "" {
			leaders = append(leaders, line)
		}
	}
	if !slices.Equal(leaders, []string{"first\n", "second\n"}) {
		t.Errorf("leaders printed %q, want first then second; output:\n%s", leaders, obs.stdout.String())
	}
}

// TestElectProclaim: each line the elected command writes on $REDLOCK_PROCLAIM_FD becomes
// the leader's value, with the same token: status shows it and -observe prints it; a
// REDLOCK_PROCLAIM_FD that redlock inherited does not reach a command that is not elected.
func TestElectProclaim(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)
	obs := startTool(t, nil, "", append([]string{"elect", "-observe", "proclaimed"}, s.flags...)...)
	obs.await(t, "the first line: no leader", func() bool { return obs.stdout.String() != "" })
	dir := t.TempDir()
	script := `echo "$REDLOCK_TOKEN" > "$1/token"; : > "$1/started"
i=0; while [ ! -e "$1/proclaim" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
echo second >&"$REDLOCK_PROCLAIM_FD"
i=0; while [ ! -e "$1/release" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done`
	a := startTool(t, nil, "", s.electArgs("proclaimed", script, dir, "-value", "first")...)
	a.awaitFile(t, filepath.Join(dir, "started"))
	obs.await(t, "the leader's first value", func() bool { return strings.Contains(obs.stdout.String(), "first\n") })
	touch(t, filepath.Join(dir, "proclaim"))
	obs.await(t, "the proclaimed value", func() bool { return strings.Contains(obs.stdout.String(), "second\n") })
	rep := statusOf(t, s.addrs, "proclaimed", 0)
	if rep.Leader == nil || rep.Leader.Value != "second" || rep.Holder == nil || rep.Holder.Token != readToken(t, filepath.Join(dir, "token")) {
		t.Fatalf("leader %+v, holder %+v; want the value proclaimed, with the leader's token", rep.Leader, rep.Holder)
	}
	touch(t, filepath.Join(dir, "release"))
	wantCode(t, a.wait(t), a.stderr.String(), 0)
	obs.signal(t, syscall.SIGINT)
	wantCode(t, obs.wait(t), obs.stderr.String(), 0)
	if !strings.Contains(obs.stdout.String(), "first\nsecond\n") {
		t.Errorf("-observe printed %q, want first then second", obs.stdout.String())
	}

	ran := t.TempDir()
	b := startTool(t, []string{proclaimEnv + "=9"}, "", append(append([]string{"run", "inherited"}, s.flags...),
		sh(`echo "${REDLOCK_PROCLAIM_FD-unset}" > "$1/fd"`, ran)...)...)
	wantCode(t, b.wait(t), b.stderr.String(), 0)
	fd, err := os.ReadFile(filepath.Join(ran, "fd"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(fd)); got != "unset" {
		t.Errorf("run's command got REDLOCK_PROCLAIM_FD=%s", got)
	}
}
