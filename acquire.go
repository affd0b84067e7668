package redlock

import (
	"context"

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
