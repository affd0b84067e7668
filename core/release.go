package core

import (
	"context"
	"math/bits"
	"time"
)

// Release runs release "leave" for h on every node: it lets go of h, takes h's waiter out of
// the queue and hands the lock on. It runs even if ctx is cancelled. A node that had not
// answered the acquisition, or an extension or raise of h, is called once each such call
// answered (or by the deadline of the last one), so that no late SET lands after it.
//
// It returns once a quorum let go and the other nodes had twice as long as that took; on
// failure it waits for every node, so that its error names each one. A node where, within
// h's validity, neither h's key nor another owner's is found counts as one that let go.
//
// Errors: ErrNotHeld (too few nodes still held h: it had expired, or another owner holds
// it on too many nodes), or a *QuorumError (too few nodes answered; their keys expire by
// their TTL).
func (c *Cluster) Release(ctx context.Context, h *Held) error {
	l := &h.claim
	req := l.releaseRequest("leave")
	req.detached = true
	if l.Keys.Permits != nil { // where KEYS[1] is the permit the node granted
		req.more, req.moreTo = "1", l.holds
	}
	start := time.Now()
	follows := l.extending
	if l.late != 0 {
		follows = append([]followed{{f: l.acquiring, late: l.late}}, follows...)
	} else if l.acquiring != nil { // N > 64, or every node answered
		l.acquiring.drain(l.pending, 0)
	}
	for k := range follows { // past the 64th node, each call is waited for before any release
		for follows[k].rest > 0 {
			follows[k].await()
		}
	}
	f := c.fan(ctx, l.NodeTimeout, req, lateOf(follows))
	f.after(follows)
	l.acquiring, l.pending, l.late, l.extending = nil, 0, 0, nil
	return c.settle(f.ctx, f, &tally{c: c, op: "release", key: l.Keys.named(), gone: start.Before(h.Until)}, start)
}

// settle reads f's replies into t, begun at start. Once a quorum said yes, it gives the
// other nodes twice as long as that took (at least releaseGrace), leaves the calls still
// under way to the background (see Wait), and returns nil; otherwise it hears every node
// out and returns ErrNotHeld if the refusals put a quorum out of reach, else t's error.
func (c *Cluster) settle(ctx context.Context, f *fanout, t *tally, start time.Time) error {
	answered := make([]bool, len(c.nodes))
	c.collect(ctx, f, t, answered, nil)
	if t.won() {
		if n := f.drain(len(c.nodes)-t.answers, max(2*time.Since(start), releaseGrace)); n > 0 {
			c.bg.goRun(f.timeout, func() { f.drain(n, 0) })
		}
		return nil
	}
	t.all = true
	c.collect(ctx, f, t, answered, nil)
	if t.refused() {
		return opError(t.op, t.key, ErrNotHeld)
	}
	return t.err()
}

const releaseGrace = 2 * time.Millisecond

// drain reads n of f's replies, or fewer if the calls' deadline, or d if d > 0, passes
// first, and returns how many it did not read.
func (f *fanout) drain(n int, d time.Duration) int {
	if n == 0 || f.out == nil {
		return 0
	}
	var timeout <-chan time.Time
	if d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		timeout = timer.C
	}
	for ; n > 0; n-- {
		select {
		case <-f.out:
		case <-timeout:
			return n
		case <-f.dctx.Done():
			return n
		}
	}
	return 0
}

// followed is a fan-out whose calls to the nodes of late, and to rest nodes past the 64th,
// had not answered, as far as read.
type followed struct {
	f    *fanout
	late uint64
	rest int
}

// waits reports whether some call of e is still followed.
func (e *followed) waits() bool { return e.late != 0 || e.rest > 0 }

// poll reads e.f's replies ready now, and empties e.late (and e.rest) once e.f's deadline
// passed. It returns the nodes (of the first 64) whose reply was yes: a grant, or an
// extension, that came late.
func (e *followed) poll() (yes uint64) {
	for e.waits() && (len(e.f.out) > 0 || e.f.dctx.Err() != nil) {
		yes |= e.await()
	}
	return yes
}

// await waits for one more reply of e.f, or for its deadline, which empties e.late (and
// e.rest) once no reply is left to read. It returns the node's bit if the reply was yes.
func (e *followed) await() (yes uint64) {
	var r reply
	select {
	case r = <-e.f.out:
	case <-e.f.dctx.Done():
		select {
		case r = <-e.f.out: // a reply that came by the deadline
		default:
			e.late, e.rest = 0, 0
			return 0
		}
	}
	if r.node >= 64 {
		e.rest--
	} else {
		e.late &^= bit(r.node)
	}
	if r.yes() {
		return bit(r.node)
	}
	return 0
}

// heedLate reads the replies of the acquisition's nodes that had not answered (N <= 64)
// that came since, for Extend: a node that granted late holds the lock for this owner, as
// one that granted in time does. Release follows the rest. (A semaphore's node may have
// granted another permit than the one won: holds names those that hold it.)
func (l *claim) heedLate() {
	if l.late == 0 || l.Keys.Permits != nil {
		return
	}
	e := followed{f: l.acquiring, late: l.late}
	l.holds |= e.poll()
	if l.late = e.late; l.late == 0 {
		l.acquiring, l.pending = nil, 0
	} else {
		l.pending = bits.OnesCount64(l.late)
	}
}

// lateOf returns the nodes that some fan-out of follows still waits for.
func lateOf(follows []followed) uint64 {
	var late uint64
	for _, e := range follows {
		late |= e.late
	}
	return late
}

// follow records f, an extension or raise, if a node of may (those that could take the
// lock; every node, past the 64th too, if may is allNodes) has not answered it, for Release
// to follow. Every earlier record whose calls may still land is kept (they may land after a
// later one's); the others are dropped, so the records are never more than the calls in
// flight.
func (l *claim) follow(f *fanout, may uint64, answered []bool) {
	e := followed{f: f, late: may & flagged(answered, false)}
	for i := 64; may == allNodes && i < len(answered); i++ {
		if !answered[i] {
			e.rest++
		}
	}
	kept := l.extending[:0]
	for _, k := range l.extending {
		if l.holds |= k.poll(); k.waits() {
			kept = append(kept, k)
		}
	}
	clear(l.extending[len(kept):])
	if e.waits() {
		kept = append(kept, e)
	}
	l.extending = kept
}

// allNodes is follow's may for a call that may take the lock on every node.
const allNodes = ^uint64(0)

// unfollow waits for the unanswered calls of f, the last record, or its deadline, and drops
// it.
func (l *claim) unfollow(f *fanout) {
	if n := len(l.extending); n > 0 && l.extending[n-1].f == f {
		for e := &l.extending[n-1]; e.waits(); {
			e.await()
		}
		l.extending[n-1] = followed{}
		l.extending = l.extending[:n-1]
	}
}
