package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-redlock/redlock/core"
)

// Lease is a held lock, returned by Client.Acquire and Client.TryAcquire. It stays held
// until Release, or until Until passes unless Extend pushes it further. A Lease is safe
// for concurrent use; Extend and Release calls on one Lease run one at a time. Its zero
// value holds nothing.
type Lease struct {
	cluster *core.Cluster
	name    string
	opts    settings
	lock    core.Lock
	fence   uint64

	op sync.Mutex // serializes Extend and Release

	mu       sync.Mutex // guards the fields below
	until    time.Time
	released bool
}

func (l *Lease) granted(g core.Grant) {
	l.fence = g.Fence
	l.until = g.Until
}

// Name returns the lock's name.
func (l *Lease) Name() string { return l.name }

// Token returns the fencing token: it strictly increases from one holder of this name to the
// next, across all nodes, under the assumptions that make the lock exclusive. Hand it to
// the storage you write, and have the storage refuse a token lower than the highest it has
// seen. Tokens are large (seeded from the server clock in microseconds); compare them, do
// not count on their spacing.
func (l *Lease) Token() uint64 { return l.fence }

// Until returns the end of the lease's validity: the attempt's start + TTL - drift
// allowance, on the monotonic clock, or after an Extend that call's start + TTL - drift.
// Past it the lease must be treated as lost.
func (l *Lease) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Extend resets the lock's TTL on the nodes that still hold it, moving Until to this call's
// start + TTL - drift. It never re-creates the lock on a node that lost it.
//
// Errors: ErrNotHeld if the lease was released, its validity already ran out, or too many
// nodes no longer hold it (the lease is then lost for good); a *QuorumError if too few nodes
// answered (the lease stays valid until its previous Until, and Extend may be retried);
// ctx's error if ctx ended.
func (l *Lease) Extend(ctx context.Context) error {
	l.op.Lock()
	defer l.op.Unlock()
	if err := l.check("extend"); err != nil {
		return err
	}
	until, err := l.cluster.Extend(ctx, &l.lock)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.until = until
	case errors.Is(err, ErrNotHeld):
		l.until = time.Time{}
	}
	return err
}

// Release lets the lock go on every node and wakes its waiters. It is attempted even if ctx
// is already cancelled (each node is still bounded by the node timeout), so that a lock is
// not left behind until its TTL. Whatever it returns, the Lease no longer holds the lock.
//
// Errors: ErrNotHeld if the lease was already released, or its validity had run out before
// this call (the work it protected may have overlapped another holder's), or the nodes no
// longer held it; a *QuorumError if too few nodes answered: their copies expire by TTL.
func (l *Lease) Release(ctx context.Context) error {
	l.op.Lock()
	defer l.op.Unlock()
	err := l.check("release")
	if l.cluster == nil || errors.Is(err, errReleased) {
		return err
	}
	rerr := l.cluster.Release(ctx, &l.lock)
	l.mu.Lock()
	l.released = true
	l.mu.Unlock()
	if err != nil {
		return err
	}
	return rerr
}

var errReleased = fmt.Errorf("%w: lease already released", ErrNotHeld)

// check returns ErrNotHeld, with the reason, if the lease cannot be extended or released.
func (l *Lease) check(op string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.cluster == nil:
		return fmt.Errorf("%w: zero Lease", ErrNotHeld)
	case l.released:
		return errReleased
	case l.until.IsZero():
		return fmt.Errorf("%w: lease %q was lost", ErrNotHeld, l.name)
	case !time.Now().Before(l.until):
		return fmt.Errorf("%w: lease %q expired %v before %s", ErrNotHeld, l.name, time.Since(l.until).Round(time.Millisecond), op)
	}
	return nil
}
