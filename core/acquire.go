package core

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Grant is a lock that a quorum granted.
type Grant struct {
	Start time.Time // when the attempt began (monotonic)
	Until time.Time // Start + TTL - drift: the end of the lock's validity
	// Fence is the fencing token: for N = 1 the node's counter; for N > 1 with Lock.Fence,
	// the largest counter of the quorum, which stood on a quorum before the grant was
	// returned. Without Lock.Fence at N > 1 it is the largest counter seen, with no
	// monotonic promise.
	Fence uint64
	// Attempts is how many attempts AcquireWait made (a hand-over counts for the attempt it
	// was handed to); Acquire sets 1.
	Attempts int
}

// Acquire makes one attempt to take the lock l asks for on a quorum of nodes, under a new
// token (NewToken), and returns it held. It returns once the outcome is decided, without
// waiting for slow nodes; an attempt that node failures (or suspected nodes, not waited
// for) put out of reach hears the other nodes while their refusals could still put a
// quorum out of reach alone, so that a lock held there reads as ErrHeld. On failure it releases the lock on every node that may hold it,
// a straggler once it answers, in the background. For a semaphore, an attempt that failed
// although a permit was free on a quorum is followed at once by one that asks for it.
//
// Errors: ErrHeld (another owner holds a quorum), a *QuorumError (too few nodes answered
// yes), ErrExpired (the quorum came after the validity ran out), or ctx's error wrapped;
// one that matches ErrInvalid for a bad Lock.Description, before any call.
func (c *Cluster) Acquire(ctx context.Context, l *Lock) (*Held, error) {
	if err := l.checkDescription(); err != nil {
		return nil, err
	}
	h := &Held{claim: claim{Lock: *l, token: newToken(l.Description)}}
	g, o, err := c.acquire(ctx, &h.claim)
	if err != nil && o.split && l.Keys.Permits != nil && ctx.Err() == nil {
		h.token = newToken(l.Description)
		g, _, err = c.acquire(ctx, &h.claim)
	}
	if err != nil {
		return nil, err
	}
	h.Grant = g
	return h, nil
}

// outcome is what a failed attempt tells the next one.
type outcome struct {
	wait  time.Duration // the longest a refusing node said the holder can keep the lock
	split bool          // no owner won: see lose
	took  time.Duration // the time to hear the last node that answered (not failed)
	start time.Time
	no    int // how many nodes refused it
}

// acquire is Acquire for the claim l, also saying on failure what the next attempt should
// know: the checks of an attempt that must not be made, a vote, decide, then the grant or
// the attempt undone.
func (c *Cluster) acquire(ctx context.Context, l *claim) (Grant, outcome, error) {
	switch {
	case ctx.Err() != nil:
		return Grant{}, outcome{}, ctxError(ctx, "acquire", l.Keys.named())
	case c.closed.Load():
		return Grant{}, outcome{}, opError("acquire", l.Keys.named(), ErrClosed)
	case l.Read && l.Fence:
		return Grant{}, outcome{}, opError("acquire", l.Keys.named(), fmt.Errorf("%w: a reader takes no fencing token", ErrInvalid))
	}
	var b ballot
	c.vote(ctx, l, &b)
	g, err := c.decide(ctx, l, &b)
	if err != nil {
		return Grant{}, c.lose(ctx, l, &b, err), err
	}
	l.acquiring, l.pending, l.late = b.f, len(c.nodes)-b.t.answers, 0
	if len(c.nodes) <= 64 {
		l.late = flagged(b.answered, false)
	}
	return g, outcome{}, nil
}

