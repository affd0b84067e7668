package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AcquireWait takes the lock l asks for, retrying until it succeeds or ctx ends, and returns
// it held. It queues as one waiter with a token per attempt (see the package doc, Tokens and
// The waiter, across nodes). If l asks for neither the restart guard nor a fence and is not
// Contended, a reader's, a semaphore's or a set's, the first attempt is a plain SET NX on
// the nodes that are Setters.
//
// Errors: when ctx ends, one that matches both ctx's error and the last attempt's (ErrHeld
// or ErrNoQuorum, say) under errors.Is; an error that no retry can fix (see Permanent), at
// once, unless l.Persist; ErrClosed once the Cluster is closed.
func (c *Cluster) AcquireWait(ctx context.Context, l *Lock, b Backoff) (*Held, error) {
	h := &Held{claim: claim{Lock: *l}}
	var err error
	if h.Grant, err = c.acquireWait(ctx, &h.claim, b); err != nil {
		return nil, err
	}
	return h, nil
}

// acquireWait is AcquireWait for the claim l.
func (c *Cluster) acquireWait(ctx context.Context, l *claim, b Backoff) (Grant, error) {
	waiter, first := newWaiter()
	l.waiter, l.ticket = waiter, time.Now().UnixMicro()
	defer l.trail.gone.Store(true)
	var w *watch   // from the first time the lock is found held
	var last error // the last attempt's error that was not ctx's
	for attempt := 0; ; attempt++ {
		l.attempt, l.token = attempt+1, attemptToken(first, waiter, attempt+1)
		w.drain()
		g, o, err := c.acquire(ctx, l)
		queued := attempt > 0 || !o.start.IsZero() // the nodes may have queued us
		switch {
		case err == nil:
			return c.gotWait(l, w, g), nil
		case ctx.Err() == nil && (c.closed.Load() || !l.Persist && Permanent(err)):
			c.endWait(l, w, queued)
			return Grant{}, c.closedDuring(l, err)
		case ctx.Err() == nil:
			last = err
			if g, ok := c.between(ctx, l, &w, b, attempt, o, err); ok {
				return c.gotWait(l, w, g), nil
			}
			if ctx.Err() == nil {
				continue
			}
		case !errors.Is(err, ctx.Err()):
			last = err
		}
		c.endWait(l, w, last != nil || queued)
		if last == nil {
			return Grant{}, ctxError(ctx, "acquire", l.Keys.named())
		}
		return Grant{}, fmt.Errorf("%w; last attempt: %w", ctxError(ctx, "acquire", l.Keys.named()), last)
	}
}

// attemptToken returns the token of the waiter's attempt (from 1), first for the first.
func attemptToken(first, waiter string, attempt int) string {
	if attempt == 1 {
		return first
	}
	return waiter + "." + strconv.Itoa(attempt)
}

// closedDuring returns err, marked ErrClosed as well if the Cluster was closed during the
// attempt that failed with it.
func (c *Cluster) closedDuring(l *claim, err error) error {
	if c.closed.Load() && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w; last attempt: %w", opError("acquire", l.Keys.named(), ErrClosed), err)
	}
	return err
}

func (c *Cluster) gotWait(l *claim, w *watch, g Grant) Grant {
	l.trail.won.Store(int64(l.attempt))
	if w != nil {
		go w.stop()
	}
	return g
}

// endWait ends a wait that did not get the lock, leaving the queue if the nodes may have
// queued the waiter.
func (c *Cluster) endWait(l *claim, w *watch, queued bool) {
	w.stop()
	if queued {
		c.leave(l)
	}
}

// between runs between the failed attempt o (error err) and the next: it reports err to
// l.Failed, subscribes the first time the lock is found held (then calls again at once: the
// release may have come before), and waits. It reports true if a hand-over gave it the lock.
func (c *Cluster) between(ctx context.Context, l *claim, w **watch, b Backoff, attempt int, o outcome, err error) (Grant, bool) {
	if l.Failed != nil {
		l.Failed(err)
	}
	held := errors.Is(err, ErrHeld)
	if held && *w == nil {
		*w = c.watch(ctx, l.Keys.Wake(l.waiter), l.NodeTimeout)
		if (*w).isActive() || o.plain { // a plain SET NX did not queue us
			return Grant{}, false
		}
	}
	delay, listen := pause(l, *w, b, attempt, o, held)
	return c.await(ctx, l, *w, o, delay, listen)
}

