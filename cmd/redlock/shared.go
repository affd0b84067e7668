package main

import (
	"context"
	"sync"

	"github.com/go-redlock/redlock"
)

// holding is what redlock holds while the command runs: a Lease (the lock, or an
// election's leadership), or a read holding of an RWMutex (-shared).
type holding interface {
	Token() uint64         // the fencing token; 0: none (a reader's)
	Done() <-chan struct{} // closed when the holding ends otherwise than by Release
	Err() error            // why it ended; nil while held
	Release(ctx context.Context) error
}

var _ holding = (*redlock.Lease)(nil)

// readHolding is a read holding of an RWMutex (run -shared), seen as a holding. Readers
// have no fencing token. Its Release lets go once (RUnlockContext): a release that too few
// nodes answered is not tried again, and the reader's share expires after its TTL.
type readHolding struct {
	rw     *redlock.RWMutex
	events *readerEvents

	once sync.Once
	err  error // the release's
}

// Token returns 0: a reader has no fencing token.
func (h *readHolding) Token() uint64 { return 0 }

// Done returns the RWMutex's Lost channel.
func (h *readHolding) Done() <-chan struct{} { return h.rw.Lost() }

// Err returns why the holding ended, as its Lost event said, once Done has closed.
func (h *readHolding) Err() error {
	select {
	case <-h.rw.Lost():
	default:
		return nil
	}
	if err := h.events.lost(); err != nil {
		return err
	}
	return redlock.ErrLost
}

// Release lets go of the read holding the first time, and says that release's error again
// after.
func (h *readHolding) Release(ctx context.Context) error {
	h.once.Do(func() { h.err = h.rw.RUnlockContext(ctx) })
	return h.err
}

// readerEvents is the Observer of a -shared run: the abstentions' lines, and the errors of
// its read acquisition and of its loss, which an RWMutex does not return (TryRLock says
// only false; Lost closes a channel).
type readerEvents struct {
	*abstentions

	mu                  sync.Mutex
	acquireErr, lostErr error
}

// Acquired records the error of a read acquisition.
func (e *readerEvents) Acquired(ev redlock.AcquireEvent) {
	if ev.Kind == redlock.KindRWMutexRead {
		e.mu.Lock()
		e.acquireErr = ev.Err
		e.mu.Unlock()
	}
}

// Lost records why a read holding ended.
func (e *readerEvents) Lost(ev redlock.LostEvent) {
	if ev.Kind == redlock.KindRWMutexRead {
		e.mu.Lock()
		e.lostErr = ev.Reason
		e.mu.Unlock()
	}
}

// acquired returns the error of the last read acquisition.
func (e *readerEvents) acquired() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.acquireErr
}

// lost returns why the read holding ended, or nil.
func (e *readerEvents) lost() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lostErr
}

// takeShared takes the read side of the RWMutex over r's names: waiting until ctx ends, or
// in one attempt (-nonblock).
func (r *runner) takeShared(ctx context.Context) (holding, error) {
	events := &readerEvents{abstentions: r.abstain}
	opt := redlock.WithObserver(events)
	rw := r.client.NewRWMutex(r.name, opt)
	if r.several() {
		rw = r.client.NewRWMutexAll(r.names, opt)
	}
	if !r.nonblock {
		if err := rw.RLockContext(ctx); err != nil {
			return nil, err
		}
	} else if !rw.TryRLock() {
		if err := events.acquired(); err != nil {
			return nil, err
		}
		return nil, redlock.ErrHeld
	}
	return &readHolding{rw: rw, events: events}, nil
}