// decide is the Redlock rule: the attempt holds the lock if a quorum granted it and time is
// left of its validity (see grant). A lost vote is ErrHeld if the refusals alone put a
// quorum out of reach, and a *QuorumError if not.
func (c *Cluster) decide(ctx context.Context, l *claim, b *ballot) (Grant, error) {
	switch {
	case ctx.Err() != nil:
		return Grant{}, ctxError(ctx, "acquire", l.Keys.named())
	case c.misconfigured() != nil:
		return Grant{}, opError("acquire", l.Keys.named(), c.misconfigured())
	case b.dissent != nil:
		return Grant{}, opError("acquire", l.Keys.named(), b.dissent)
	case !b.t.won() && b.t.refused():
		return Grant{}, &heldError{key: l.Keys.named(), wait: time.Duration(b.wait) * time.Millisecond}
	case !b.t.won():
		return Grant{}, b.t.err()
	}
	w := -1
	if b.permit != nil {
		w = slices.Index(b.t.grants, b.t.most)
		c.holdPermit(l, b.permit, w)
	} else {
		l.holds = b.t.yesNodes
	}
	g, err := c.grant(ctx, l, b.start, b.fence, 0)
	if err == nil && w >= 0 {
		c.leaveOthers(l, b.permit, w, b.answered)
	}
	return g, err
}

// grant is the rest of the rule once a quorum granted (or handed over) the attempt that
// began at start: more than need must be left of its validity, start + TTL - drift; and a
// fenced lock at N > 1 takes fence.max as its token, which must stand on a quorum: it does
// where a quorum gave it, and raise puts it there otherwise.
func (c *Cluster) grant(ctx context.Context, l *claim, start time.Time, fence highest, need time.Duration) (Grant, error) {
	until := start.Add(l.TTL - l.Drift())
	if left := time.Until(until); left <= 0 || left < need {
		return Grant{}, opError("acquire", l.Keys.named(), ErrExpired)
	}
	if c.mustRaise(l, fence) {
		if err := c.raise(ctx, l, fence.max, until); err != nil {
			return Grant{}, err
		}
	}
	return Grant{Start: start, Until: until, Fence: uint64(fence.max), Attempts: max(l.attempt, 1)}, nil
}

// mustRaise reports whether grant raises the fence: a fenced lock at N > 1 whose token,
// fence.max, fewer than a quorum gave.
func (c *Cluster) mustRaise(l *claim, fence highest) bool {
	return l.Fence && len(c.nodes) > 1 && fence.n < c.quorum
}

// highest is the largest fence counter the nodes gave, and how many gave it.
type highest struct {
	max int64
	n   int
}

func (h *highest) see(f int64) {
	switch {
	case f > h.max:
		h.max, h.n = f, 1
	case f == h.max:
		h.n++
	}
}

// ballot is what an attempt heard from the nodes.
type ballot struct {
	f        *fanout
	t        tally
	start    time.Time
	waiter   bool          // a waiter's attempt (AcquireWait)
	fence    highest       // the fence counters granted
	answered []bool        // per node: its reply was read
	wait     int64         // the longest a refusing node said the holder can keep the lock, in ms
	mayHold  []bool        // per node: it granted, or failed after the request may have landed
	failed   []bool        // per node: it failed
	permit   []int         // per node: the semaphore's permit it granted (-1: none); nil for a lock
	free     []int         // per permit: the nodes that said it was free to us
	dissent  error         // a node's semaphore records another number of permits than asked for
	took     time.Duration // the time to hear the last node that answered, if heard
	heard    bool
}

func (b *ballot) see(r reply) {
	if r.err == nil {
		b.took, b.heard = time.Since(b.start), true
		permitsFree(r.vals, b.free)
	}
	switch {
	case r.err != nil:
		b.mayHold[r.node], b.failed[r.node] = r.err != errNotCalled, true
	case r.vals[0] == 1:
		b.mayHold[r.node] = true
		if len(r.vals) > 1 {
			b.fence.see(r.vals[1])
		}
		if b.permit != nil {
			b.permit[r.node] = permitOf(r.vals)
		}
	case r.vals[0] == -2:
		b.dissent = fmt.Errorf("%w: the semaphore has %d permits on node %s, not %d: every holder must count the same (another count takes over once no permit of it is held and no one waits)",
			ErrInvalid, r.vals[1], b.f.c.nodes[r.node], len(b.free))
	case len(r.vals) > 1: // refused (0) or abstained (-1)
		b.wait = max(b.wait, r.vals[1])
	}
}

