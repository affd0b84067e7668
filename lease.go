package redlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-redlock/redlock/core"
)

// Lease is a held lock, returned by Client.Acquire and Client.TryAcquire. It is held until
// it ends: by Release, by running past Until without an extension, by losing the lock (an
// extension found the nodes no longer hold it), at its maximum hold time, or when its
// Client is closed (Close releases it). Done and Err report the end. A Lease is safe for
// concurrent use; Extend and Release calls on one Lease run one at a time. The zero Lease
// holds nothing.
type Lease struct {
	client  *Client // releases it at Close
	cluster *core.Cluster
	name    string
	kind    Kind // for the Observer's events
	opts    settings
	lock    core.Lock  // what is asked for
	held    *core.Held // the lock as granted (token, start), for Extend and Release
	// groups are the slots' groups of a lock over names in several Redis Cluster slots,
	// taken one after another (see slotGroups), and parts their grants once held (after a
	// Release, those it failed to let go: see releaseNodes); both nil for another lock,
	// which held stands for on the nodes.
	groups []core.Keys
	parts  []*core.Held
	// acquired is when the acquisition returned, set before start only if an Observer is
	// set (opts.observer): the start of the hold time it reports.
	acquired time.Time

	op         opLock // serializes Extend and Release
	unanswered bool   // too few nodes answered the last Release: the next tries again (guarded by op)

	mu        sync.Mutex    // guards the fields below
	done      chan struct{} // made by the first Done call; closed when the lease ends
	lost      chan struct{} // made by the first lostCh call; closed when it ends but by Release
	until     time.Time
	err       error       // why the lease ended; nil while it is held
	timer     *time.Timer // runs tick at the next extension (if on) or else at until
	extendAt  time.Time   // when the next automatic extension is due; zero if off
	extending bool        // tick's extension is under way
	holdEnd   *time.Timer // the end of the maximum hold time, if set
	released  bool        // Release ran, or HandOff
	movable   bool        // a lease of Acquire, TryAcquire or their All forms: HandOff applies

	// leaveQueue gives back the lease's place in its Client's local queue (nil for the
	// lease of a Mutex or an RWMutex's writer, which keeps its place until Unlock). It runs once, after the
	// network release, or when the lease ends otherwise.
	leaveQueue func()
	leaveOnce  sync.Once

	// extensions, made by an Election for its leader's Lease (nil for any other), is ready
	// after each extension that succeeded: the Election then records its value again.
	extensions chan struct{}
	// record is an Election leader's value, which Proclaim changes (nil for any other).
	record *leaderRecord
}

