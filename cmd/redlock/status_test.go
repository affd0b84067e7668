package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
)

// statusOf runs `redlock status -json` for name over addrs and returns its report, after
// checking that it exited with want and that its JSON has every documented field.
func statusOf(t *testing.T, addrs, name string, want int) *statusReport {
	t.Helper()
	code, stdout, stderr := runTool(t, nil, "status", "-json", "-addrs", addrs, name)
	wantCode(t, code, stderr, want)
	var raw map[string]any
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
		t.Fatalf("status -json: %v:\n%s", err, stdout)
	}
	for _, field := range []string{"schema", "name", "key", "quorum", "answered", "found", "holder", "readers", "leader", "semaphore", "nodes"} {
		if _, ok := raw[field]; !ok {
			t.Errorf("status -json lacks the field %q:\n%s", field, stdout)
		}
	}
	for _, n := range raw["nodes"].([]any) {
		for _, field := range []string{"addr", "lock", "fence", "queue", "readers", "leader", "semaphore"} {
			if _, ok := n.(map[string]any)[field]; !ok {
				t.Errorf("a node of status -json lacks the field %q:\n%s", field, stdout)
			}
		}
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Schema != 1 || rep.Name != name || rep.Key != keys(name).Lock {
		t.Errorf("schema %d, name %q, key %q; want 1, %q, %q", rep.Schema, rep.Name, rep.Key, name, keys(name).Lock)
	}
	return &rep
}

// awaitStatus polls `redlock status -json` until cond holds of its report, and fails the
// test if that takes longer than stateTimeout; what describes cond.
func awaitStatus(t *testing.T, addrs, name, what string, cond func(*statusReport) bool) *statusReport {
	t.Helper()
	deadline := time.Now().Add(stateTimeout)
	for {
		rep := statusOf(t, addrs, name, 0)
		if cond(rep) {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v; last status: %+v", what, stateTimeout, rep)
		}
		time.Sleep(pollEvery)
	}
}

// libClient returns a library Client over the setup's servers, closed at the test's end,
// for the primitives that redlock has no command for (an RWMutex's readers, a Semaphore).
func libClient(t *testing.T, s *lockSetup) *redlock.Client {
	t.Helper()
	addrs, err := parseAddrs(s.addrs)
	if err != nil {
		t.Fatal(err)
	}
	ns := newNodes(addrs)
	c, err := redlock.New(ns.nodes, redlock.WithRestartGuard(0), redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		ns.close()
	})
	return c
}

// everyNode reports whether cond holds on every node of rep, all of which answered.
func everyNode(rep *statusReport, cond func(n nodeStatus) bool) bool {
	return rep.Answered == len(rep.Nodes) && !slices.ContainsFunc(rep.Nodes, func(n nodeStatus) bool { return !cond(n) })
}

