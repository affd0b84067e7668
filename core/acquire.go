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
	// Fence is the fencing token: for N = 1 the node's counter; for N > 1 (with Lock.Fence)
	// the largest counter of the quorum, which a quorum held before the grant was returned
	// (they agreed on it, or it was raised on them).
	// Without Lock.Fence at N > 1 it is the largest counter seen, with no monotonic promise.
	Fence uint64
	// Attempts is how many attempts AcquireWait made: 1 if its first took the lock (a lock
	// handed over counts for the attempt it was handed to). Acquire sets 1.
	Attempts int
}

// Acquire makes one attempt to take the lock l asks for on a quorum of nodes, under a new
// random token (NewToken), and returns it held. It returns as soon as the outcome is
// decided, without waiting for slow nodes. On failure it releases the lock on every node
// that may hold it; nodes still in flight are released when they answer, in the
// background, so the caller waits for no straggler.
//
// For a semaphore (Keys.Permits), an attempt that failed although a permit was free on a
// quorum of the nodes (they granted different ones) is followed at once by one more, which
// asks for that permit.
//
// Errors: ErrHeld (another owner holds a quorum), a *QuorumError (too few nodes answered
// yes), ErrExpired (the quorum came after the validity ran out), or ctx's error wrapped.
func (c *Cluster) Acquire(ctx context.Context, l *Lock) (*Held, error) {
	h := &Held{claim: claim{Lock: *l, token: NewToken()}}
	g, o, err := c.acquire(ctx, &h.claim)
	if err != nil && o.split && l.Keys.Permits != nil && ctx.Err() == nil {
		// A permit was free on a quorum, but the nodes granted different ones: ask for it.
		h.token = NewToken()
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
	split bool          // some nodes granted it to us: competitors split the votes
	// handers is how many nodes may hand this attempt the lock: those that refused it
	// (another owner's release there, or the leave of a waiter ahead, hands it over), and
	// those that had not answered when it returned (their refusals count later: see late).
	// Not those that granted it (and were let go) or failed.
	handers int
	plain   bool // it was a plain SET NX (see Setter), which queues no one
	// took is how long the attempt took to hear the last node that answered it: a node that
	// failed (a timeout, say) does not count, so that it does not stretch the pause after a
	// split vote, nor the wait for the rest of a hand-over, which both follow the nodes'
	// round trips. The attempt's own time if no node answered.
	took  time.Duration
	start time.Time // when the attempt began
	// refused marks the nodes that answered a waiter's attempt with a refusal ({0, ...}):
	// only those can hand this attempt the lock later. nil for a single attempt, and when
	// no node refused.
	refused []bool
	// late says which more nodes refused the attempt after it returned (the attempt does
	// not wait for the rest once a quorum refused): they can hand it the lock too. nil if
	// every node had answered.
	late <-chan int
}

// acquire is Acquire that also says, on failure, what the next attempt should know. An
// attempt is a vote (every node asked, heard until the outcome is decided), the Redlock
// rule applied to it (decide), and then either the grant or the attempt undone.
func (c *Cluster) acquire(ctx context.Context, l *claim) (Grant, outcome, error) {
	if err := c.admit(ctx, l); err != nil {
		return Grant{}, outcome{}, err
	}
	var b ballot
	c.vote(ctx, l, &b)
	g, err := c.decide(ctx, l, &b)
	if err != nil {
		return Grant{}, c.lose(ctx, l, &b, err), err
	}
	l.acquiring, l.pending, l.late = b.f, len(c.nodes)-b.t.answers, b.unanswered()
	if b.permit == nil { // a semaphore's: see holdPermit
		l.holds = b.t.yesNodes
	}
	return g, outcome{}, nil
}

// decide is the Redlock rule. The attempt holds the lock if a quorum of the nodes granted
// it and time is left of its validity: the TTL less the time since the attempt began and
// the drift allowance. A fenced lock at N > 1 takes the largest counter of the granting
// nodes as its token, which must stand on a quorum before the grant is returned: it does
// where a quorum granted that same counter, and raise puts it there otherwise. A lost vote
// is ErrHeld if enough nodes refused that no quorum can grant, and a *QuorumError if not.
func (c *Cluster) decide(ctx context.Context, l *claim, b *ballot) (Grant, error) {
	switch {
	case ctx.Err() != nil:
		return Grant{}, ctxError(ctx, "acquire", l.Keys.named())
	case c.misconfigured() != nil:
		return Grant{}, opError("acquire", l.Keys.named(), c.misconfigured())
	case b.dissenter > 0:
		return Grant{}, opError("acquire", l.Keys.named(), fmt.Errorf("%w: the semaphore has %d permits on node %s, not %d: every holder must count the same",
			ErrInvalid, b.dissent, c.nodes[b.dissenter-1], len(l.Keys.Permits)))
	case !b.t.won() && b.t.refused():
		return Grant{}, &heldError{key: l.Keys.named(), wait: time.Duration(b.wait) * time.Millisecond}
	case !b.t.won():
		return Grant{}, b.t.err()
	}
	if b.permit != nil {
		c.holdPermit(l, b.permit, slices.Index(b.t.grants, b.t.most), flagged(b.answered, true))
	}
	return c.grant(ctx, l, b.start, b.fence, 0)
}

// grant is the rest of the rule once a quorum granted the attempt that began at start (or
// handed it the lock): its validity, start + TTL - drift, must not have run out, and more
// than need of it must be left; and a fenced lock at N > 1 needs its token, fence.max, on a
// quorum (see raise).
func (c *Cluster) grant(ctx context.Context, l *claim, start time.Time, fence highest, need time.Duration) (Grant, error) {
	until := start.Add(l.TTL - l.Drift())
	if left := time.Until(until); left <= 0 || left < need {
		return Grant{}, opError("acquire", l.Keys.named(), ErrExpired)
	}
	if l.Fence && len(c.nodes) > 1 && fence.n < c.quorum {
		if err := c.raise(ctx, l, fence.max, until); err != nil {
			return Grant{}, err
		}
	}
	return Grant{Start: start, Until: until, Fence: uint64(fence.max), Attempts: max(l.attempt, 1)}, nil
}

// highest is the largest fence counter the nodes gave, and how many gave it.
type highest struct {
	max int64
	n   int
}

// see counts a node's counter f.
func (h *highest) see(f int64) {
	switch {
	case f > h.max:
		h.max, h.n = f, 1
	case f == h.max:
		h.n++
	}
}

// admit returns the error of an attempt that must not be made: ctx ended, the Cluster is
// closed, or a reader asks for a fence or several names.
func (c *Cluster) admit(ctx context.Context, l *claim) error {
	switch {
	case ctx.Err() != nil:
		return ctxError(ctx, "acquire", l.Keys.named())
	case c.closed.Load():
		return opError("acquire", l.Keys.named(), ErrClosed)
	case l.Read && l.Fence:
		return opError("acquire", l.Keys.named(), fmt.Errorf("%w: a reader takes no fencing token", ErrInvalid))
	case l.Read && l.Keys.Set != nil:
		return opError("acquire", l.Keys.named(), fmt.Errorf("%w: a lock over several names has no readers", ErrInvalid))
	}
	return nil
}

// ballot is what an attempt heard from the nodes.
type ballot struct {
	f        *fanout
	t        tally
	start    time.Time // when the attempt began
	plain    bool      // a plain SET NX (see Setter)
	waiter   bool      // the attempt is a waiter's (AcquireWait)
	fence    highest   // the fence counters granted
	wait     int64     // the longest a refusing node said the holder can keep the lock, in ms
	mayHold  []bool    // per node: it granted, or failed after the request may have landed
	failed   []bool    // per node: it failed
	answered []bool    // per node: its reply was read
	refused  []bool    // per node: it refused a waiter's attempt; nil until one did
	permit   []int     // per node: the semaphore's permit it granted (-1: none); nil for a lock
	free     []int     // per permit: the nodes that said it was free to us (see permitsFree)
	// dissent is the number of permits that node dissenter-1 records for the semaphore, if
	// not the number asked for (dissenter 0: none).
	dissent   int64
	dissenter int
	took      time.Duration
	heard     bool // some node answered: took is the time to hear the last one that did
}

// see records the reply r.
func (b *ballot) see(r reply) {
	if r.err == nil {
		b.took, b.heard = time.Since(b.start), true
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
			permitsFree(r.vals, b.free)
		}
	case r.vals[0] == -2:
		b.dissent, b.dissenter = r.vals[1], r.node+1
	case len(r.vals) > 1: // refused (0) or abstaining (-1): either way, how long
		b.wait = max(b.wait, r.vals[1])
		if b.free != nil {
			permitsFree(r.vals, b.free)
		}
		if b.waiter && r.vals[0] == 0 {
			if b.refused == nil {
				b.refused = make([]bool, len(b.answered))
			}
			b.refused[r.node] = true
		}
	}
}

