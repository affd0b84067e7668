package redlock

import (
	"context"
	"slices"
	"sync"
)

// RWMutex is a reader/writer mutual exclusion lock shared by every process that uses the
// same name over the same nodes: a sync.RWMutex that works across machines. Any number of
// readers, in any processes, may hold it together, or one writer alone. Create it with
// Client.NewRWMutex, or Client.NewRWMutexAll for one over several names at once; the zero
// RWMutex is not usable, and an RWMutex must not be copied after first use (a copy panics,
// saying so, at its first call). One RWMutex is safe for use by many goroutines.
//
// Over N nodes, a reader holds the lock when a quorum of nodes grant it a share, and a
// writer when a quorum grant it the lock with no reader and no writer on it. Any two
// quorums share a node, and on each node one script decides between a writer and the
// readers, so a writer and a reader never hold the lock at once. Each reader's share is
// its own entry on the nodes, with its own expiry: a reader that crashed frees its share
// by its TTL, and leaves no count behind.
//
// Waiters take turns in the order they started waiting, readers and writers alike, across
// processes, and are woken on release without polling (see Mutex). A writer that
// waits blocks the readers that come after it, as with sync.RWMutex, so a stream of
// readers cannot starve a writer; the readers queued behind a writer are woken together
// when it unlocks, and each takes its share. One exception: the writers of one Client wait in the Client's
// own queue, and only the first of them on the nodes, so a reader of that Client that
// starts waiting after a second writer of it can go before that writer. Each holding, a
// writer's or a reader's, extends itself while held, and Lost reports a loss.
//
// The writer's side is the Mutex of the same name: a Mutex and an RWMutex of one name over
// the same nodes are one lock, whose Mutex holders count as writers. A writer's holding
// carries a fencing token (Token), from the same counter as the Leases of that name.
//
// As with sync.RWMutex, a locked RWMutex is not associated with a goroutine, a goroutine
// that holds a read lock must not lock it again for reading while a writer may be waiting
// (the writer blocks the new reader, and waits for the old one), and it must not be locked
// for writing by a goroutine that holds it for reading.
type RWMutex struct {
	w exclusive // the writer's side, whose settings the readers share

	mu      sync.Mutex
	readers []*Lease // the read holdings, oldest first
	// lost is the channel that Lost returns for several read holdings, made by its first
	// call and again after it closed; it closes when one of the holdings is lost. watched
	// are the holdings whose end a goroutine of Lost's watches: one each, until it ends.
	lost    chan struct{}
	watched map[*Lease]bool
}

var _ sync.Locker = (*RWMutex)(nil)

// NewRWMutex returns the RWMutex for the lock called name. Options are as for NewMutex,
// and apply to readers and writers alike; a bad name or option is reported by
// LockContext and RLockContext (an error matching ErrInvalid), TryLock and TryRLock
// (false), and Lock and RLock (a panic).
func (c *Client) NewRWMutex(name string, opts ...Option) *RWMutex {
	c.made("NewRWMutex")
	rw := &RWMutex{}
	rw.w.init(c, "NewRWMutex", one(name), KindRWMutexWrite, opts)
	return rw
}

// Lock locks rw for writing, waiting as long as it takes, as Mutex.Lock does; it panics
// where Mutex.Lock would.
func (rw *RWMutex) Lock() {
	rw.w.noCopy("RWMutex")
	if err := rw.w.lock(context.Background(), "RWMutex", true, true); err != nil {
		panic("redlock: Lock: " + err.Error())
	}
}

// LockContext locks rw for writing, waiting until it is locked or ctx ends, as
// Mutex.LockContext does, with the same errors.
func (rw *RWMutex) LockContext(ctx context.Context) error {
	rw.w.noCopy("RWMutex")
	return rw.w.lock(ctx, "RWMutex", true, false)
}

// TryLock tries once to lock rw for writing, without waiting, and reports whether it
// succeeded. It fails if the lock is held (by readers or a writer) or waited for.
//
// Note that while correct uses of TryLock do exist, they are rare, and use of TryLock is
// often a sign of a deeper problem in a particular use of mutexes.
func (rw *RWMutex) TryLock() bool {
	rw.w.noCopy("RWMutex")
	return rw.w.lock(context.Background(), "RWMutex", false, false) == nil
}

// Unlock unlocks rw for writing. It is a run-time error, and panics, if rw is not locked
// for writing, as with sync.RWMutex. A failure to release the lock on the nodes goes to the
// WithErrorHandler function or the WithLogger logger, as with Mutex.Unlock.
func (rw *RWMutex) Unlock() { rw.w.report("unlock", rw.UnlockContext(context.Background())) }

// UnlockContext unlocks rw for writing and returns the release's error, as
// Mutex.UnlockContext does. Like Unlock, it panics if rw is not locked for writing.
func (rw *RWMutex) UnlockContext(ctx context.Context) error {
	rw.w.noCopy("RWMutex")
	return rw.w.unlock(ctx, "redlock: Unlock of unlocked RWMutex")
}

// Token returns the fencing token of rw's write holding (see Lease.Token), or 0 if rw is
// not locked for writing.
func (rw *RWMutex) Token() uint64 {
	rw.w.noCopy("RWMutex")
	if l := rw.w.holding(); l != nil {
		return l.Token()
	}
	return 0
}

