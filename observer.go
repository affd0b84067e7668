package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/go-redlock/redlock/core"
)

// Observer receives the events of a Client's locks, for metrics and tracing (the module
// github.com/go-redlock/redlock/contrib/otel implements one over OpenTelemetry). Set one
// with WithObserver. There is one method per kind of event:
//
//   - Waiting: an acquisition that waits began (Acquire, Do, Lock, LockContext, RLock,
//     RLockContext, their All forms, a Semaphore's Acquire, an Election's Campaign), before
//     it queues behind other goroutines of the Client; its Acquired event, whose Waiting
//     is set, ends it. The calls between the two are the waits in progress.
//   - Acquired: an acquisition ended, held or not (Acquire, TryAcquire, Do, Lock,
//     LockContext, TryLock, RLock, RLockContext, TryRLock).
//   - Released: a holding was let go on the nodes (Release, Unlock, RUnlock, the end of Do,
//     or the end of the maximum hold time), once per holding, and once more for each
//     Release of a Lease called again after one that too few nodes answered.
//   - Extended: an extension ended, automatic or by Lease.Extend, successful or not.
//   - Lost: a holding ended otherwise than by a release: its validity ran out (ErrExpired),
//     the nodes no longer held it (ErrLost), its maximum hold time came (ErrMaxHold), or
//     its Client was closed (ErrClosed; Close releases it), or it was handed off
//     (ErrHandedOff: Lease.HandOff).
//   - NodeError: a call to a node failed, or the node abstained under the restart guard:
//     in any operation, successful or not, and in the requests sent in the background
//     (letting go of a failed attempt's keys, a waiter leaving the queue). An acquisition
//     does not call a node whose last call failed while an earlier call to it is still
//     under way, and reports nothing for it: while a node is down, a waiter's attempts
//     report it about once per node timeout, not once per attempt.
//
// A Semaphore and an Election take their locks as Client.Acquire and TryAcquire do, so
// their events are those of Leases (KindLease), under the Semaphore's or Election's name
// (a Semaphore's permits and its waiters' lock alike), including the attempts a Semaphore
// makes and abandons while it waits.
//
// The library calls these methods synchronously, from the goroutine that made the call
// (Acquire's caller, say) or from its own goroutines (a holding's extension and expiry
// timers), so an Observer must be safe for concurrent use and must return quickly, without
// blocking: a slow Observer delays the lock operation it reports. Some events are reported
// while the holding they are about is locked internally (Lost, for one), so an Observer
// must not call back into the library. If Acquired or Released panics, the lock it reports
// is let go first, on the nodes and in the Client, and the panic then reaches the caller.
// Events are reported in order for one holding (Acquired first, then its Extended and Lost
// events, Released last). A NodeError is reported as the node's call ends, from the
// goroutine that made it: before the event of its operation when the operation waited for
// that node, and after it otherwise (a node that timed out after a quorum had answered, or
// one the operation did not wait for because its last call had failed too).
//
// Without an Observer (the default) none of this costs more than a nil check: no event is
// built and nothing is allocated. To implement only some of the methods, embed NopObserver,
// which also keeps an implementation compiling if methods are added for new events.
type Observer interface {
	// Waiting reports the start of an acquisition that waits.
	Waiting(WaitEvent)
	// Acquired reports the end of an acquisition, successful or not.
	Acquired(AcquireEvent)
	// Released reports the release of a holding on the nodes, and each release tried
	// again (a Lease's Release called again after one that too few nodes answered).
	Released(ReleaseEvent)
	// Extended reports the end of an extension, successful or not.
	Extended(ExtendEvent)
	// Lost reports the end of a holding otherwise than by a release.
	Lost(LostEvent)
	// NodeError reports one failed call to a node, or its abstention.
	NodeError(NodeEvent)
}

// NopObserver is an Observer that does nothing. Embed it in a type that implements only some
// of Observer's methods.
type NopObserver struct{}

// Waiting does nothing.
func (NopObserver) Waiting(WaitEvent) {}

// Acquired does nothing.
func (NopObserver) Acquired(AcquireEvent) {}

// Released does nothing.
func (NopObserver) Released(ReleaseEvent) {}

// Extended does nothing.
func (NopObserver) Extended(ExtendEvent) {}

// Lost does nothing.
func (NopObserver) Lost(LostEvent) {}

// NodeError does nothing.
func (NopObserver) NodeError(NodeEvent) {}

