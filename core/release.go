package core

import (
	"context"
	"time"
)

// Release runs release "leave" for h on every node (see the package doc's tables): it lets
// go of h, takes h's waiter out of the queue and hands the lock on. It runs even if ctx is
// cancelled: a release is never abandoned half-way. A node that had not answered the
// acquisition yet, or h's last extension (or its raise) that could take the lock there, is
// called once it answers (or at that call's deadline), so that no late SET lands after the
// release.
//
// It returns once a quorum let go and the other nodes had twice as long as that took; a
// slower node is left to its call, which ends within the node timeout. On failure it waits
// for every node, so that its error names each one.
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
	var late uint64 // the acquisition's nodes that had not answered
	if l.acquiring != nil && l.pending > 0 {
		late = l.late
	}
	if late == 0 {
		l.stragglers()
	}
	f := c.fan(ctx, l.NodeTimeout, req, late|l.extendLate)
	f.after(l.acquiring, late, l.extending, l.extendLate)
	l.acquiring, l.pending, l.late, l.extending, l.extendLate = nil, 0, 0, nil, 0
	t := tally{c: c, op: "release", key: l.Keys.named(), gone: start.Before(h.Until)}
	switch {
	case c.settle(f.ctx, f, &t, start):
		return nil
	case t.refused():
		return opError("release", l.Keys.named(), ErrNotHeld)
	}
	return t.err()
}

// settle reads f's replies into t, begun at start. Once a quorum said yes, it waits for the
// other nodes twice as long as that took (at least releaseGrace) and reports true: a node
// that is down or far away does not hold up the caller. Otherwise it hears every node out,
// for t's error, and reports false.
func (c *Cluster) settle(ctx context.Context, f *fanout, t *tally, start time.Time) bool {
	answered := make([]bool, len(c.nodes))
	c.collect(ctx, f, t, answered, nil)
	if t.won() {
		f.grace(len(c.nodes)-t.answers, max(2*time.Since(start), releaseGrace))
		return true
	}
	t.all = true
	c.collect(ctx, f, t, answered, nil)
	return false
}

// releaseGrace is the least time settle waits for the other nodes once a quorum answered:
// nodes on one machine or network answer one request within it.
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

// follow records f, an extension (or a raise), if a node of may (a bit per node: those sent
// the fence to take the lock with) has not answered it: Release then follows that call.
func (l *claim) follow(f *fanout, may uint64, answered []bool) {
	var late uint64
	for i, ok := range answered {
		if !ok {
			late |= may & bit(i)
		}
	}
	if late != 0 {
		l.extending, l.extendLate = f, late
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