// flagged returns the nodes i (of the first 64) whose flags[i] is v, a bit each.
func flagged(flags []bool, v bool) uint64 {
	var set uint64
	for i, f := range flags {
		if f == v {
			set |= bit(i)
		}
	}
	return set
}

// vote sends l's attempt to every node and reads the replies into b until the outcome is
// decided. Where the others can make a quorum, suspects are not waited for, nor called while
// an earlier call to them is under way. A semaphore's attempt hears every node, so that no
// grant goes unseen.
func (c *Cluster) vote(ctx context.Context, l *claim, b *ballot) {
	n := len(c.nodes)
	flags := make([]bool, 3*n) // one allocation for the three
	*b = ballot{start: time.Now(), waiter: l.waiter != "", mayHold: flags[:n:n], failed: flags[n : 2*n : 2*n], answered: flags[2*n:]}
	unknown := c.id.unknown.Load() > 0
	req := c.acquireRequest(l)
	if req.spare = c.suspects(); n-bits.OnesCount64(req.spare) < c.quorum {
		req.spare = 0 // the suspects are needed for a quorum
	}
	b.f = c.fan(ctx, l.NodeTimeout, req, 0)
	b.t = tally{c: c, op: "acquire", key: l.Keys.named(), suspects: req.spare}
	if k := len(l.Keys.Permits); k > 0 {
		b.t.grants, b.free, b.permit, b.t.all = make([]int, k), make([]int, k), slices.Repeat([]int{-1}, n), true
	}
	c.collect(ctx, b.f, &b.t, b.answered, b.see)
	c.hearOut(ctx, b, unknown)
	if !b.t.won() {
		b.t.unheard()
	}
}

// hearOut reads more of b's replies where the outcome is decided but more must be heard:
// refusals that may hand a waiter the lock or say that the lock is held, and, while some
// node is unidentified (unknown), every vote before a win counts.
func (c *Cluster) hearOut(ctx context.Context, b *ballot, unknown bool) {
	// An attempt that failures or suspects put out of reach hears the nodes not suspected
	// while their refusals could still do so alone: a lock held where the nodes answer
	// reads as held (ErrHeld), not as a *QuorumError.
	if !b.t.won() && b.t.couldRefuse() && ctx.Err() == nil {
		b.t.all = true
		c.collect(ctx, b.f, &b.t, b.answered, func(r reply) { b.see(r); b.t.done = !b.t.couldRefuse() })
	}
	// While some node is unidentified, a win waits for every node that is not suspected.
	if unknown && b.t.won() && b.t.waiting() && ctx.Err() == nil {
		b.t.all = true
		c.collect(ctx, b.f, &b.t, b.answered, b.see)
	}
}

// acquireRequest is the attempt's request: the acquire script.
func (c *Cluster) acquireRequest(l *claim) request {
	req := request{s: acquireScript, vote: true, op: "acquire", failed: l.NodeFailed}
	fence := "0"
	if l.Fence {
		fence = "1"
		if len(c.nodes) > 1 { // a floor the nodes all take, sparing the raise
			fence = strconv.FormatInt(time.Now().Add(fenceLead).UnixMicro(), 10)
		}
	}
	guard := strconv.FormatInt(int64((l.Guard+time.Second-1)/time.Second), 10)
	req.keys = l.Keys.callKeys(false)
	hint := "-1"
	if req.permits = len(l.Keys.Permits); req.permits > 0 {
		hint = strconv.Itoa(l.hint - 1)
	}
	// The three numbers of every attempt share one allocation.
	var buf [64]byte
	nums := strconv.AppendInt(buf[:0], l.TTL.Milliseconds(), 10)
	i := len(nums)
	nums = strconv.AppendInt(nums, l.ticket, 10)
	j := len(nums)
	s := string(strconv.AppendInt(nums, l.placeKept().Milliseconds(), 10))
	req.args = []string{l.token, s[:i], guard, fence, l.waiter, s[i:j], s[j:], "0", l.mode(), hint}
	return req
}

