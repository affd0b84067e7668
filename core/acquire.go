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
// Errors: ErrHeld (another owner holds a quorum), a *QuorumError (too few nodes answered
// yes), ErrExpired (the quorum came after the validity ran out), or ctx's error wrapped.
func (c *Cluster) Acquire(ctx context.Context, l *Lock) (*Held, error) {
	h := &Held{claim: claim{Lock: *l, token: NewToken()}}
	g, _, err := c.acquire(ctx, &h.claim)
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

// acquire is Acquire that also says, on failure, what the next attempt should know.
func (c *Cluster) acquire(ctx context.Context, l *claim) (Grant, outcome, error) {
	if err := ctxError(ctx, "acquire", l.Keys.named()); err != nil {
		return Grant{}, outcome{}, err
	}
	if c.closed.Load() {
		return Grant{}, outcome{}, opError("acquire", l.Keys.named(), ErrClosed)
	}
	if l.Read && l.Fence {
		return Grant{}, outcome{}, opError("acquire", l.Keys.named(), fmt.Errorf("%w: a reader takes no fencing token", ErrInvalid))
	}
	start := time.Now()
	plain := l.plain()
	req := request{s: l.scripts().acquire, vote: true, setNX: plain, key: l.Keys.Lock, value: l.token, ttl: l.TTL.Truncate(time.Millisecond),
		op: "acquire", failed: l.NodeFailed}
	unknown := c.id.unknown.Load() > 0
	if !plain || !c.setters || unknown { // some node runs the script: its KEYS and ARGV
		fence := "0"
		if l.Fence {
			fence = "1"
			if len(c.nodes) > 1 {
				// A floor for every node's counter, ahead of the servers' clocks: the nodes
				// whose counters are below it all take it, and agree, sparing the raise (see
				// raise).
				fence = strconv.FormatInt(time.Now().Add(fenceLead).UnixMicro(), 10)
			}
		}
		guard := strconv.FormatInt(int64((l.Guard+time.Second-1)/time.Second), 10)
		req.keys = l.Keys.acquireKeys()
		req.args = []string{l.token, millis(l.TTL), guard, fence, l.waiter, strconv.FormatInt(l.ticket, 10), millis(l.placeKept())}
	}
	// A node whose last call failed in transit is not waited for: an attempt that cannot
	// win without it gives up at once and lets go of the keys it got, which would otherwise
	// block every competitor until that node's timeout. Taken before the calls, which
	// update it; a single node's call has answered when fan returns, and its answer
	// counts (it used to be replaced by errSuspect, hiding why the node failed). When the
	// other nodes are too few for a quorum, every node is waited for: giving up at once
	// could only fail, and the suspects may have come back (the attempt used to fail at
	// once, and a waiter's next one came a backoff or a refresh interval later, while the
	// lock stood free).
	//
	// Nor is a suspect called while an earlier call to it is still under way (see
	// request.spare): that call finds out whether it is back. Under a partition, a waiter
	// whose attempts failed every few milliseconds sent each one into the silence, and each
	// call's timeout and the release after it cost a connection and a goroutine, on the
	// machine that also had to run the lock's hand-overs.
	suspects := c.suspects()
	spared := len(c.nodes) > 1 && len(c.nodes)-bits.OnesCount64(suspects) >= c.quorum
	if spared {
		req.spare = suspects
	}
	f := c.fan(ctx, l.NodeTimeout, req, 0)
	t := tally{c: c, op: "acquire", key: l.Keys.named()}
	if spared {
		t.suspects = suspects
	}
	// The largest fence counter granted and how many granted it, and the longest a refusing
	// node can keep us waiting.
	var top, wait int64
	var atTop int
	// Per node: it granted, or failed after the request may have landed.
	mayHold := make([]bool, len(c.nodes))
	answered := make([]bool, len(c.nodes))
	var refused []bool // made at the first refusal: an uncontended waiter needs none
	var took time.Duration
	heard := false // some node answered: took is set
	seen := func(r reply) {
		if r.err == nil {
			took, heard = time.Since(start), true
		}
		switch {
		case r.err != nil:
			mayHold[r.node] = r.err != errNotCalled
		case r.vals[0] == 1:
			mayHold[r.node] = true
			if len(r.vals) > 1 {
				switch v := r.vals[1]; {
				case v > top:
					top, atTop = v, 1
				case v == top:
					atTop++
				}
			}
		case len(r.vals) > 1: // refused (0) or abstaining (-1): either way, how long
			wait = max(wait, r.vals[1])
			if l.waiter != "" && r.vals[0] == 0 {
				if refused == nil {
					refused = make([]bool, len(c.nodes))
				}
				refused[r.node] = true
			}
		}
	}
	c.collect(ctx, f, &t, answered, seen)
	// A waiter that lost with fewer than a quorum of refusals hears the other nodes out too
	// (within the node timeout), until a quorum refused: a release can hand it the lock on
	// each node that refused it, and it takes a hand-over only from a quorum of nodes whose
	// refusal it saw. With a quorum of refusals it need not wait: the rest's refusals reach
	// it later (see outcome.late), and whatever else they did is undone after they answer
	// (see abandon). (It used to hear every node out, which under uneven latency held each
	// hand-over back until the slowest live node answered.)
	if refused != nil && !t.won() && t.no < c.quorum && t.waiting() && ctx.Err() == nil {
		t.all, t.refusals = true, true
		c.collect(ctx, f, &t, answered, seen)
	}
	// Until every node is identified, two of them may reach one server: a win counts only
	// once every node that is not suspected has answered, within the node timeout, and
	// said which server it reaches (see identity). A node that hangs holds up one
	// acquisition: it is suspected from then on.
	if unknown && t.won() && t.waiting() && ctx.Err() == nil {
		t.all = true
		c.collect(ctx, f, &t, answered, seen)
	}
	if !t.won() {
		t.unheard()
	}
	until := start.Add(l.TTL - l.Drift())

	var err error
	switch {
	case ctx.Err() != nil:
		err = ctxError(ctx, "acquire", l.Keys.named())
	case c.misconfigured() != nil:
		err = opError("acquire", l.Keys.named(), c.misconfigured())
	case !t.won() && t.refused():
		err = &heldError{key: l.Keys.named(), wait: time.Duration(wait) * time.Millisecond}
	case !t.won():
		err = t.err()
	case !time.Now().Before(until):
		err = opError("acquire", l.Keys.named(), ErrExpired)
	case l.Fence && len(c.nodes) > 1 && atTop < c.quorum:
		err = c.raise(ctx, l, top, until)
	}
	if err == nil {
		l.acquiring, l.pending, l.late = f, len(c.nodes)-t.answers, 0
		if len(c.nodes) <= 64 {
			for i, ok := range answered {
				if !ok {
					l.late |= 1 << i
				}
			}
		}
		return Grant{Start: start, Until: until, Fence: uint64(top), Attempts: max(l.attempt, 1)}, outcome{}, nil
	}
	late := c.abandon(ctx, l, f, answered, mayHold)
	// A split vote is one that no owner won: some nodes granted us the lock, and the
	// refusals alone did not decide it (then another owner holds it, and we wait for it).
	split := t.yes > 0 && !errors.Is(err, ErrHeld)
	if !heard {
		took = time.Since(start)
	}
	o := outcome{wait: time.Duration(wait) * time.Millisecond, split: split, handers: t.no + len(c.nodes) - t.answers, took: took, start: start, refused: refused, plain: plain, late: late}
	return Grant{}, o, err
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
// so that any later quorum meets a counter >= fence and hands out a larger token. An
// acquisition skips it where a quorum of the nodes that granted it replied with the same,
// largest counter: those already hold a counter >= fence. Its acquire script asks every
// node for at least the same floor, so that they usually do; a release that hands the lock
// to a waiter advances the counter to the floor of the waiter's attempt, so that a
// hand-over usually skips it too.
func (c *Cluster) raise(ctx context.Context, l *claim, fence int64, until time.Time) error {
	f := c.call(ctx, &l.Lock, "raise", l.NodeTimeout, raiseScript, []string{l.Keys.Lock, l.Keys.Fence}, l.token, strconv.FormatInt(fence, 10))
	t := tally{c: c, op: "raise", key: l.Keys.named()}
	c.collect(ctx, f, &t, make([]bool, len(c.nodes)), nil)
	switch {
	case ctx.Err() != nil:
		return ctxError(ctx, "acquire", l.Keys.named())
	case !t.won():
		return t.err()
	case !time.Now().Before(until):
		return opError("acquire", l.Keys.named(), ErrExpired)
	}
	return nil
}

// abandon releases a failed attempt: at once on the nodes that answered and may hold the
// lock (the caller waits for these, so that its next attempt does not meet its own keys),
// and in the background on each node still in flight, after it answers, so that a late
// SET is undone too. For a waiter (l.trail set) it records each node still in flight in
// the trail until that node answered and its release, if any, answered too, so that the
// waiter's leave reaches the node after them (see leave); and it returns a channel that
// names each of those nodes that answers with a refusal (a waiter's attempt that such a
// node can hand the lock to later), or nil if none is in flight.
func (c *Cluster) abandon(ctx context.Context, l *claim, f *fanout, answered, mayHold []bool) <-chan int {
	// A waiter whose ctx ended gives up: its releases take it out of the queue, on every node
	// still in flight too, once it answers, so that no late call of its queues it again.
	// Otherwise the waiter keeps its place, and is not woken by its own release.
	quitting := ctx.Err() != nil
	mode := "stay"
	if quitting {
		mode = "leave"
	}
	ctx = context.WithoutCancel(ctx)
	// A copy: the caller's next attempt puts a new token in l while stragglers are released.
	keys, timeout := l.Keys.releaseKeys(), l.NodeTimeout
	args := releaseArgs(l.token, l.Keys.Channel, l.waiter, mode, strconv.FormatInt(l.ticket, 10), millis(l.placeKept()))
	req := request{s: l.scripts().release, keys: keys, args: args, op: "release", failed: l.NodeFailed}
	release := func(i int) { c.callNode(ctx, i, timeout, req) }
	// A straggler that answers once the waiter has returned without the lock, or with a
	// later attempt's, is followed by a leave, whatever it answered: nothing else would take
	// the waiter out of that node's queue after it. (A leave under this attempt's token
	// cannot let go of a later attempt's lock: see ours in queue.lua. This attempt's own
	// lock, handed over to it, is Release's to let go of.)
	var leave request
	if l.waiter != "" && !quitting {
		leave = req
		leave.args = releaseArgs(l.token, l.Keys.Channel, l.waiter, "leave")
	}
	attempt := int64(l.attempt)
	pending := 0
	done := make(chan struct{}, len(c.nodes))
	var busy []chan struct{} // per node in flight, for a waiter: closed once it is dealt with
	for i := range c.nodes {
		switch {
		case !answered[i]:
			pending++
			if l.waiter != "" {
				if busy == nil {
					busy = make([]chan struct{}, len(c.nodes))
				}
				busy[i] = l.trail.add(i, len(c.nodes))
			}
		case mayHold[i]:
			go func() { release(i); done <- struct{}{} }()
		default:
			done <- struct{}{}
		}
	}
	var late chan int
	if pending > 0 {
		waiter, tr := l.waiter, &l.trail
		if waiter != "" {
			late = make(chan int, pending)
		}
		go func() {
			for range pending {
				r := <-f.out
				if answered[r.node] {
					continue // cannot be: collect read those
				}
				switch {
				case leave.s != nil && tr.gone.Load() && tr.won.Load() != attempt:
					c.callNode(ctx, r.node, timeout, leave)
				case r.err == errNotCalled:
				case r.err != nil || r.yes():
					release(r.node)
				case late != nil && len(r.vals) > 1 && r.vals[0] == 0:
					late <- r.node
				}
				if busy != nil && busy[r.node] != nil {
					close(busy[r.node])
				}
			}
		}()
	}
	for range len(c.nodes) - pending {
		<-done
	}
	return late
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
		select {
		case <-b:
		default:
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
			select {
			case <-b:
			default:
				return true
			}
		}
	}
	return false
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