// start makes l the holder of g and, once its Client has it among its holdings, starts its
// timers: one for the next extension (if asked) or else the expiry at Until, and one for
// the end of the maximum hold time, if set. Timers cost no goroutine until they fire. If
// l's Client was closed meanwhile, it lets go of the lock instead and returns an error that
// matches ErrClosed.
func (l *Lease) start(g *core.Held) error {
	l.mu.Lock()
	l.held, l.until = g, g.Until
	l.mu.Unlock()
	if l.client != nil && !l.client.hold(l) {
		l.abandon()
		return &lockError{"acquire", l.name, ErrClosed}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil { // Close ended it, as one of its holdings
		return nil
	}
	if l.opts.autoExtend {
		l.extendAt = l.extensionDue(nil)
	}
	l.timer = time.AfterFunc(time.Until(l.nextTick()), l.tick)
	if l.opts.maxHold > 0 {
		l.holdEnd = time.AfterFunc(time.Until(g.Start.Add(l.opts.maxHold)), func() {
			_ = l.finish(context.Background(), ErrMaxHold)
		})
	}
	return nil
}

// abandon lets go of l, which has just been granted but whose Client was closed: it ends
// l, which was never handed out and whose timers never started, without a word (no lost
// handler, no event), and releases its lock.
func (l *Lease) abandon() {
	l.mu.Lock()
	l.released, l.err = true, ErrClosed
	l.mu.Unlock()
	_ = l.releaseNodes(context.Background())
	l.leave()
}

// Name returns the lock's name; for a lock over several names (AcquireAll), the names as
// given, as fmt.Sprint prints them ("[from to]").
func (l *Lease) Name() string { return l.name }

// Token returns the fencing token: it strictly increases from one holder of this name to the
// next, across all nodes, under the assumptions that make the lock exclusive. Hand it to
// the storage you write, and have the storage refuse a token lower than the highest it has
// seen. Tokens are large (seeded from the server clock in microseconds); compare them, do
// not count on their spacing. A lock over several names (AcquireAll) has one token, larger
// than every token any of its names had; each name's next token is larger than it. Across a
// server's restart that lost its data, they increase only while the restart guard exceeds
// 2s plus the largest difference between the servers' clocks (see WithRestartGuard).
func (l *Lease) Token() uint64 {
	if l.held == nil { // the zero Lease
		return 0
	}
	return l.held.Fence
}

// Until returns the end of the lease's validity: the acquisition's start + TTL - drift
// allowance, on the monotonic clock, or after an extension that extension's start + TTL -
// drift. The lease ends there unless extended first.
func (l *Lease) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Done returns a channel that is closed when the lease ends: released, expired, lost, or at
// its maximum hold time. Err then says which.
func (l *Lease) Done() <-chan struct{} {
	if l.cluster == nil {
		return closedChan()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
		if l.err != nil {
			close(l.done)
		}
	}
	return l.done
}

// lostCh returns a channel that is closed when the lease ends otherwise than by Release
// (see Mutex.Lost).
func (l *Lease) lostCh() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil {
		l.lost = make(chan struct{})
		if l.err != nil && l.err != ErrReleased {
			close(l.lost)
		}
	}
	return l.lost
}

// closedChan returns a closed channel: the Done channel of the zero Lease, and the Lost
// channel of a Mutex or an RWMutex that is not locked.
func closedChan() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// Err returns nil while the lease is held, and after it ended an error that names the lock
// and matches the reason: ErrReleased, ErrExpired (validity ran out without an extension),
// ErrLost (the nodes no longer hold the lock for it), ErrMaxHold, ErrClosed (its Client
// was closed, which released it), or ErrHandedOff (HandOff passed the lock on, held). The
// zero Lease reports ErrNotHeld. A lease that ends otherwise than by Release or HandOff
// calls the WithLostHandler function, if set.
func (l *Lease) Err() error {
	if l.cluster == nil {
		return ErrNotHeld
	}
	if reason := l.reason(); reason != nil {
		return &lockError{"lease of", l.name, reason}
	}
	return nil
}

// reason returns why the lease ended (ErrReleased...), or nil while it is held.
func (l *Lease) reason() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expireIfDue() // its timer may not have run yet
	return l.err
}

// Extend resets the lock's TTL on the nodes that still hold it, moving Until to this call's
// start + TTL - drift. A node that never held the lock for this lease (it was down or out
// of reach when the lease was granted) takes it where it is free, and counts, if its answer
// comes within the lease's validity (see core.Cluster.Extend); a node that held it and lost
// it counts as one that no longer holds it, one whose grant came after the acquisition
// returned too.
//
// Errors: one matching ErrNotHeld (and the reason, ErrLost say) if the lease has ended or
// the nodes no longer hold it (the lease then ends with ErrLost); a *QuorumError if too few
// nodes answered (the lease stays valid until its previous Until, and Extend may be retried);
// ctx's error if ctx ended.
func (l *Lease) Extend(ctx context.Context) error { return l.extend(ctx, false) }

// extend is Extend, automatic (by tick) if auto.
func (l *Lease) extend(ctx context.Context, auto bool) error {
	if l.cluster == nil { // the zero Lease
		return ErrNotHeld
	}
	l.op.lock()
	defer l.op.unlock()
	if err := l.check(); err != nil {
		return err
	}
	var start time.Time
	if l.opts.observer != nil {
		start = time.Now()
	}
	until, cerr := l.extendNodes(ctx)
	err := l.extended(until, cerr)
	if err == nil && l.extensions != nil {
		select {
		case l.extensions <- struct{}{}:
		default: // the last is not taken yet: one record covers both
		}
	}
	if l.opts.observer != nil {
		l.observeExtend(ctx, start, auto, until, err)
	}
	return err
}