// TestStatus: `redlock status` shows, on each of three nodes and in its summary, a free
// name, a held lock (its token and time left), a waiter in its queue, an RWMutex's
// readers, a Semaphore's number of permits, permits in use, fence counter and waiter (and
// more permits than the 64 of old), and an Election's leader, in JSON and as text.
func TestStatus(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 3)
	var semToken uint64 // the "semaphore" case's last holder's token
	for _, tc := range []struct {
		name string
		// setup makes the state of name, and returns what the text must show.
		setup func(t *testing.T, name string) []string
		check func(t *testing.T, rep *statusReport)
	}{
		{"free", func(t *testing.T, name string) []string { return []string{"lock: free", "NODE", "LOCK"} },
			func(t *testing.T, rep *statusReport) {
				if rep.Holder != nil || rep.Leader != nil || rep.Semaphore != nil || rep.Readers != 0 || len(rep.Found) != 0 {
					t.Errorf("a free name shows a holder, leader, semaphore, readers or kinds: %+v", rep)
				}
				if !everyNode(rep, func(n nodeStatus) bool { return n.Lock == nil && *n.Fence == 0 && len(n.Queue) == 0 }) {
					t.Errorf("a free name's nodes show something: %+v", rep.Nodes)
				}
			}},
		{"held", func(t *testing.T, name string) []string {
			token := hold(t, s, "run", "-name", name, "-ttl", "20s")
			awaitStatus(t, s.addrs, name, "the holder on every node", func(rep *statusReport) bool { // a quorum granted it
				return everyNode(rep, func(n nodeStatus) bool { return n.Lock != nil })
			})
			return []string{"held by", strconv.FormatUint(token, 10), "described as " + defaultHost + ":"}
		}, func(t *testing.T, rep *statusReport) {
			h := rep.Holder
			if h == nil || h.Nodes != 3 || h.TTLms <= 0 || h.TTLms > 20000 || !slices.Contains(rep.Found, "lock") {
				t.Fatalf("holder %+v, found %v; want one on 3 nodes with up to 20s left", h, rep.Found)
			}
			// Without -description, redlock describes itself as HOST:PID.
			if !hostPID.MatchString(h.Description) || !strings.HasPrefix(h.Owner, h.Description+"@") {
				t.Errorf("holder %+v: want the description %s:PID, which its owner token starts", h, defaultHost)
			}
			if !everyNode(rep, func(n nodeStatus) bool {
				return n.Lock != nil && n.Lock.Owner == h.Owner && n.Lock.Description == h.Description && *n.Fence <= h.Token
			}) {
				t.Errorf("the nodes do not all show the holder %+v: %+v", h, rep.Nodes)
			}
			// The holder's token stands on a quorum: there a node's counter is the token.
			standing := 0
			for _, n := range rep.Nodes {
				if n.Fence != nil && *n.Fence == h.Token {
					standing++
				}
			}
			if standing < 2 {
				t.Errorf("the holder's token %d is the counter of %d nodes, want a quorum (2): %+v", h.Token, standing, rep.Nodes)
			}
		}},
		{"queue", func(t *testing.T, name string) []string {
			hold(t, s, "run", "-name", name, "-description", "")
			startTool(t, nil, "", "run", "-addrs", s.addrs, "-restart-guard", "0", "-node-timeout", testNodeTimeout, "-name", name, "-wait", "0",
				"-description", "waiter/2", "--", "true")
			awaitStatus(t, s.addrs, name, "waiter", func(rep *statusReport) bool {
				return everyNode(rep, func(n nodeStatus) bool { return len(n.Queue) == 1 })
			})
			return []string{"(writer, ", "  waiter/2@"}
		}, func(t *testing.T, rep *statusReport) {
			if h := rep.Holder; h == nil || h.Description != "" || strings.Contains(h.Owner, "@") {
				t.Errorf("holder %+v: want one without a description (-description \"\")", h)
			}
			for _, n := range rep.Nodes {
				if len(n.Queue) != 1 || n.Queue[0].Reader || n.Queue[0].TTLms <= 0 || strings.HasPrefix(rep.Holder.Owner, n.Queue[0].ID) {
					t.Errorf("node %s: queue %+v; want one writer, not the holder %s", n.Addr, n.Queue, rep.Holder.Owner)
				}
				if len(n.Queue) == 1 && (n.Queue[0].Description != "waiter/2" || !strings.HasPrefix(n.Queue[0].ID, "waiter/2@")) {
					t.Errorf("node %s: waiter %+v; want the description waiter/2, which its id starts", n.Addr, n.Queue[0])
				}
			}
		}},
		{"readers", func(t *testing.T, name string) []string {
			rw := libClient(t, s).NewRWMutex(name)
			rw.RLock()
			rw.RLock()
			t.Cleanup(func() { rw.RUnlock(); rw.RUnlock() })
			awaitStatus(t, s.addrs, name, "2 readers on every node", func(rep *statusReport) bool { // a quorum granted each
				return everyNode(rep, func(n nodeStatus) bool { return len(n.Readers) == 2 })
			})
			return []string{"lock: held by 2 readers", "READER"}
		}, func(t *testing.T, rep *statusReport) {
			if rep.Readers != 2 || rep.Holder != nil || !slices.Contains(rep.Found, "rwmutex") {
				t.Errorf("readers %d, holder %+v, found %v; want 2 readers and no holder", rep.Readers, rep.Holder, rep.Found)
			}
			if !everyNode(rep, func(n nodeStatus) bool {
				return n.Lock != nil && n.Lock.Readers && len(n.Readers) == 2 && n.Readers[0].TTLms > 0
			}) {
				t.Errorf("the nodes do not all show 2 readers: %+v", rep.Nodes)
			}
		}},
		{"semaphore", func(t *testing.T, name string) []string {
			sem := libClient(t, s).NewSemaphore(name, 3, redlock.WithTTL(permitTTL))
			// Acquire returns once a quorum of the nodes granted a permit, and a node
			// that granted another one lets it go: each permit is awaited on every node,
			// so that each node grants the next one as the others do.
			for i := range 3 {
				semToken = max(semToken, holdPermits(t, sem, 1)[0].Token())
				awaitStatus(t, s.addrs, name, fmt.Sprintf("%d permits held on every node", i+1), func(rep *statusReport) bool {
					return everyNode(rep, func(n nodeStatus) bool { return n.Semaphore != nil && n.Semaphore.InUse == i+1 })
				})
			}
			// A Client's own Semaphores wait in its local queue while it holds every
			// permit: the waiter is another Client's, which waits in Redis.
			waitPermit(t, libClient(t, s).NewSemaphore(name, 3, redlock.WithTTL(permitTTL)))
			awaitStatus(t, s.addrs, name, "Semaphore waiter", func(rep *statusReport) bool {
				return everyNode(rep, func(n nodeStatus) bool {
					return n.Semaphore != nil && n.Semaphore.InUse == 3 && len(n.Semaphore.Queue) == 1
				})
			})
			return []string{"semaphore: 3 permits in use of 3", "PERMIT", "FENCE", "(writer, ", strconv.FormatUint(semToken, 10)}
		}, func(t *testing.T, rep *statusReport) {
			if sem := rep.Semaphore; sem == nil || sem.Permits != 3 || sem.InUse != 3 || !slices.Equal(rep.Found, []string{"semaphore"}) {
				t.Errorf("semaphore %+v, found %v; want 3 permits in use of 3, and only a semaphore found", rep.Semaphore, rep.Found)
			}
			standing := 0 // the nodes whose one counter is the last holder's token
			for _, n := range rep.Nodes {
				sem := n.Semaphore
				if sem == nil {
					t.Errorf("node %s shows no semaphore", n.Addr)
					continue
				}
				if n.Lock != nil || *n.Fence != 0 || len(n.Queue) != 0 {
					t.Errorf("node %s: lock %+v, fence %d, queue %+v; want the lock's keys untouched by the semaphore", n.Addr, n.Lock, *n.Fence, n.Queue)
				}
				if sem.Fence == semToken {
					standing++
				}
				permits := []int{}
				for _, h := range sem.Held {
					permits = append(permits, h.Permit)
					if h.Fence != sem.Fence || h.TTLms <= 0 || h.Owner == "" {
						t.Errorf("node %s: held %+v; want the semaphore's counter %d as its fence, an owner and time left", n.Addr, h, sem.Fence)
					}
				}
				slices.Sort(permits)
				if sem.Permits != 3 || sem.InUse != 3 || !slices.Equal(permits, []int{0, 1, 2}) || sem.Fence == 0 || sem.Fence > semToken {
					t.Errorf("node %s: semaphore %+v; want permits 0, 1 and 2 of 3 held, and a counter up to the last token %d", n.Addr, sem, semToken)
				}
				if len(sem.Queue) != 1 || sem.Queue[0].Reader || sem.Queue[0].TTLms <= 0 ||
					slices.ContainsFunc(sem.Held, func(h permitState) bool { return strings.HasPrefix(h.Owner, sem.Queue[0].ID) }) {
					t.Errorf("node %s: queue %+v; want one writer, none of the holders %+v", n.Addr, sem.Queue, sem.Held)
				}
			}
			if standing < 2 {
				t.Errorf("the last holder's token %d is the semaphore's counter of %d nodes, want a quorum (2): %+v", semToken, standing, rep.Nodes)
			}
		}},
		{"permits", func(t *testing.T, name string) []string {
			// More permits held than the 64 of old, of the most a Semaphore may have: each
			// node's record says how many permit keys to read.
			holdPermits(t, libClient(t, s).NewSemaphore(name, redlock.MaxPermits, redlock.WithTTL(permitTTL)), 65)
			return []string{fmt.Sprintf("semaphore: 65 permits in use of %d", redlock.MaxPermits)}
		}, func(t *testing.T, rep *statusReport) {
			if sem := rep.Semaphore; sem == nil || sem.Permits != redlock.MaxPermits || sem.InUse != 65 {
				t.Errorf("semaphore %+v; want 65 permits in use of %d", sem, redlock.MaxPermits)
			}
			// A quorum, not every node, granted each permit (a node that granted another
			// permit let it go): 65 held on a quorum are 65 permits read on two nodes.
			if !everyNode(rep, func(n nodeStatus) bool {
				sem := n.Semaphore
				return sem != nil && sem.Permits == redlock.MaxPermits && sem.InUse == len(sem.Held) && sem.InUse <= 65 && len(sem.Queue) == 0 &&
					!slices.ContainsFunc(sem.Held, func(h permitState) bool { return h.Permit < 0 || h.Permit >= redlock.MaxPermits })
			}) {
				t.Errorf("the nodes do not all show up to 65 permits held of %d: %+v", redlock.MaxPermits, rep.Nodes)
			}
		}},
		{"election", func(t *testing.T, name string) []string {
			token := hold(t, s, "elect", name, "-value", "leader one", "-description", "candidate/1")
			awaitStatus(t, s.addrs, name, "the leader on every node", func(rep *statusReport) bool { // a quorum recorded it
				return everyNode(rep, func(n nodeStatus) bool { return n.Leader != nil && n.Leader.Current })
			})
			return []string{`election leader: "leader one"`, strconv.FormatUint(token, 10), "described as candidate/1), on 3", "lock: held by candidate/1@"}
		}, func(t *testing.T, rep *statusReport) {
			l, h := rep.Leader, rep.Holder
			if l == nil || h == nil || l.Value != "leader one" || l.Token != h.Owner || l.Nodes != 3 || !slices.Contains(rep.Found, "election") {
				t.Fatalf("leader %+v, holder %+v, found %v; want the leader \"leader one\", holding the lock", l, h, rep.Found)
			}
			if l.Description != "candidate/1" || h.Description != "candidate/1" {
				t.Errorf("leader %+v, holder %+v: want the description candidate/1 (-description)", l, h)
			}
			if !everyNode(rep, func(n nodeStatus) bool { return n.Leader != nil && n.Leader.Current && n.Leader.TTLms > 0 }) {
				t.Errorf("the nodes do not all show the current leader: %+v", rep.Nodes)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "status-" + tc.name
			text := tc.setup(t, name)
			rep := statusOf(t, s.addrs, name, 0)
			if rep.Quorum != 2 || rep.Answered != 3 || len(rep.Nodes) != 3 {
				t.Errorf("quorum %d, answered %d, %d nodes; want 2, 3, 3", rep.Quorum, rep.Answered, len(rep.Nodes))
			}
			tc.check(t, rep)
			code, stdout, stderr := runTool(t, nil, "status", "-addrs", s.addrs, name)
			wantCode(t, code, stderr, 0)
			for _, want := range append(text, strconv.Quote(name), "quorum 2", s.servers[2].Addr()) {
				if !strings.Contains(stdout, want) {
					t.Errorf("the text lacks %q:\n%s", want, stdout)
				}
			}
		})
	}
}

