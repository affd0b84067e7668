package core

import (
	"context"
	"time"
)

// Release deletes h on every node that holds it with h's token (or, for a waiter's token,
// with an earlier attempt's), takes h's waiter out of the queue, and hands the lock to the
// first waiter in the queue, telling it on its channel (see AcquireWait). A node that had
// not answered the acquisition yet is called once it answers (or at the acquisition's
// deadline), so that no late SET lands after the release; the others at once. It runs even
// if ctx is cancelled: a release is never abandoned half-way.
//
// It returns once a quorum let go and the other nodes had twice as long as that took (at
// least releaseGrace): when it returns, the lock is gone from a quorum of nodes and from
// every node about as fast as they are. A node slower than that, or one that does not
// answer, is left to its call, which goes on in the background within the node timeout
// (a key it keeps expires by its TTL): a node that is down or far away does not hold up
// the caller. On failure it waits for every node, within the node timeout, so that its
// error names each one.
//
// A node where, within h's validity, neither h's key nor another owner's is found counts as
// one that let go: the key can only have gone by this release (a backend resends a script
// whose reply a broken connection lost), or with the server's data.
//
// Errors: ErrNotHeld (too few nodes still held h: it had expired, or another owner holds
// it on too many nodes), or a *QuorumError (too few nodes answered; their keys expire by
// their TTL).
func (c *Cluster) Release(ctx context.Context, h *Held) error {
	l := &h.claim
	req := request{s: l.scripts().release, detached: true, keys: l.Keys.releaseKeys(), args: l.releaseArgs("leave"),
		op: "release", failed: l.NodeFailed}
	if l.Keys.Permits != nil { // where KEYS[1] is the permit the node granted, so nothing else is ours
		req.more, req.moreTo = "1", l.holds
	}
	start := time.Now()
	var f *fanout
	if a, late := l.acquiring, l.late; a != nil && l.pending > 0 && late != 0 {
		f = c.fan(ctx, l.NodeTimeout, req, late)
		f.after(a, late)
	} else {
		l.stragglers()
		f = c.fan(ctx, l.NodeTimeout, req, 0)
	}
	l.acquiring, l.pending, l.late = nil, 0, 0
	t := tally{c: c, op: "release", key: l.Keys.named(), gone: start.Before(h.Until)}
	answered := make([]bool, len(c.nodes))
	c.collect(f.ctx, f, &t, answered, nil)
	if t.won() {
		f.grace(len(c.nodes)-t.answers, max(2*time.Since(start), releaseGrace))
		return nil
	}
	t.all = true // the outcome is a failure: hear every node out, for the error
	c.collect(f.ctx, f, &t, answered, nil)
	if t.refused() {
		return opError("release", l.Keys.named(), ErrNotHeld)
	}
	return t.err()
}

// releaseGrace is the least time a release that a quorum answered waits for the other
// nodes (see Release): nodes on one machine or network answer one request within it.
const releaseGrace = 2 * time.Millisecond

// grace waits up to d (and no later than the calls' deadline) for the n replies of f not
// read yet, and returns once they came.
func (f *fanout) grace(n int, d time.Duration) {
	if n == 0 || f.out == nil {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for range n {
		select {
		case <-f.out:
		case <-timer.C:
			return
		case <-f.deadline:
			return
		}
	}
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