// pause returns how long to wait after the failed attempt o, at most until a refresh
// interval after o's start, and whether a message on w may end the wait.
func pause(l *claim, w *watch, b Backoff, attempt int, o outcome, held bool) (time.Duration, bool) {
	refresh := l.refresh()
	if !o.start.IsZero() {
		refresh = max(0, refresh-time.Since(o.start))
	}
	delay := min(b.Delay(attempt, o.wait), refresh)
	switch {
	case o.split && l.Keys.Permits != nil:
		return delay, w.isActive()
	case o.split:
		return min(rand.N(2*o.took+1), refresh), w.isActive()
	case held && w.isActive() && o.wait > 0:
		return min(o.wait, refresh), true
	case held && w.isActive():
		return refresh, true
	}
	return delay, false
}

// await sleeps after the failed attempt o until delay passes, ctx ends or the Cluster
// closes, or, if listen, a message on w wakes it. It reports true once a quorum of the
// nodes that refused o (o.late's too, with a hand-over they sent before) handed l over.
func (c *Cluster) await(ctx context.Context, l *claim, w *watch, o outcome, delay time.Duration, listen bool) (Grant, bool) {
	deadline := time.Now().Add(delay)
	timer := time.NewTimer(delay)
	defer timer.Stop()
	var msgs <-chan message
	var late <-chan int
	if listen {
		msgs, late = w.msgs, o.late
	}
	hs := &handovers{token: l.token, k: len(l.Keys.Permits), refused: o.refused, got: make([]handover, len(c.nodes))}
	for {
		var node int
		var h handover
		var ok bool
		select {
		case <-timer.C:
			return Grant{}, false
		case <-ctx.Done():
			return Grant{}, false
		case <-c.done:
			return Grant{}, false
		case node = <-late:
			if h, ok = hs.refuse(node); !ok {
				continue
			}
		case m := <-msgs:
			if h, ok = parseHandover(m.payload); !ok {
				return Grant{}, false // a plain wake-up
			}
			if node = m.node; late != nil && hs.early(node, h) {
				continue
			}
		}
		if !hs.take(node, h) {
			continue // an earlier attempt's, or from a node whose refusal we did not see
		}
		if h.unguarded {
			c.markUnguarded(node)
		}
		c.granted(node)
		if _, count, _ := hs.best(); count < c.quorum {
			timer.Reset(min(c.restOfHandover(l, o), time.Until(deadline)))
			continue
		}
		return c.handedOver(ctx, l, o, hs)
	}
}

// handedOver is the grant of l's attempt o, which a quorum handed over (for a semaphore, the
// permit they named), or false if less than half the TTL is left.
func (c *Cluster) handedOver(ctx context.Context, l *claim, o outcome, hs *handovers) (Grant, bool) {
	permit, _, fence := hs.best()
	permits := slices.Repeat([]int{-1}, len(hs.got)) // per node: the permit it handed over
	l.holds = 0
	for i, h := range hs.got {
		if h.token != "" {
			l.holds, permits[i] = l.holds|bit(i), h.permit
		}
	}
	if permit >= 0 {
		c.holdPermit(l, permits, permit)
	}
	g, err := c.grant(ctx, l, o.start, fence, l.TTL/2)
	if err == nil && permit >= 0 {
		c.leaveOthers(l, permits, permit, nil)
	}
	return g, err == nil
}

// restOfHandover is how long a waiter that heard fewer than a quorum of hand-overs of o
// waits for the rest (see the package doc, The waiter, across nodes).
func (c *Cluster) restOfHandover(l *claim, o outcome) time.Duration {
	if o.handers < c.quorum {
		return 0
	}
	return min(l.NodeTimeout, max(2*o.took, 2*time.Millisecond))
}

// handovers counts the hand-overs of one attempt.
type handovers struct {
	token   string
	refused []bool     // per node: it refused the attempt (the outcome's, then refuse's)
	k       int        // a semaphore's number of permits; 0 for a lock
	got     []handover // per node: its hand-over that counted (token "": none)
	pending []handover // per node: a hand-over that came before the node's refusal
}

// refuse records node i's refusal that came after the attempt returned, and returns the
// hand-over it sent before, if any.
func (hs *handovers) refuse(i int) (handover, bool) {
	if hs.refused == nil {
		hs.refused = make([]bool, len(hs.got))
	}
	hs.refused[i] = true
	if hs.pending == nil || hs.pending[i].token == "" {
		return handover{}, false
	}
	h := hs.pending[i]
	hs.pending[i] = handover{}
	return h, true
}