// defaultHost is this machine's host name as redlock's default description has it, and
// hostPID matches that description, HOST:PID.
var (
	defaultHost = defaultDescription()[:strings.LastIndexByte(defaultDescription(), ':')]
	hostPID     = regexp.MustCompile(`^` + regexp.QuoteMeta(defaultHost) + `:[0-9]+$`)
)

// permitTTL is the TTL of the permits that the tests hold: longer than they take, however
// loaded the machine (the Leases do not extend themselves).
const permitTTL = 5 * time.Minute

// holdPermits acquires n permits of sem, released at the test's end, and returns their
// Leases.
func holdPermits(t *testing.T, sem *redlock.Semaphore, n int) []*redlock.Lease {
	t.Helper()
	var leases []*redlock.Lease
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
		l, err := sem.Acquire(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Release(context.Background()) })
		leases = append(leases, l)
	}
	return leases
}

// waitPermit starts to wait for a permit of sem, in the background, until the test's end
// (and releases the permit if it gets one).
func waitPermit(t *testing.T, sem *redlock.Semaphore) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if l, err := sem.Acquire(ctx); err == nil {
			_ = l.Release(context.Background())
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// hold starts redlock with args (run or elect, over s) and the command holdScript, waits
// until the command runs, and returns its token; at the test's end the command exits and
// redlock with it.
func hold(t *testing.T, s *lockSetup, args ...string) uint64 {
	t.Helper()
	dir := t.TempDir()
	args = append(append(args, "-addrs", s.addrs, "-restart-guard", "0", "-node-timeout", testNodeTimeout), sh(holdScript, dir)...)
	tl := startTool(t, nil, "", args...)
	tl.awaitFile(t, filepath.Join(dir, "started"))
	t.Cleanup(func() {
		touch(t, filepath.Join(dir, "release"))
		tl.wait(t)
	})
	return readToken(t, filepath.Join(dir, "token"))
}

// TestStatusUnreachable: a node that does not answer is shown as such, with why, and the
// others as they are (exit 0); when no node answers, redlock status exits 69.
func TestStatusUnreachable(t *testing.T) {
	t.Parallel() // see main_test.go

	const closed = "127.0.0.1:1" // see TestUnavailable
	s := newSetup(t, 2)
	hold(t, s, "run", "-name", "reach")
	rep := statusOf(t, s.addrs+","+closed, "reach", 0)
	if rep.Answered != 2 || rep.Holder == nil || rep.Holder.Nodes != 2 {
		t.Errorf("answered %d, holder %+v; want 2 answers and the holder on both", rep.Answered, rep.Holder)
	}
	down := rep.Nodes[2]
	if down.Addr != closed || !strings.Contains(down.Error, "connection refused") || down.Lock != nil || down.Fence != nil || down.Queue != nil {
		t.Errorf("the closed port's node: %+v; want its error and nothing else", down)
	}
	code, stdout, stderr := runTool(t, nil, "status", "-addrs", s.addrs+","+closed, "reach")
	wantCode(t, code, stderr, 0)
	if !regexp.MustCompile(regexp.QuoteMeta(closed) + ` +not answering: .*connection refused`).MatchString(stdout) {
		t.Errorf("the text does not show %s as not answering:\n%s", closed, stdout)
	}

	rep = statusOf(t, closed, "reach", exitUnavailable)
	if rep.Answered != 0 || rep.Nodes[0].Error == "" {
		t.Errorf("no node answered, yet: %+v", rep)
	}
	code, _, stderr = runTool(t, nil, "status", "-addrs", closed, "reach")
	wantCode(t, code, stderr, exitUnavailable, "no node answered")
}

// TestStatusNameAfterDashes: NAME may follow "--", which is how a name that begins with
// '-' (one that `redlock run -name -x` takes) is given; "--" before a plain NAME is no
// usage error either. No node answers here (exit 69), which still shows the name.
func TestStatusNameAfterDashes(t *testing.T) {
	t.Parallel() // see main_test.go

	const closed = "127.0.0.1:1" // see TestUnavailable
	for _, name := range []string{"-dash", "plain"} {
		code, stdout, stderr := runTool(t, nil, "status", "-json", "-addrs", closed, "--", name)
		wantCode(t, code, stderr, exitUnavailable, "no node answered")
		var rep statusReport
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.Name != name {
			t.Errorf("status -- %s: name %q (%v), want %q; stdout:\n%s", name, rep.Name, err, name, stdout)
		}
	}
	code, _, stderr := runTool(t, nil, "status", "-addrs", closed, "--", "x", "y")
	wantCode(t, code, stderr, exitUsage, `one name only: unexpected "y"`)
}

// TestStatusReaderSetWaiter: a reader of several names (NewRWMutexAll) that waits for a
// writer of one of them is shown, in that name's queue, as a reader waiting, and the name
// as an RWMutex's; its attempt is recorded with " r" followed by the set's lock keys.
func TestStatusReaderSetWaiter(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 3)
	hold(t, s, "run", "-name", "rset-a")
	rw := libClient(t, s).NewRWMutexAll([]string{"rset-a", "rset-b"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if rw.RLockContext(ctx) == nil {
			rw.RUnlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	rep := awaitStatus(t, s.addrs, "rset-a", "a waiter on every node", func(rep *statusReport) bool {
		return everyNode(rep, func(n nodeStatus) bool { return len(n.Queue) == 1 })
	})
	if !everyNode(rep, func(n nodeStatus) bool { return n.Queue[0].Reader }) || !slices.Contains(rep.Found, "rwmutex") {
		t.Errorf("found %v, nodes %+v; want the waiter shown as a reader, and an RWMutex found", rep.Found, rep.Nodes)
	}
	code, stdout, stderr := runTool(t, nil, "status", "-addrs", s.addrs, "rset-a")
	wantCode(t, code, stderr, 0)
	if !strings.Contains(stdout, "(reader, ") || strings.Contains(stdout, "(writer, ") {
		t.Errorf("the text does not show the waiter as a reader:\n%s", stdout)
	}
}

// TestStatusFewerThanQuorum: when fewer nodes than a quorum answer, the text's summary
// says that it cannot tell, rather than calling the lock free or the Semaphore's permits
// unused: the nodes that did not answer may make a quorum with the others.
func TestStatusFewerThanQuorum(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 3)
	holdPermits(t, libClient(t, s).NewSemaphore("few", 3, redlock.WithTTL(permitTTL)), 1)
	awaitStatus(t, s.addrs, "few", "a permit held on every node", func(rep *statusReport) bool {
		return everyNode(rep, func(n nodeStatus) bool { return n.Semaphore != nil && n.Semaphore.InUse == 1 })
	})
	s.servers[1].Kill()
	s.servers[2].Kill()
	code, stdout, stderr := runTool(t, nil, "status", "-addrs", s.addrs, "few")
	wantCode(t, code, stderr, 0)
	for _, bad := range []string{"lock: free", "0 permits in use"} {
		if strings.Contains(stdout, bad) {
			t.Errorf("with 1 of 3 nodes answering, the text says %q:\n%s", bad, stdout)
		}
	}
	for _, want := range []string{"1 of 3 nodes answered, quorum 2", "lock: unknown: fewer than a quorum answered", "semaphore: permits in use unknown: fewer than a quorum answered; 3 permits"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the text lacks %q:\n%s", want, stdout)
		}
	}
}

// TestStatusTextEscapes: the text shows a key, and a lock key's value, that hold a newline
// or a tab quoted, as it quotes the name, so that each stays on its line and in its column.
func TestStatusTextEscapes(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 1)
	name := "line\nbreak\tand tab"
	if _, err := s.servers[0].Do("SET", keys(name).Lock, "odd\nowner\t1", "PX", "60000"); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runTool(t, nil, "status", "-addrs", s.addrs, name)
	wantCode(t, code, stderr, 0)
	lines := strings.Split(stdout, "\n")
	want := fmt.Sprintf("%s (key %s): 1 of 1 nodes answered, quorum 1", strconv.Quote(name), strconv.Quote(keys(name).Lock))
	if lines[0] != want || !strings.HasPrefix(lines[1], `lock: held by "odd\nowner\t1", `) {
		t.Errorf("the text does not quote the key and the owner; want %q and the owner %q first:\n%s", want, "odd\nowner\t1", stdout)
	}
	if strings.Contains(stdout, "\t") || !strings.Contains(stdout, s.addrs+`  held by "odd\nowner\t1"`) {
		t.Errorf("the table does not quote the owner:\n%s", stdout)
	}
}