// lose undoes the failed attempt b and returns what the next attempt should know. A vote is
// split if some nodes granted it and it did not fail with ErrHeld; a semaphore's, if a
// permit was free on a quorum (the next attempt asks for it).
func (c *Cluster) lose(ctx context.Context, l *claim, b *ballot, err error) outcome {
	c.abandon(ctx, l, b)
	split := b.t.yes > 0 && !errors.Is(err, ErrHeld)
	if b.free != nil {
		most := slices.Max(b.free)
		l.hint, split = slices.Index(b.free, most)+1, most >= c.quorum
	}
	took := b.took
	if !b.heard {
		took = time.Since(b.start)
	}
	return outcome{
		wait: time.Duration(b.wait) * time.Millisecond, split: split,
		took: took, start: b.start, no: b.t.no,
	}
}

// fenceLead is how far ahead of the client's clock a fenced acquisition at N > 1 puts the
// floor of the nodes' counters, so that they take it and agree.
const fenceLead = time.Second

// FenceIdle is how long a lock's fence counter outlives the last acquisition (or raise)
// that wrote it. Tokens keep increasing across its expiry while no server's clock runs
// more than FenceIdle - 2 s behind another's, nor steps back that far.
const FenceIdle = time.Hour

// abandon releases a failed attempt on the nodes that answered and may hold it, waiting for
// those releases (for the failed nodes' only until ctx ends), and in the background on each
// node still in flight once it answers. For a waiter it counts those in l.trail.
func (c *Cluster) abandon(ctx context.Context, l *claim, b *ballot) {
	u := c.undoer(ctx, l)
	n := len(c.nodes)
	pending, failed, doneFailed := 0, 0, make(chan struct{}, n)
	var granted sync.WaitGroup // waited for below, so not counted in c.bg
	for i := range c.nodes {
		switch {
		case !b.answered[i]:
			pending++
			if u.trail != nil {
				u.trail.add(i, n)
			}
		case b.mayHold[i] && b.failed[i]:
			failed++
			c.bg.goRun(3*u.timeout, func() { u.release(i); doneFailed <- struct{}{} })
		case b.mayHold[i]:
			granted.Go(func() { u.release(i) })
		}
	}
	if pending > 0 {
		f := b.f // not b, which would then escape on every attempt
		c.bg.goRun(3*u.timeout, func() { u.stragglers(f, pending) })
	}
	granted.Wait()
	for range failed {
		select {
		case <-doneFailed:
		case <-ctx.Done(): // no next attempt can meet those keys
			return
		}
	}
}

// undo undoes a failed attempt on one node at a time.
type undo struct {
	c       *Cluster
	ctx     context.Context
	timeout time.Duration
	rel     request
	// leave follows a straggler once the waiter returned without this attempt's lock: nothing
	// else would take it out of that node's queue. Unset (leave.s nil) for a single attempt
	// or a quitter.
	leave   request
	trail   *trail // the waiter's; nil for a single attempt
	attempt int64
}

// undoer returns the undo of l's attempt under way: release "leave" if ctx ended (the waiter
// gives up), else "stay", which keeps a waiter's place.
func (c *Cluster) undoer(ctx context.Context, l *claim) *undo {
	mode := "stay"
	if ctx.Err() != nil {
		mode = "leave"
	}
	u := &undo{c: c, ctx: context.WithoutCancel(ctx), timeout: l.NodeTimeout, attempt: int64(l.attempt),
		rel: l.releaseRequest(mode)} // a copy: the next attempt puts a new token in l
	if l.waiter != "" {
		u.trail = &l.trail
		if mode == "stay" {
			u.leave = l.releaseRequest("leave")
		}
	}
	return u
}