// early keeps h, from node i, if it is this attempt's and the node's refusal (which a
// message can overtake) has not come yet.
func (hs *handovers) early(i int, h handover) bool {
	if h.token != hs.token || (hs.refused != nil && hs.refused[i]) {
		return false
	}
	if hs.pending == nil {
		hs.pending = make([]handover, len(hs.got))
	}
	hs.pending[i] = h
	return true
}

// take counts h from node i if it is this attempt's, from a node that refused it, the
// node's first, and names a semaphore's permit (none for a lock).
func (hs *handovers) take(i int, h handover) bool {
	if h.token != hs.token || hs.refused == nil || !hs.refused[i] || hs.got[i].token != "" || h.permit >= hs.k || (hs.k > 0) != (h.permit >= 0) {
		return false
	}
	hs.got[i] = h
	return true
}

// best returns the permit the most hand-overs name (-1 for a lock), how many, and their
// fences.
func (hs *handovers) best() (permit, count int, fence highest) {
	for _, h := range hs.got {
		if h.token == "" {
			continue
		}
		var n int
		var f highest
		for _, o := range hs.got {
			if o.token != "" && o.permit == h.permit {
				n++
				f.see(o.fence)
			}
		}
		if n > count {
			permit, count, fence = h.permit, n, f
		}
	}
	return permit, count, fence
}

// handover is a release's message that it handed the lock to a waiter's attempt.
type handover struct {
	token     string
	fence     int64
	unguarded bool
	permit    int // a semaphore's permit; -1 for a lock
}

// parseHandover parses "<token> <fence>[ #<permit>][ u]" (see release.lua); ok is false for
// anything else, such as the empty message of a plain wake-up.
func parseHandover(p string) (h handover, ok bool) {
	token, rest, found := strings.Cut(p, " ")
	if !found || token == "" {
		return h, false
	}
	fence, flag, _ := strings.Cut(rest, " ")
	h = handover{token: token, permit: -1}
	if permit, more, _ := strings.Cut(flag, " "); strings.HasPrefix(permit, "#") {
		n, err := strconv.Atoi(permit[1:])
		if err != nil || n < 0 {
			return handover{}, false
		}
		h.permit, flag = n, more
	}
	n, err := strconv.ParseInt(fence, 10, 64)
	if err != nil || n < 0 || (flag != "" && flag != "u") {
		return handover{}, false
	}
	h.fence, h.unguarded = n, flag == "u"
	return h, true
}

// leave sends release "leave" for l's waiter to every node in the background, on each once
// l's calls under way there were dealt with (see trail), or after two node timeouts. After a
// first attempt it leaves under the token of a second, which no call carries: each node then
// marks the waiter left (see the package doc, The waiter queue), since a call of the first
// attempt that the waiter stopped hearing can still land after the leave.
func (c *Cluster) leave(l *claim) {
	req, timeout, tr := l.releaseRequest("leave"), l.NodeTimeout, &l.trail
	if l.attempt == 1 {
		req.args[0] = attemptToken("", l.waiter, 2) // ARGV[1], the token
	}
	if len(c.nodes) == 1 && !tr.underWay() {
		c.callNode(context.Background(), 0, timeout, req)
		return
	}
	bound := make(chan struct{})
	time.AfterFunc(2*timeout, func() { close(bound) })
	for i := range c.nodes {
		c.bg.goRun(3*timeout, func() {
			tr.wait(i, bound)
			c.callNode(context.Background(), i, timeout, req)
		})
	}
}

// Backoff is the wait between acquisition attempts: it starts at Min, doubles each attempt
// up to Max, and is jittered to a random point in its upper half so that competing clients
// drift apart.
type Backoff struct {
	Min, Max time.Duration
}

// Delay returns the wait after the given attempt (0 for the first). If the lock is held and
// the holder can keep it at most holder longer (holder > 0), the wait is no longer than that.
func (b Backoff) Delay(attempt int, holder time.Duration) time.Duration {
	d := b.Min
	for i := 0; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if d > 1 {
		d = d/2 + rand.N(d/2+1)
	}
	if holder > 0 {
		d = min(d, holder)
	}
	return d
}