var _ Observer = NopObserver{}

// Kind is the kind of lock an event is about.
type Kind uint8

// The kinds of lock.
const (
	// KindLease is a Lease: Client.Acquire, TryAcquire and Do.
	KindLease Kind = iota + 1
	// KindMutex is a Mutex.
	KindMutex
	// KindRWMutexWrite is an RWMutex locked for writing.
	KindRWMutexWrite
	// KindRWMutexRead is one read holding of an RWMutex.
	KindRWMutexRead
)

// String returns "lease", "mutex", "rwmutex_write" or "rwmutex_read" (for metric
// attributes), or "unknown".
func (k Kind) String() string {
	switch k {
	case KindLease:
		return "lease"
	case KindMutex:
		return "mutex"
	case KindRWMutexWrite:
		return "rwmutex_write"
	case KindRWMutexRead:
		return "rwmutex_read"
	}
	return "unknown"
}

// Outcome is how an acquisition ended.
type Outcome uint8

// The outcomes of an acquisition.
const (
	// OutcomeOK: the lock is held.
	OutcomeOK Outcome = iota
	// OutcomeHeld: another owner holds the lock or waits for it (a TryAcquire, TryLock or
	// TryRLock that made its one attempt, or found another goroutine of the Client there).
	OutcomeHeld
	// OutcomeTimeout: the caller's context ended (its deadline passed, or it was
	// cancelled) before the lock was held.
	OutcomeTimeout
	// OutcomeError: any other error: too few nodes (ErrNoQuorum), ErrExpired, ErrClosed,
	// an error no retry can fix...
	OutcomeError
)

// String returns "ok", "held", "timeout" or "error" (for metric attributes), or "unknown".
func (o Outcome) String() string {
	switch o {
	case OutcomeOK:
		return "ok"
	case OutcomeHeld:
		return "held"
	case OutcomeTimeout:
		return "timeout"
	case OutcomeError:
		return "error"
	}
	return "unknown"
}

// outcomeOf classifies an acquisition's error.
func outcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimeout
	case errors.Is(err, ErrHeld):
		return OutcomeHeld
	}
	return OutcomeError
}

// WaitEvent reports the start of an acquisition that waits (see Observer).
type WaitEvent struct {
	// Context is the call's context (context.Background for Lock and RLock).
	Context context.Context
	Name    string // the lock's name
	Kind    Kind
	// Start is when the call began: the AcquireEvent that ends it has the same Start.
	Start time.Time
}

// AcquireEvent reports the end of an acquisition (see Observer).
type AcquireEvent struct {
	// Context is the call's context (context.Background for Lock, RLock, TryLock and
	// TryRLock): the parent of a span, say. It may have ended.
	Context context.Context
	Name    string // the lock's name
	Kind    Kind
	// Start is when the call began, before it queued behind other goroutines of the Client
	// that wait for the same name.
	Start time.Time
	// Wait is how long the call took, from Start until the lock was held or the call gave
	// up: the time spent waiting for the lock, when it had to.
	Wait time.Duration
	// Attempts is the number of attempts made on the nodes: 1 if the first took the lock
	// (a waiter woken by a release takes it with an attempt of its own), 0 if
	// the call gave up before its first attempt (its context ended while other goroutines
	// of the Client held or waited for the name, or TryAcquire found them there). A wait
	// that ends with its context does not count an attempt that the context's end cut
	// short.
	Attempts int
	// Waiting is true for an acquisition that waits (Acquire, Lock...), which a WaitEvent
	// began; false for one attempt (TryAcquire, TryLock, TryRLock).
	Waiting bool
	Outcome Outcome
	// Err is the error the call returned (or, for TryLock and TryRLock, would have): nil
	// when Outcome is OutcomeOK.
	Err error
}