// extended records the outcome of an extension, until and err from the nodes, and returns
// Extend's error.
func (l *Lease) extended(until time.Time, err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.err != nil: // expired while the extension was on its way
		return l.notHeld(l.err)
	case err == nil:
		l.until = until
		if !l.extendAt.IsZero() {
			l.extendAt = l.extensionDue(nil)
		}
		if !l.extending { // tick sets the timer when its extension returns
			l.timer.Reset(time.Until(l.nextTick()))
		}
	case errors.Is(err, ErrNotHeld):
		l.end(ErrLost)
		return l.notHeld(ErrLost)
	}
	return err
}

// Release lets the lock go on every node and wakes its waiters, then ends the lease with
// ErrReleased. It returns once a quorum of nodes let go and the others had a moment to
// follow (twice as long as the quorum took): the call to a node slower than that goes on in
// the background, within the node timeout. It is attempted even if ctx is already
// cancelled (each node is still bounded by the node timeout), so that a lock is not left
// behind until its TTL, and it is attempted once even after the lease ended otherwise, to
// clear what is left of it.
// Whatever it returns, the Lease no longer holds the lock. If too few nodes answered it,
// for reasons a retry can fix (timeouts, broken connections), Release may be called again,
// and calls every node again; otherwise a second Release calls no node.
//
// Errors: one matching ErrNotHeld if the lease had already ended, and the reason it ended
// (ErrReleased for a second Release, ErrMaxHold, ErrClosed, ErrLost, or ErrExpired, which
// means the work it protected may have overlapped another holder's), or if another owner
// held the lock on too many nodes for a quorum to let go (or, for a Release called again,
// its keys had expired); a *QuorumError if too few nodes answered: their copies expire by
// TTL, unless a later Release reaches them. A node where, within the lease's
// validity, neither the lease's key nor another owner's is found counts as one that let go:
// the key can only have gone by this release, sent twice by a backend after a broken
// connection, or with the server's data (a restart, an eviction). Every error names the
// lock.
func (l *Lease) Release(ctx context.Context) error {
	return l.finish(ctx, ErrReleased)
}

// finish ends the lease with reason, unless it ended already, and releases the lock on the
// nodes, once, or again for a Release after one that too few nodes answered. It returns the
// reason the lease had ended before, or the release's error.
func (l *Lease) finish(ctx context.Context, reason error) error {
	if l.cluster == nil {
		return ErrNotHeld
	}
	l.op.lock()
	defer l.op.unlock()
	l.mu.Lock()
	again := l.released && l.unanswered && reason == ErrReleased
	if l.released && !again { // it ended then: say why
		ended := l.err
		l.mu.Unlock()
		return l.notHeld(ended)
	}
	var ended error // why it had ended before this Release, if it had
	if !again {
		l.released = true
		l.expireIfDue()
		ended = l.err
		l.end(reason)
	}
	l.mu.Unlock()
	defer l.leave() // also if the Observer panics

	var start time.Time
	if l.opts.observer != nil {
		start = time.Now()
	}
	err := l.releaseNodes(ctx)
	ret := err
	if ended != nil {
		ret = l.notHeld(ended)
	}
	// Too few nodes answered a Release of a held lease, for reasons a retry can fix: a
	// later Release tries them again.
	l.unanswered = ended == nil && reason == ErrReleased && retryable(err)
	if l.opts.observer != nil { // before the next goroutine in the local queue goes on
		// A holding ended by another reason than this Release (before, or in it: the
		// maximum hold time, Close) had its Lost event.
		l.observeRelease(ctx, start, ret, again, !again && (ended != nil || reason != ErrReleased))
	}
	return ret
}

// retryable reports whether err, a release's, is one of too few nodes answering for
// reasons a retry can fix.
func retryable(err error) bool {
	return errors.Is(err, ErrNoQuorum) && !errors.Is(err, ErrNotHeld) && !core.Permanent(err)
}

