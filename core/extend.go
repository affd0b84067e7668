package core

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Extend resets the TTL of h on every node that still holds it with h's token, and returns
// the new end of validity, which it also keeps in h.Until. It takes nothing: a node where
// h's key is gone says no. It needs a quorum within the new validity, and returns once the
// outcome is decided.
//
// Errors: ErrNotHeld (too many nodes no longer hold l for a quorum: the lock is lost), a
// *QuorumError (too few nodes answered: the lock is still valid until its previous end),
// ErrExpired, or ctx's error wrapped.
func (c *Cluster) Extend(ctx context.Context, h *Held) (time.Time, error) {
	l := &h.claim
	if err := ctxError(ctx, "extend", l.Keys.named()); err != nil {
		return time.Time{}, err
	}
	l.heedLate()
	start := time.Now()
	req := request{s: extendScript, keys: l.Keys.extendKeys(l.Read), args: []string{l.token, millis(l.TTL), l.extendMode()}, op: "extend", failed: l.NodeFailed}
	t := tally{c: c, op: "extend", key: l.Keys.named()}
	c.renew(ctx, l, req, &t, 0)
	l.holds |= t.yesNodes // whatever the outcome, these nodes hold h now
	until := start.Add(l.TTL - l.Drift())
	switch {
	case ctx.Err() != nil:
		return time.Time{}, ctxError(ctx, "extend", l.Keys.named())
	case t.won() && time.Now().Before(until):
		h.Until = until
		return until, nil
	case t.won():
		return time.Time{}, opError("extend", l.Keys.named(), ErrExpired)
	case t.refused():
		return time.Time{}, opError("extend", l.Keys.named(), ErrNotHeld)
	}
	return time.Time{}, t.err()
}

// Raise sets the fence counter of every name of h to at least fence on a quorum of the
// nodes that hold h, then makes fence h's token (h.Fence, which a later Extend gives a node
// that takes h again): for a caller that gives one token to several holdings. Raise only to
// a token that a counter gave (another holding's Fence): later tokens then exceed it across
// a counter's expiry and a node's restart, as tokens do (see docs/design.md, Across
// restarts). A fence past the servers' clocks (microseconds since 1970) by more than 2 s
// stands only while the counter lives: once it lapses, FenceIdle after its last write, or
// a node restarts without it, the counter starts again from the server's clock, and later
// tokens fall below fence. Errors: one that matches ErrInvalid for a fence over 2^52 (the
// scripts count in Lua's numbers, exact to 2^53, and later tokens must stay exact), a
// *QuorumError (too few nodes raised it), ErrExpired (h's validity ran out first), or
// ctx's error.
func (c *Cluster) Raise(ctx context.Context, h *Held, fence uint64) error {
	if fence > maxFence {
		return opError("raise", h.Keys.named(), fmt.Errorf("%w: fence %d is over 2^52", ErrInvalid, fence))
	}
	if err := c.raise(ctx, &h.claim, int64(fence), h.Until); err != nil {
		return err
	}
	h.Fence = fence
	return nil
}

// maxFence is the largest fence Raise takes: the scripts' counters stay exact in Lua's
// numbers (doubles) for 2^52 acquisitions after it.
const maxFence = 1 << 52

// renew runs req, an extension or a raise of l, on every node, reads the replies into t, and
// has l's release follow the nodes of may (those that may take l) that did not answer. It
// returns the fan-out.
func (c *Cluster) renew(ctx context.Context, l *claim, req request, t *tally, may uint64) *fanout {
	f := c.fan(ctx, l.NodeTimeout, req, 0)
	answered := make([]bool, len(c.nodes))
	c.collect(ctx, f, t, answered, nil)
	l.follow(f, may, answered)
	return f
}

// raise sets the fence counter to at least fence on a quorum of the nodes that hold l,
// before until: an extension carrying the fence. On failure it waits for its calls still
// under way, which then land before the acquisition's undoing.
func (c *Cluster) raise(ctx context.Context, l *claim, fence int64, until time.Time) error {
	t := tally{c: c, op: "raise", key: l.Keys.named()}
	f := c.renew(ctx, l, request{s: extendScript, keys: l.Keys.extendKeys(false),
		args: []string{l.token, millis(l.TTL), l.extendMode(), strconv.FormatInt(fence, 10)}, op: "raise", failed: l.NodeFailed}, &t, 0)
	l.holds |= t.yesNodes
	var err error
	switch {
	case ctx.Err() != nil:
		err = ctxError(ctx, "acquire", l.Keys.named())
	case !t.won():
		err = t.err()
	case !time.Now().Before(until):
		err = opError("acquire", l.Keys.named(), ErrExpired)
	}
	if err != nil {
		l.unfollow(f)
	}
	return err
}
