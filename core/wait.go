package core

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"time"
)

// AcquireWait takes the lock l asks for, retrying until it succeeds or ctx ends, and returns
// it held. It queues as one waiter with a token per attempt (see the package doc, Tokens and
// The waiter, across nodes).
//
// Errors: when ctx ends, one that matches both ctx's error and the last attempt's (ErrHeld
// or ErrNoQuorum, say) under errors.Is; an error that no retry can fix (see Permanent), at
// once, unless l.Persist; one that matches ErrInvalid for a bad Lock.Description, before
// any call, whatever l.Persist; ErrClosed once the Cluster is closed.
func (c *Cluster) AcquireWait(ctx context.Context, l *Lock, b Backoff) (*Held, error) {
	if err := l.checkDescription(); err != nil {
		return nil, err
	}
	h := &Held{claim: claim{Lock: *l}}
	var err error
	if h.Grant, err = c.acquireWait(ctx, &h.claim, b); err != nil {
		return nil, err
	}
	return h, nil
}

// acquireWait is AcquireWait for the claim l.
func (c *Cluster) acquireWait(ctx context.Context, l *claim, b Backoff) (Grant, error) {
	waiter, first := newWaiter(l.Description)
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
			if c.between(ctx, l, &w, b, attempt, o, err); ctx.Err() == nil {
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
// release may have come before), and waits.
func (c *Cluster) between(ctx context.Context, l *claim, w **watch, b Backoff, attempt int, o outcome, err error) {
	if l.Failed != nil {
		l.Failed(err)
	}
	held := errors.Is(err, ErrHeld)
	if held && *w == nil {
		*w = c.watch(ctx, l.Keys.Wake(l.waiter), l.NodeTimeout)
		if (*w).isActive() {
			return
		}
	}
	delay, listen := pause(l, *w, b, attempt, o, held)
	// The nodes that refused it are those whose wake-ups it waits for, up to a quorum.
	c.await(ctx, *w, delay, listen, min(max(o.no, 1), c.quorum), max(o.took, time.Millisecond))
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
// closes, or, if listen, wake-ups on w end it: the waiter then calls again, and takes the
// lock itself if it is its turn. A release wakes the waiter on every node it frees, so the
// wait ends once need nodes woke it, or grace after the first wake-up (the last attempt's
// time: a node's wake-up that lags the first by that is slow or lost): calling at the first
// could find the lock still held on the nodes whose release has not landed.
func (c *Cluster) await(ctx context.Context, w *watch, delay time.Duration, listen bool, need int, grace time.Duration) {
	timer := time.NewTimer(delay)
	defer timer.Stop()
	var msgs <-chan message
	if listen {
		msgs = w.msgs
	}
	var woken uint64 // the nodes whose wake-up came
	var lag <-chan time.Time
	for {
		select {
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		case <-c.done:
			return
		case m := <-msgs:
			if woken |= bit(m.node); bits.OnesCount64(woken) >= need {
				return
			}
			if lag == nil {
				t := time.NewTimer(grace)
				defer t.Stop()
				lag = t.C
			}
		case <-lag:
			return
		}
	}
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