// unanswered returns the nodes whose reply was not read, a bit each (N <= 64; 0 above).
func (b *ballot) unanswered() uint64 {
	if len(b.answered) > 64 {
		return 0
	}
	return flagged(b.answered, false)
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
// decided.
// A node whose last call failed in transit (a suspect) is not waited for when the others
// can make a quorum: an attempt that cannot win without it gives up at once and lets go of
// what it got, which would otherwise block every competitor until that node's timeout. Nor
// is a suspect called while an earlier call to it is still under way (request.spare): that
// call finds out whether it is back. A single node is always heard.
func (c *Cluster) vote(ctx context.Context, l *claim, b *ballot) {
	n := len(c.nodes)
	flags := make([]bool, 3*n) // one allocation for the three
	*b = ballot{start: time.Now(), plain: l.plain(), waiter: l.waiter != "",
		mayHold: flags[:n:n], failed: flags[n : 2*n : 2*n], answered: flags[2*n:]}
	unknown := c.id.unknown.Load() > 0
	req := c.acquireRequest(l, b.plain, unknown)
	suspects := c.suspects()
	spared := n > 1 && n-bits.OnesCount64(suspects) >= c.quorum
	if spared {
		req.spare = suspects
	}
	b.f = c.fan(ctx, l.NodeTimeout, req, 0)
	b.t = tally{c: c, op: "acquire", key: l.Keys.named()}
	if k := len(l.Keys.Permits); k > 0 { // a semaphore's: every node heard, so that no grant goes unseen
		b.t.grants, b.free, b.permit, b.t.all = make([]int, k), make([]int, k), slices.Repeat([]int{-1}, n), true
	}
	if spared {
		b.t.suspects = suspects
	}
	c.collect(ctx, b.f, &b.t, b.answered, b.see)
	c.hearOut(ctx, l, b, unknown)
	if !b.t.won() {
		b.t.unheard()
	}
}

// hearOut reads more replies where the outcome needs them, each within the node timeout.
// A waiter that lost with fewer than a quorum of refusals hears the others until a quorum
// refused: a release hands it the lock only on nodes whose refusal it saw, and it needs a
// quorum of hand-overs (refusals that come later reach it through outcome.late). And until
// every node is identified, two nodes may reach one server: a win counts only once every
// node that is not suspected has answered and said which server it reaches (see identity).
func (c *Cluster) hearOut(ctx context.Context, l *claim, b *ballot, unknown bool) {
	if ctx.Err() != nil || !b.t.waiting() {
		return
	}
	if b.refused != nil && !b.t.won() && b.t.no < c.quorum {
		b.t.all, b.t.refusals = true, true
		c.collect(ctx, b.f, &b.t, b.answered, b.see)
	}
	if unknown && b.t.won() && b.t.waiting() && ctx.Err() == nil {
		b.t.all = true
		c.collect(ctx, b.f, &b.t, b.answered, b.see)
	}
}

// acquireRequest is the attempt's request: the acquire script with its KEYS and ARGV, or a
// plain SET NX only where the attempt is plain and every node is a known Setter.
func (c *Cluster) acquireRequest(l *claim, plain, unknown bool) request {
	req := request{s: l.scripts().acquire, vote: true, setNX: plain, key: l.Keys.Lock, value: l.token, ttl: l.TTL.Truncate(time.Millisecond),
		op: "acquire", failed: l.NodeFailed}
	if plain && c.setters && !unknown {
		return req
	}
	fence := "0"
	if l.Fence {
		fence = "1"
		if len(c.nodes) > 1 {
			// A floor for every node's counter, ahead of the servers' clocks: the nodes
			// whose counters are below it all take it, and agree, sparing the raise.
			fence = strconv.FormatInt(time.Now().Add(fenceLead).UnixMicro(), 10)
		}
	}
	guard := strconv.FormatInt(int64((l.Guard+time.Second-1)/time.Second), 10)
	req.keys = l.Keys.acquireKeys()
	req.args = []string{l.token, millis(l.TTL), guard, fence, l.waiter, strconv.FormatInt(l.ticket, 10), millis(l.placeKept())}
	if k := len(l.Keys.Permits); k > 0 {
		req.args = append(req.args, "0", strconv.Itoa(k), strconv.Itoa(l.hint-1))
		req.permits = k
	}
	return req
}

// lose undoes the failed attempt b (see abandon) and returns what the next attempt should
// know. A split vote is one that no owner won: some nodes granted the attempt, and the
// refusals alone did not decide it (then another owner holds the lock, and we wait for it);
// for a semaphore, one in which a permit was free on a quorum of the nodes.
func (c *Cluster) lose(ctx context.Context, l *claim, b *ballot, err error) outcome {
	late := c.abandon(ctx, l, b)
	split := b.t.yes > 0 && !errors.Is(err, ErrHeld)
	if b.free != nil { // a semaphore's: a split if a permit was free on a quorum; ask for it next
		most := slices.Max(b.free)
		l.hint, split = slices.Index(b.free, most)+1, most >= c.quorum
	}
	took := b.took
	if !b.heard {
		took = time.Since(b.start)
	}
	return outcome{
		wait: time.Duration(b.wait) * time.Millisecond, split: split,
		handers: b.t.no + len(c.nodes) - b.t.answers, took: took, start: b.start, refused: b.refused, plain: b.plain, late: late,
	}
}

// noteGuard records a node that granted an acquisition without the restart guard it was
// asked for, because it cannot report its uptime.
func (c *Cluster) noteGuard(r reply) {
	if r.err == nil && len(r.vals) > 2 && r.vals[0] == 1 && r.vals[2] == 1 {
		c.markUnguarded(r.node)
	}
}

// fenceLead is how far ahead of the client's clock a fenced acquisition at N > 1 puts the
// floor of the nodes' counters (see acquire.lua): far enough ahead of the servers' clocks
// (which the counters otherwise follow) that the nodes take the floor, and agree on it.
const fenceLead = time.Second

// FenceIdle is how long a lock's fence counter outlives the last acquisition (or raise)
// that wrote it: then it expires, so that names used once leave no key behind. Tokens
// still increase across its expiry. A counter written at a server's time t (in
// microseconds) is at most t + 2 s plus the skew between the servers' clocks: it follows
// the clock, a fenced acquisition's floor counts for at most 2 s past the clock, and a
// raise copies another node's counter. A counter that expired starts again from its
// server's clock, by then at least FenceIdle past the last write. So tokens keep
// increasing as long as no server's clock runs more than FenceIdle - 2 s behind another's
// or steps back that far: the clock assumption behind the fence's expiry.
const FenceIdle = time.Hour

// raise sets the fence counter to at least fence on a quorum of the nodes where l is held,
// so that any later quorum meets a counter >= fence and hands out a larger token: it is an
// extension that carries the fence (extend.lua), so it also takes l where it is free. An
// acquisition skips it where a quorum of the nodes that granted it replied with the same,
// largest counter: those already hold a counter >= fence. Its acquire script asks every
// node for at least the same floor, so that they usually do; a release that hands the lock
// to a waiter advances the counter to the floor of the waiter's attempt, so that a
// hand-over usually skips it too.
func (c *Cluster) raise(ctx context.Context, l *claim, fence int64, until time.Time) error {
	f := c.fan(ctx, l.NodeTimeout, request{s: extendScript, keys: l.Keys.extendKeys(false),
		args: []string{l.token, millis(l.TTL), strconv.FormatInt(fence, 10)}, op: "raise", failed: l.NodeFailed}, 0)
	t := tally{c: c, op: "raise", key: l.Keys.named(), retake: until}
	answered := make([]bool, len(c.nodes))
	c.collect(ctx, f, &t, answered, nil)
	l.follow(f, ^uint64(0), answered)
	var err error
	switch {
	case ctx.Err() != nil:
		err = ctxError(ctx, "acquire", l.Keys.named())
	case !t.won():
		err = t.err()
	case !time.Now().Before(until):
		err = opError("acquire", l.Keys.named(), ErrExpired)
	}
	if err != nil { // the acquisition is undone: the raise's calls land first
		l.unfollow(f)
	}
	return err
}

// abandon releases a failed attempt: at once on the nodes that answered and may hold the
// lock (the caller waits for these, so that its next attempt does not meet its own keys:
// for those that granted it, which answer at once, and for those that failed, which may
// not answer before the node timeout, until ctx ends),
// and in the background on each node still in flight, after it answers, so that a late
// SET is undone too. For a waiter (l.trail set) it records each node still in flight in
// the trail until that node answered and its release, if any, answered too, so that the
// waiter's leave reaches the node after them (see leave); and it returns a channel that
// names each of those nodes that answers with a refusal (a waiter's attempt that such a
// node can hand the lock to later), or nil if none is in flight.
func (c *Cluster) abandon(ctx context.Context, l *claim, b *ballot) <-chan int {
	u := c.undoer(ctx, l)
	n := len(c.nodes)
	pending, granted, failed := 0, 0, 0
	// Releases done on the nodes that granted the attempt, and on those that failed.
	doneGranted, doneFailed := make(chan struct{}, n), make(chan struct{}, n)
	var busy []chan struct{} // per node in flight, for a waiter: closed once it is dealt with
	for i := range c.nodes {
		switch {
		case !b.answered[i]:
			pending++
			if l.waiter != "" {
				if busy == nil {
					busy = make([]chan struct{}, n)
				}
				busy[i] = l.trail.add(i, n)
			}
		case b.mayHold[i] && b.failed[i]:
			failed++
			c.bg.goRun(3*u.timeout, func() { u.release(i); doneFailed <- struct{}{} })
		case b.mayHold[i]:
			granted++
			go func() { u.release(i); doneGranted <- struct{}{} }() // waited for below: not counted
		}
	}
	var late chan int
	if pending > 0 {
		if l.waiter != "" {
			late = make(chan int, pending)
		}
		f, answered := b.f, b.answered // not b, which would then escape on every attempt
		c.bg.goRun(3*u.timeout, func() { u.stragglers(f, answered, pending, busy, late) })
	}
	for range granted {
		<-doneGranted
	}
	for range failed {
		select {
		case <-doneFailed:
		case <-ctx.Done(): // the caller gives up: no next attempt of its can meet those keys
			return late
		}
	}
	return late
}

// undo undoes a failed attempt on one node at a time.
type undo struct {
	c       *Cluster
	ctx     context.Context
	timeout time.Duration
	rel     request // the release
	// leave is the leave that follows a straggler once the waiter has returned without
	// the lock, or with a later attempt's: nothing else would take the waiter out of that
	// node's queue after it. (A leave under this attempt's token cannot let go of a later
	// attempt's lock: see ours in queue.lua. This attempt's own lock, handed over to it, is
	// Release's to let go of.) Unset (leave.s nil) for a single attempt or a quitter.
	leave   request
	trail   *trail
	attempt int64
}

// undoer returns the undo of l's attempt under way. A waiter whose ctx ended gives up: its
// releases take it out of the queue, on every node still in flight too, once it answers,
// so that no late call of its queues it again. Otherwise the waiter keeps its place, and
// is not woken by its own release.
func (c *Cluster) undoer(ctx context.Context, l *claim) *undo {
	mode := "stay"
	if ctx.Err() != nil {
		mode = "leave"
	}
	// Copies: the caller's next attempt puts a new token in l while stragglers are released.
	args := l.releaseArgs(mode)
	u := &undo{c: c, ctx: context.WithoutCancel(ctx), timeout: l.NodeTimeout, trail: &l.trail, attempt: int64(l.attempt),
		rel: request{s: l.scripts().release, keys: l.Keys.releaseKeys(), args: args, op: "release", failed: l.NodeFailed}}
	if l.waiter != "" && mode == "stay" {
		u.leave = u.rel
		u.leave.args = l.releaseArgs("leave")
	}
	return u
}

// release releases the attempt on node i.
func (u *undo) release(i int) { u.c.callNode(u.ctx, i, u.timeout, u.rel) }

// stragglers reads the pending replies of f that were not read (answered), and undoes what
// each did; a refusal of a waiter's attempt goes to late (if not nil), and each node's
// channel in busy (if any) is closed once it is dealt with.
func (u *undo) stragglers(f *fanout, answered []bool, pending int, busy []chan struct{}, late chan<- int) {
	for range pending {
		r := <-f.out
		if answered[r.node] {
			continue // cannot be: collect read those
		}
		switch {
		case u.leave.s != nil && u.trail.gone.Load() && u.trail.won.Load() != u.attempt:
			u.c.callNode(u.ctx, r.node, u.timeout, u.leave)
		case r.err == errNotCalled:
		case r.err != nil || r.yes():
			u.release(r.node)
		case late != nil && len(r.vals) > 1 && r.vals[0] == 0:
			late <- r.node
		}
		if busy != nil && busy[r.node] != nil {
			close(busy[r.node])
		}
	}
}

// trail is what a waiter (AcquireWait) has under way on the nodes in the background: per
// node, the calls of its failed attempts that had not answered when the attempt returned,
// each until it answered and the release that undoes it (if any) answered too.
type trail struct {
	mu   sync.Mutex
	busy [][]chan struct{} // per node: each closed once that call is dealt with
	gone atomic.Bool       // AcquireWait returned
	won  atomic.Int64      // the attempt that got the lock, once AcquireWait returned it
}

// add records a call to node i (of n) under way, and returns the channel to close once it
// is dealt with. It forgets the calls to i already dealt with.
func (t *trail) add(i, n int) chan struct{} {
	ch := make(chan struct{})
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.busy == nil { // made at the first call under way: an uncontended waiter needs none
		t.busy = make([][]chan struct{}, n)
	}
	open := t.busy[i][:0]
	for _, b := range t.busy[i] {
		if !closed(b) {
			open = append(open, b)
		}
	}
	t.busy[i] = append(open, ch)
	return ch
}

// underWay reports whether some call recorded is not dealt with yet.
func (t *trail) underWay() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, calls := range t.busy {
		for _, b := range calls {
			if !closed(b) {
				return true
			}
		}
	}
	return false
}

