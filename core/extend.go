package core

import (
	"context"
	"time"
)

// Extend resets the TTL of h on every node that still holds it with h's token, and returns
// the new end of validity. It never re-creates a key that is gone. It needs a quorum, within the new
// validity, like Acquire, and returns as soon as the outcome is decided.
//
// Errors: ErrNotHeld (too many nodes no longer hold l for a quorum: the lock is lost), a
// *QuorumError (too few nodes answered: the lock is still valid until its previous end),
// ErrExpired, or ctx's error wrapped.
func (c *Cluster) Extend(ctx context.Context, h *Held) (time.Time, error) {
	l := &h.claim
	if err := ctxError(ctx, "extend", l.Keys.named()); err != nil {
		return time.Time{}, err
	}
	start := time.Now()
	f := c.call(ctx, &l.Lock, "extend", l.NodeTimeout, l.scripts().extend, l.Keys.extendKeys(l.Read), l.token, millis(l.TTL))
	t := tally{c: c, op: "extend", key: l.Keys.named()}
	c.collect(ctx, f, &t, make([]bool, len(c.nodes)), nil)
	until := start.Add(l.TTL - l.Drift())
	switch {
	case ctx.Err() != nil:
		return time.Time{}, ctxError(ctx, "extend", l.Keys.named())
	case t.won() && time.Now().Before(until):
		return until, nil
	case t.won():
		return time.Time{}, opError("extend", l.Keys.named(), ErrExpired)
	case t.refused():
		return time.Time{}, opError("extend", l.Keys.named(), ErrNotHeld)
	}
	return time.Time{}, t.err()
}
