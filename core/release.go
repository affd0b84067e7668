package core

import "context"

// Release deletes h on every node that holds it with h's token (or, for a waiter's token,
// with an earlier attempt's), takes h's waiter out of the queue, and hands the lock to the
// first waiter in the queue, telling it on its channel (see AcquireWait). A node that had
// not answered the acquisition yet is called once it answers (or at the acquisition's
// deadline), so that no late SET lands after the release; the others at once. It waits
// for every node, but no longer than the node timeout, so that when it returns the lock is
// gone from every node that answered. It runs even if ctx is cancelled: a release is
// never abandoned half-way.
//
// Errors: ErrNotHeld (too few nodes still held h: it had expired or been taken), or a
// *QuorumError (too few nodes answered; their keys expire by their TTL).
func (c *Cluster) Release(ctx context.Context, h *Held) error {
	l := &h.claim
	req := request{s: l.scripts().release, detached: true, keys: l.Keys.releaseKeys(), args: releaseArgs(l.token, l.Keys.Channel, l.waiter, "leave"),
		op: "release", failed: l.NodeFailed}
	var f *fanout
	if a, late := l.acquiring, l.late; a != nil && l.pending > 0 && late != 0 {
		f = c.fan(ctx, l.NodeTimeout, req, late)
		f.after(a, late)
	} else {
		l.stragglers()
		f = c.fan(ctx, l.NodeTimeout, req, 0)
	}
	l.acquiring, l.pending, l.late = nil, 0, 0
	t := tally{c: c, op: "release", key: l.Keys.Lock, all: true}
	c.collect(f.ctx, f, &t, make([]bool, len(c.nodes)), nil)
	switch {
	case t.won():
		return nil
	case t.refused():
		return opError("release", l.Keys.Lock, ErrNotHeld)
	}
	return t.err()
}

// stragglers waits for the nodes that had not answered the acquisition when it returned,
// within the acquisition's deadline: they answer by then, unless they ignore it.
func (l *claim) stragglers() {
	f := l.acquiring
	if f == nil {
		return
	}
	for ; l.pending > 0; l.pending-- {
		select {
		case <-f.out:
		case <-f.deadline: // the rest answer, if ever, later
			return
		}
	}
}