// closed reports whether ch is closed (or has a value ready).
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// wait returns once every call to node i recorded so far is dealt with, or at the latest
// when timeout is closed.
func (t *trail) wait(i int, timeout <-chan struct{}) {
	t.mu.Lock()
	var busy []chan struct{}
	if t.busy != nil {
		busy = slices.Clone(t.busy[i])
	}
	t.mu.Unlock()
	for _, b := range busy {
		select {
		case <-b:
		case <-timeout:
			return
		}
	}
}

// holdPermit makes l the holder of permit w, which a quorum granted it (or handed it over),
// permits being the permit each node gave it (-1: none); the nodes that gave w are l.holds.
// On every other node in others (a bit each) it sends release "leave", in the background,
// for what it may hold there: another permit, and a waiter's place in the queue, so that no
// later release hands it a permit there that would sit unused until its Release.
func (c *Cluster) holdPermit(l *claim, permits []int, w int, others uint64) {
	l.Keys = l.Keys.permit(w)
	l.holds = 0
	for i, p := range permits {
		if p == w {
			l.holds |= bit(i)
		}
	}
	timeout := l.NodeTimeout
	for i, p := range permits {
		if l.holds&bit(i) != 0 || others&bit(i) == 0 || (p < 0 && l.waiter == "") {
			continue
		}
		pk := l.Keys.permit(max(p, 0))
		req := request{s: releaseScript, keys: pk.releaseKeys(), args: l.releaseArgs("leave"), op: "release", failed: l.NodeFailed}
		c.bg.goRun(3*timeout, func() { c.callNode(context.Background(), i, timeout, req) })
	}
}

// releaseArgs returns the release script's ARGV for l in mode "leave", or "stay" to keep
// the waiter's place, with a semaphore's number of permits.
func (l *claim) releaseArgs(mode string) []string {
	var more [3]string // ticket and place's lifetime for "stay"; a semaphore's K
	n := 0
	if mode == "stay" {
		more[0], more[1], n = strconv.FormatInt(l.ticket, 10), millis(l.placeKept()), 2
	}
	if k := len(l.Keys.Permits); k > 0 {
		more[2], n = strconv.Itoa(k), 3
	}
	return releaseArgs(l.token, l.Keys.Channel, l.waiter, mode, more[:n]...)
}