// ReleaseEvent reports the release of a holding on the nodes (see Observer). There is one
// per holding, from its first Release (or Unlock, RUnlock), or from the end of its maximum
// hold time, which releases it, and one more for each Release called again after one that
// too few nodes answered, which calls the nodes again (see Lease.Release); a later
// Release, which reaches no node, reports nothing.
type ReleaseEvent struct {
	// Context is the call's context (context.Background for Unlock, RUnlock and the
	// release at the maximum hold time).
	Context context.Context
	Name    string // the lock's name
	Kind    Kind
	// Start is when the release began, and Duration how long it took on the nodes.
	Start    time.Time
	Duration time.Duration
	// Hold is how long the lock was held: from the end of its acquisition to Start. A
	// holding that was lost before its release counts until the release.
	Hold time.Duration
	// Err is what Release returned: nil; an error that matches ErrNotHeld and the reason
	// the holding had already ended (ErrLost, ErrExpired) or the nodes no longer held it;
	// or a *QuorumError, if too few nodes answered. For the release at the maximum hold
	// time, it is the release's own error (the Lost event before it has the reason).
	Err error
	// Retry is set for a Release called again after one that too few nodes answered: the
	// holding's first ReleaseEvent came before, and Hold counts to this call.
	Retry bool
	// Lost is set when the holding had ended before its release, and a LostEvent said so:
	// its validity ran out, the nodes no longer held it, or (just before this event) its
	// maximum hold time came or its Client was closed. A holding ends once: at its
	// LostEvent, or else at its first ReleaseEvent.
	Lost bool
}

// ExtendEvent reports the end of an extension (see Observer): one that Lease.Extend made,
// or an automatic one (a Mutex's, an RWMutex's, Do's, a Lease's with WithAutoExtend). An
// Extend call on a holding that had already ended reaches no node and reports nothing.
type ExtendEvent struct {
	// Context is the Extend call's context; for an automatic extension, a background
	// context with the holding's validity as its deadline.
	Context context.Context
	Name    string // the lock's name
	Kind    Kind
	// Auto is true for an automatic extension.
	Auto bool
	// Start is when the extension began, and Duration how long it took.
	Start    time.Time
	Duration time.Duration
	// Until is the holding's new end of validity; zero if Err is not nil.
	Until time.Time
	// Err is nil, or what Extend returned: one that matches ErrNotHeld and ErrLost (the
	// nodes no longer hold the lock: a Lost event comes before this one), a *QuorumError
	// (too few nodes answered: an automatic extension tries again, until the validity runs
	// out), or the context's error.
	Err error
}

// LostEvent reports a holding that ended otherwise than by a release (see Observer).
type LostEvent struct {
	Name string // the lock's name
	Kind Kind
	// Reason is why the holding ended: ErrExpired (its validity ran out without an
	// extension; also when a Release came too late), ErrLost (an extension found that the
	// nodes no longer hold it), ErrMaxHold (WithMaxHold), ErrClosed (Client.Close
	// released it) or ErrHandedOff (Lease.HandOff: the lock went on, held).
	Reason error
	// Hold is how long the lock was held: from the end of its acquisition to its loss.
	Hold time.Duration
}

// NodeEvent reports one failed call to a node, or its abstention (see Observer), in any
// operation on a lock, successful or not: an attempt of an acquisition, an extension, a
// release, or a request sent in the background. A call that ended because the caller's
// context did says nothing of its node, and is not reported.
type NodeEvent struct {
	Name string // the lock's name
	Kind Kind
	// Op is the operation: "acquire", "extend", "release" (also a failed attempt's release
	// and a waiter leaving the queue, in the background), or "raise" (the round that raises
	// the fencing counter on a quorum, part of an acquisition).
	Op   string
	Node string // the node's name (its String(), such as "10.0.0.1:6379")
	Err  error  // the node's error
	// Abstained is true when the node abstained under the restart guard: Err matches
	// ErrRestarted. Such a node did not fail; it declined to vote.
	Abstained bool
	// TimedOut is true when the node did not answer within the node timeout: Err matches
	// ErrNodeTimeout.
	TimedOut bool
}

// WithObserver sets the Observer that receives the locks' events (see Observer). Default
// none. Given to New it observes every lock of the Client; given to Acquire, TryAcquire,
// Do, NewMutex or NewRWMutex it replaces the Client's for that call or lock, and
// WithObserver(nil) there turns observation off.
func WithObserver(o Observer) Option { return func(s *settings) { s.observer = o } }

// acquisition observes one acquisition call. It is nil, and its methods do nothing, when
// no Observer is set, so that the calls pay only a nil check.
type acquisition struct {
	obs   Observer
	ctx   context.Context
	name  string
	kind  Kind
	start time.Time
	wait  bool // the acquisition waits: a WaitEvent began it
	// failed counts the attempts whose failure core reported (core.Lock.Failed), and last
	// is the last of those errors, whose node errors went out already.
	failed int
	last   error
	log    func(error) // waitLog's function, if any
}

