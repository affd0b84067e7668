package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/go-redlock/redlock/core"
)

// acquire takes the lock that l, a Lease not yet held, asks for: if wait, as
// core.Cluster.AcquireWait does, retrying with l's backoff and logging a long wait (see
// waitLog); else in one attempt (core.Cluster.Acquire). Unless q is nil, it first takes
// the place in q, the lock's local queue in c (waiting for it if wait), and gives it back
// if the lock is not granted; op names the call in the error of a refused place. It
// reports the acquisition to l's Observer, and returns the grant, which l has yet to start
// (see Lease.start); the caller then has q's place. If the Observer panics, the lock is let
// go and q's place given back before the panic goes on.
func (c *Client) acquire(ctx context.Context, op string, l *Lease, q *queue, wait bool) (g *core.Held, err error) {
	a := observeAcquire(ctx, &l.opts, l.name, l.kind, wait)
	if q != nil {
		if err := q.join(ctx, wait); err != nil {
			err = &lockError{op, l.name, err}
			a.queued(err)
			return nil, err
		}
	}
	returned := false
	defer func() {
		if returned {
			return
		}
		if g != nil && err == nil {
			l.held = g
			_ = l.releaseNodes(context.Background())
		}
		if q != nil {
			q.leave()
		}
	}()
	b := core.Backoff{Min: l.opts.retryMin, Max: l.opts.retryMax}
	switch {
	case l.groups != nil && wait:
		l.lock.Failed = a.failedHook(waitLog(l.opts, l.name))
		g, err = c.acquireGroups(ctx, l, true, b)
		a.waited(l, g, err)
	case l.groups != nil:
		g, err = c.acquireGroups(ctx, l, false, b)
		a.once(l, g, err)
	case wait:
		l.lock.Failed = a.failedHook(waitLog(l.opts, l.name))
		g, err = c.cluster.AcquireWait(ctx, &l.lock, b)
		a.waited(l, g, err)
	default:
		g, err = c.cluster.Acquire(ctx, &l.lock)
		a.once(l, g, err)
	}
	returned = true
	if err != nil && q != nil {
		q.leave()
	}
	return g, err
}

// waitLog returns what a wait for the lock called name calls after each failed attempt
// (see core.Lock.Failed): with a logger in s, it logs at Warn once the wait has lasted
// s.warnAfter and an attempt failed for another reason than a holder (nodes down or
// refusing, the restart guard...), and then at most every s.warnEvery, with the attempt's
// error, which names each failing node and its error. Without a logger it returns nil.
func waitLog(s settings, name string) func(error) {
	if s.logger == nil {
		return nil
	}
	// The function keeps only what it needs of s: a closure holds a large struct by
	// reference, which would move s to the heap on every call, logger or not.
	logger, every := s.logger, s.warnEvery
	start := time.Now()
	next := start.Add(s.warnAfter)
	return func(err error) {
		if errors.Is(err, ErrHeld) {
			return // another owner holds it: waiting is what a lock does
		}
		now := time.Now()
		if now.Before(next) {
			return
		}
		next = now.Add(every)
		logger.Warn("redlock: still waiting for the lock", "name", name,
			"waited", now.Sub(start).Round(time.Millisecond), "error", err)
	}
}