// RLock locks rw for reading, waiting as long as it takes: while a writer holds the lock
// or waits for it, and through node failures and errors no retry can fix, as Mutex.Lock
// does. It panics where Mutex.Lock would.
func (rw *RWMutex) RLock() {
	rw.w.noCopy("RWMutex")
	if err := rw.rlock(context.Background(), true, true); err != nil {
		panic("redlock: RLock: " + err.Error())
	}
}

// RLockContext locks rw for reading, waiting until it is locked or ctx ends. Its errors
// are LockContext's.
func (rw *RWMutex) RLockContext(ctx context.Context) error {
	rw.w.noCopy("RWMutex")
	return rw.rlock(ctx, true, false)
}

// TryRLock tries once to lock rw for reading, without waiting, and reports whether it
// succeeded. It fails if a writer holds the lock, if anyone waits for it, or if too few
// nodes answer.
func (rw *RWMutex) TryRLock() bool {
	rw.w.noCopy("RWMutex")
	return rw.rlock(context.Background(), false, false) == nil
}

// rlock adds a read holding to rw: if wait, waiting until it is held or ctx ends, and going
// on, if persist, through errors that no retry can fix until the Client is closed; else in
// one attempt. Readers take no place in the local queue: they hold the lock together. If
// the Client was closed meanwhile, it lets go of the holding and returns an error that
// matches ErrClosed.
func (rw *RWMutex) rlock(ctx context.Context, wait, persist bool) error {
	if err := rw.w.usable("RWMutex"); err != nil {
		return err
	}
	defer rw.w.client.end(rw.w.client.begin())
	l := rw.w.newLease(KindRWMutexRead)
	l.lock.Persist = persist
	g, err := rw.w.client.acquire(ctx, "rlock", l, nil, wait)
	if err != nil {
		return err
	}
	if err := l.start(g); err != nil {
		return err
	}
	rw.mu.Lock()
	rw.readers = append(rw.readers, l)
	rw.mu.Unlock()
	return nil
}

// RUnlock undoes a single RLock call: it lets go of one of rw's read holdings. It is a
// run-time error, and panics, if rw is not locked for reading. A failure to release goes
// where Unlock's does.
func (rw *RWMutex) RUnlock() { rw.w.report("runlock", rw.RUnlockContext(context.Background())) }

// RUnlockContext undoes a single RLock call and returns the release's error, as
// UnlockContext does. Like RUnlock, it panics if rw is not locked for reading.
func (rw *RWMutex) RUnlockContext(ctx context.Context) error {
	rw.w.noCopy("RWMutex")
	rw.mu.Lock()
	n := len(rw.readers)
	if n == 0 {
		rw.mu.Unlock()
		panic("redlock: RUnlock of unlocked RWMutex")
	}
	l := rw.readers[n-1]
	rw.readers[n-1] = nil
	rw.readers = rw.readers[:n-1]
	if readerLost(l) { // before its watcher saw it, if it has one
		rw.closeLost()
	}
	rw.mu.Unlock()
	return l.Release(ctx)
}

// RLocker returns a sync.Locker whose Lock and Unlock call rw.RLock and rw.RUnlock.
func (rw *RWMutex) RLocker() sync.Locker { return (*rlocker)(rw) }

type rlocker RWMutex

func (r *rlocker) Lock()   { (*RWMutex)(r).RLock() }
func (r *rlocker) Unlock() { (*RWMutex)(r).RUnlock() }

// Lost returns a channel that is closed if a holding that rw has now is lost (see
// Mutex.Lost): its write holding, or any of its read holdings. Unlock and RUnlock do not
// close it. When rw is not locked it returns a closed channel.
func (rw *RWMutex) Lost() <-chan struct{} {
	rw.w.noCopy("RWMutex")
	if w := rw.w.holding(); w != nil {
		return w.lostCh()
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	switch len(rw.readers) {
	case 0:
		return closedChan()
	case 1:
		return rw.readers[0].lostCh()
	}
	if slices.ContainsFunc(rw.readers, readerLost) { // before its watcher saw it, if it has one
		rw.closeLost()
		return closedChan()
	}
	if rw.lost == nil || isClosed(rw.lost) {
		rw.lost = make(chan struct{})
	}
	// One goroutine per holding, until the holding ends: the first loss closes lost.
	for _, l := range rw.readers {
		if rw.watched[l] {
			continue
		}
		if rw.watched == nil {
			rw.watched = make(map[*Lease]bool)
		}
		rw.watched[l] = true
		go func() {
			<-l.Done()
			rw.mu.Lock()
			defer rw.mu.Unlock()
			delete(rw.watched, l)
			if slices.Contains(rw.readers, l) && readerLost(l) {
				rw.closeLost()
			}
		}()
	}
	return rw.lost
}

// closeLost closes the channel that Lost returns for several read holdings, if it is
// open. rw.mu is held.
func (rw *RWMutex) closeLost() {
	if rw.lost != nil && !isClosed(rw.lost) {
		close(rw.lost)
	}
}

// readerLost reports whether l, a read holding, ended otherwise than by its release.
func readerLost(l *Lease) bool {
	err := l.reason()
	return err != nil && err != ErrReleased
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