func (u *undo) release(i int) { u.c.callNode(u.ctx, i, u.timeout, u.rel) }

// stragglers reads f's pending replies and undoes what each did, and each node counts as
// dealt with in the trail (if any) once it is.
func (u *undo) stragglers(f *fanout, pending int) {
	for range pending {
		r := <-f.out
		switch {
		case u.leave.s != nil && u.trail.gone.Load() && u.trail.won.Load() != u.attempt:
			u.c.callNode(u.ctx, r.node, u.timeout, u.leave)
		case r.err == errNotCalled:
		case r.err != nil || r.yes():
			u.release(r.node)
		}
		if u.trail != nil {
			u.trail.done(r.node)
		}
	}
}

// trail is what a waiter has under way on the nodes in the background: per node, the calls
// of its failed attempts that had not answered, each until it and its undoing answered.
type trail struct {
	mu   sync.Mutex
	busy []int           // per node: the calls not dealt with yet
	idle []chan struct{} // per node: closed when its busy falls to 0; nil while it is 0
	gone atomic.Bool     // AcquireWait returned
	won  atomic.Int64    // the attempt that got the lock, once AcquireWait returned it
}

// add counts a call to node i (of n) under way.
func (t *trail) add(i, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.busy == nil {
		t.busy, t.idle = make([]int, n), make([]chan struct{}, n)
	}
	if t.busy[i]++; t.idle[i] == nil {
		t.idle[i] = make(chan struct{})
	}
}

// done counts a call to node i as dealt with.
func (t *trail) done(i int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.busy[i]--; t.busy[i] == 0 {
		close(t.idle[i])
		t.idle[i] = nil
	}
}

// underWay reports whether some call counted is not dealt with yet.
func (t *trail) underWay() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.ContainsFunc(t.busy, func(n int) bool { return n > 0 })
}

// wait returns once every call to node i counted is dealt with, or timeout closed.
func (t *trail) wait(i int, timeout <-chan struct{}) {
	t.mu.Lock()
	var idle chan struct{}
	if t.idle != nil {
		idle = t.idle[i]
	}
	t.mu.Unlock()
	if idle != nil {
		select {
		case <-idle:
		case <-timeout:
		}
	}
}

// holdPermit makes l the holder of permit w, which a quorum granted or handed over, permits
// being each node's permit (-1: none), on the nodes that gave it.
func (c *Cluster) holdPermit(l *claim, permits []int, w int) {
	l.Keys, l.holds = l.Keys.permit(w), 0
	for i, p := range permits {
		if p == w {
			l.holds |= bit(i)
		}
	}
}

// leaveOthers, once l's grant of permit w is final (a grant that then fails keeps the
// waiter's places for its next attempt), sends release "leave" in the background to every
// other node that answered (each node, if answered is nil), for another permit and a
// waiter's place there.
func (c *Cluster) leaveOthers(l *claim, permits []int, w int, answered []bool) {
	timeout := l.NodeTimeout
	for i, p := range permits {
		switch {
		case p == w:
		case (answered == nil || answered[i]) && (p >= 0 || l.waiter != ""):
			pk, req := l.Keys.permit(max(p, 0)), l.releaseRequest("leave")
			req.s, req.keys = releaseScript, pk.callKeys(true)
			c.bg.goRun(3*timeout, func() { c.callNode(context.Background(), i, timeout, req) })
		}
	}
}

// releaseRequest is l's release, in mode "leave" or "stay".
func (l *claim) releaseRequest(mode string) request {
	ticket, kept := "", "" // for "stay" only
	if mode == "stay" {
		ticket, kept = strconv.FormatInt(l.ticket, 10), millis(l.placeKept())
	}
	args := []string{l.token, l.mode(), "PUBLISH", l.waiter, mode, ticket, kept}
	return request{s: releaseScript, keys: l.Keys.callKeys(true), args: args, op: "release", failed: l.NodeFailed}
}