// observeAcquire starts observing an acquisition of the lock called name by a call with
// ctx that waits if wait (and then reports its start), or returns nil if s sets no
// Observer.
func observeAcquire(ctx context.Context, s *settings, name string, kind Kind, wait bool) *acquisition {
	if s.observer == nil {
		return nil
	}
	a := &acquisition{obs: s.observer, ctx: ctx, name: name, kind: kind, start: time.Now(), wait: wait}
	if wait {
		a.obs.Waiting(WaitEvent{Context: ctx, Name: name, Kind: kind, Start: a.start})
	}
	return a
}

// failedHook returns the function for core.Lock.Failed: log (which may be nil), and with
// a, a's count of failed attempts and their node errors.
func (a *acquisition) failedHook(log func(error)) func(error) {
	if a == nil {
		return log
	}
	a.log = log
	return a.attemptFailed
}

// attemptFailed runs after each failed attempt of AcquireWait but the last, in its
// goroutine.
func (a *acquisition) attemptFailed(err error) {
	a.failed++
	a.last = err
	if a.log != nil {
		a.log(err)
	}
}

// queued reports an acquisition that ended with err before its first attempt.
func (a *acquisition) queued(err error) {
	if a != nil {
		a.report(nil, nil, err, 0)
	}
}

// once reports the end of an acquisition of l that made one attempt (core.Acquire).
func (a *acquisition) once(l *Lease, g *core.Held, err error) {
	if a != nil {
		a.report(l, g, err, 1)
	}
}

// waited reports the end of an acquisition of l by core.AcquireWait, with failedHook's
// function as its Lock.Failed.
func (a *acquisition) waited(l *Lease, g *core.Held, err error) {
	if a == nil {
		return
	}
	attempts := a.failed
	if err != nil && (a.last == nil || !errors.Is(err, a.last)) {
		// The last attempt's error is not one that attemptFailed saw: it is the final one,
		// which ended the wait.
		attempts++
	}
	a.report(l, g, err, attempts)
}

// report sends the AcquireEvent: held as g by l, or failed with err after attempts.
func (a *acquisition) report(l *Lease, g *core.Held, err error, attempts int) {
	now := time.Now()
	ev := AcquireEvent{
		Context:  a.ctx,
		Name:     a.name,
		Kind:     a.kind,
		Start:    a.start,
		Wait:     now.Sub(a.start),
		Attempts: attempts,
		Waiting:  a.wait,
		Outcome:  outcomeOf(err),
		Err:      err,
	}
	if g != nil {
		ev.Attempts = g.Attempts
		l.acquired = now
	}
	a.obs.Acquired(ev)
}

// nodeFailed sends the NodeEvent of a failed node call of l (see core.Lock.NodeFailed).
func (l *Lease) nodeFailed(op string, e core.NodeError) {
	l.opts.observer.NodeError(NodeEvent{
		Name:      l.name,
		Kind:      l.kind,
		Op:        op,
		Node:      e.Node,
		Err:       e.Err,
		Abstained: errors.Is(e.Err, ErrRestarted),
		TimedOut:  errors.Is(e.Err, ErrNodeTimeout),
	})
}

// observeRelease reports l's release, begun at start; ret is what Release returns, retry
// whether an earlier Release was reported, lost whether a Lost event ended the holding.
func (l *Lease) observeRelease(ctx context.Context, start time.Time, ret error, retry, lost bool) {
	o := l.opts.observer
	o.Released(ReleaseEvent{
		Context:  ctx,
		Name:     l.name,
		Kind:     l.kind,
		Start:    start,
		Duration: time.Since(start),
		Hold:     start.Sub(l.acquired),
		Err:      ret,
		Retry:    retry,
		Lost:     lost,
	})
}

// observeExtend reports l's extension, begun at start: until and err as Extend returns
// them.
func (l *Lease) observeExtend(ctx context.Context, start time.Time, auto bool, until time.Time, err error) {
	o := l.opts.observer
	if err != nil {
		until = time.Time{}
	}
	o.Extended(ExtendEvent{
		Context:  ctx,
		Name:     l.name,
		Kind:     l.kind,
		Auto:     auto,
		Start:    start,
		Duration: time.Since(start),
		Until:    until,
		Err:      err,
	})
}

// observeLost reports that l ended with reason, not by a release. l.mu is held.
func (l *Lease) observeLost(reason error) {
	l.opts.observer.Lost(LostEvent{Name: l.name, Kind: l.kind, Reason: reason, Hold: time.Since(l.acquired)})
}