// opLock is a lock that a goroutine waits for on a channel, which in a testing/synctest
// bubble counts as durably blocked (waiting for a sync.Mutex does not): a Release that
// waits for an Extend, which waits for its nodes, lets the bubble's clock move on. It
// allocates only when a second caller has to wait. The zero opLock is unlocked.
type opLock struct {
	mu    sync.Mutex // held briefly, never while waiting
	held  bool
	freed chan struct{} // made by the first caller that waits; closed by unlock
}

// lock takes o, waiting while another caller holds it.
func (o *opLock) lock() {
	for {
		o.mu.Lock()
		if !o.held {
			o.held = true
			o.mu.Unlock()
			return
		}
		if o.freed == nil {
			o.freed = make(chan struct{})
		}
		freed := o.freed
		o.mu.Unlock()
		<-freed
	}
}

// unlock gives o back, and wakes the callers that wait for it.
func (o *opLock) unlock() {
	o.mu.Lock()
	o.held = false
	freed := o.freed
	o.freed = nil
	o.mu.Unlock()
	if freed != nil {
		close(freed)
	}
}

// notHeld returns ErrNotHeld for l, with the reason it ended.
func (l *Lease) notHeld(reason error) error { return notHeld{l.name, reason} }

// leave gives back the lease's place in the local queue, once.
func (l *Lease) leave() {
	if l.leaveQueue != nil {
		l.leaveOnce.Do(l.leaveQueue)
	}
}

// check reports the lease's end, if it ended.
func (l *Lease) check() error {
	if l.cluster == nil {
		return ErrNotHeld
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expireIfDue()
	if l.err != nil {
		return l.notHeld(l.err)
	}
	return nil
}

// expireIfDue ends the lease with ErrExpired if its validity is over. l.mu is held.
func (l *Lease) expireIfDue() {
	if l.err == nil && !time.Now().Before(l.until) {
		l.end(ErrExpired)
	}
}

// end records why the lease ended and closes Done, the first time. l.mu is held.
func (l *Lease) end(reason error) {
	if l.err != nil {
		return
	}
	l.err = reason
	for _, t := range []*time.Timer{l.timer, l.holdEnd} {
		if t != nil {
			t.Stop()
		}
	}
	if l.done != nil {
		close(l.done)
	}
	if reason != ErrReleased {
		if l.lost != nil {
			close(l.lost)
		}
		if l.opts.onLost != nil && reason != ErrHandedOff {
			go l.opts.onLost(l.notHeld(reason))
		}
		if l.opts.observer != nil {
			l.observeLost(reason)
		}
	}
	if l.client != nil {
		l.client.drop(l)
	}
	if !l.released { // finish leaves after its network release
		l.leave()
	}
}

// tick runs on l's timer. It ends l if its validity is over; otherwise, if an extension is
// due, it sets the timer to the end of the validity (should the extension not return in
// time) and extends l, and then sets the timer for the next extension.
func (l *Lease) tick() {
	l.mu.Lock()
	l.expireIfDue()
	if l.err != nil || l.extending {
		l.mu.Unlock()
		return
	}
	if l.extendAt.IsZero() || time.Now().Before(l.extendAt) { // an Extend moved the schedule
		l.timer.Reset(time.Until(l.nextTick()))
		l.mu.Unlock()
		return
	}
	l.extending = true
	until := l.until
	l.timer.Reset(time.Until(until))
	l.mu.Unlock()

	ctx, cancel := context.WithDeadline(context.Background(), until)
	err := l.extend(ctx, true)
	cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.extending = false
	if l.err == nil {
		l.extendAt = l.extensionDue(err)
		l.timer.Reset(time.Until(l.nextTick()))
	}
}

// nextTick is when tick should run next: at the next extension, if on and due before the
// end of the validity, or else at the end. l.mu is held.
func (l *Lease) nextTick() time.Time {
	if !l.extendAt.IsZero() && l.extendAt.Before(l.until) {
		return l.extendAt
	}
	return l.until
}

// extensionDue returns when the next extension is due: when a third of the validity is
// left, or, after a failed extension (err), one node timeout from now. l.mu is held.
func (l *Lease) extensionDue(err error) time.Time {
	if err != nil {
		return time.Now().Add(l.lock.NodeTimeout)
	}
	validity := l.lock.TTL - l.lock.Drift()
	return l.until.Add(-validity / 3)
}