// TestStatusSameServerTwice: two addresses of one server (127.0.0.1 and localhost) are a
// usage error, as for redlock run, found from the run_id the server reports: counted as
// two nodes, a lock held on one server of three was shown as held by a quorum.
func TestStatusSameServerTwice(t *testing.T) {
	t.Parallel() // see main_test.go
	s := newSetup(t, 2)
	if _, err := s.servers[0].Do("SET", keys("twice").Lock, "one-server", "PX", "60000"); err != nil {
		t.Fatal(err)
	}
	other := "localhost:" + strconv.Itoa(s.servers[0].Port())
	for _, json := range []bool{false, true} {
		args := []string{"status", "-addrs", s.addrs + "," + other, "twice"}
		if json {
			args = append(args[:1], append([]string{"-json"}, args[1:]...)...)
		}
		code, stdout, stderr := runTool(t, nil, args...)
		wantCode(t, code, stderr, exitUsage, "-addrs: "+s.servers[0].Addr()+" and "+other+" reach the same server")
		if strings.Contains(stdout, "one-server") {
			t.Errorf("status shows a holder over two addresses of one server:\n%s", stdout)
		}
	}
}

// TestStatusNodeErrors: each node that could not be read is shown with why, the others as
// they are (exit 0): one that refused the connection with its last dial's error, one that
// connected but does not answer (a paused server) as not answering within -node-timeout.
func TestStatusNodeErrors(t *testing.T) {
	t.Parallel() // see main_test.go

	const closed = "127.0.0.1:1" // see TestUnavailable
	s := newSetup(t, 3)
	hold(t, s, "run", "-name", "errors")
	s.servers[2].Pause()
	t.Cleanup(s.servers[2].Resume)
	rep := statusOf(t, s.addrs+","+closed, "errors", 0)
	if rep.Answered != 2 || rep.Nodes[0].Lock == nil || rep.Nodes[1].Lock == nil {
		t.Errorf("answered %d, nodes %+v; want 2 answers, the lock held on both", rep.Answered, rep.Nodes)
	}
	if n := rep.Nodes[2]; n.Error != "no answer within -node-timeout 2s" || n.Lock != nil || n.Fence != nil {
		t.Errorf("the paused node: %+v; want no answer within -node-timeout 2s, and nothing else", n)
	}
	if n := rep.Nodes[3]; !regexp.MustCompile(`^connecting: dial tcp .*connection refused$`).MatchString(n.Error) || n.Lock != nil || n.Fence != nil {
		t.Errorf("the closed port's node: %+v; want its dial's error, and nothing else", n)
	}
}
