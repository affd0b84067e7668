package redlock

import (
	"context"
	"sync"
)

// Mutex is a mutual exclusion lock shared by every process that uses the same name over the
// same nodes: a sync.Locker that works across machines. Create it with Client.NewMutex; the
// zero Mutex is not usable, and a Mutex must not be copied after first use: a copy panics,
// saying so, at its first call (as a copied strings.Builder does).
//
// One Mutex is safe for use by many goroutines. Goroutines of one Client that wait for the
// same name, through one Mutex or several, queue locally in FIFO order, and only the first
// of them waits in Redis, where the waiters of all processes queue in the order they
// started waiting: a Mutex that unlocks and locks again goes behind those already waiting
// (see core.Cluster.AcquireWait). A waiter does not poll for the release where the nodes
// offer notifications (core.Subscriber): the release wakes the first waiter, which then
// takes the lock with one more round trip. It calls again
// every refresh interval, which core derives from the node timeout (see
// core.Cluster.AcquireWait), to keep its place.
//
// While locked, the Mutex extends its lock before it expires (when about a third of the
// validity is left). If an extension fails until the validity runs out, or the nodes no
// longer hold the lock, the lock is lost: Lost's channel closes and the WithLostHandler
// function is called. A Mutex hands out a fencing token (Token) only if made
// WithFencing(true); a Lease always does.
//
// As with sync.Mutex, a locked Mutex is not associated with a goroutine: one goroutine may
// lock it and another unlock it.
type Mutex struct {
	x exclusive
}

var _ sync.Locker = (*Mutex)(nil)

// NewMutex returns the Mutex for the lock called name. Options apply to this Mutex (TTL,
// node timeout, retry backoff, restart guard, WithMaxHold, WithLogger, WithLostHandler,
// WithErrorHandler...); auto-extension is always on, and WithAutoExtend(false) is refused.
// A bad name or option is reported by LockContext (an error matching ErrInvalid), TryLock
// (false) and Lock (a panic: it has no other way to say it).
func (c *Client) NewMutex(name string, opts ...Option) *Mutex {
	c.made("NewMutex")
	m := &Mutex{}
	m.x.init(c, "NewMutex", one(name), KindMutex, opts)
	return m
}

// Lock locks m, waiting as long as it takes: through other holders, through node failures,
// and through errors that no retry can fix (a script error, CROSSSLOT, a closed driver
// client...), retrying with backoff. It returns only once m is locked. With WithLogger, a
// wait that keeps failing for other reasons than a holder is logged, with the reason (see
// WithLogger). It panics if the Mutex was created with a bad name or option, or if its
// Client is closed (before or while it waits): it has no other way to say so.
func (m *Mutex) Lock() {
	m.x.noCopy("Mutex")
	if err := m.x.lock(context.Background(), "Mutex", true, true); err != nil {
		panic("redlock: Lock: " + err.Error())
	}
}

// LockContext locks m, waiting until it is locked or ctx ends. It returns nil once m is
// locked; otherwise ctx's error (matching context.Canceled or DeadlineExceeded, and the last
// attempt's error, ErrHeld say), or at once an error that no retry can fix (as Acquire
// does: ErrInvalid for a bad name or option, ErrClosed...). On error m is not locked by
// this call. Every error names the lock.
func (m *Mutex) LockContext(ctx context.Context) error {
	m.x.noCopy("Mutex")
	return m.x.lock(ctx, "Mutex", true, false)
}

// TryLock tries to lock m once, without waiting, and reports whether it succeeded. It fails
// if another goroutine of this Client holds or waits for the name, if another owner holds
// it or waits for it (in any process), or if too few nodes answer (within the node timeout).
//
// Note that while correct uses of TryLock do exist, they are rare, and use of TryLock is
// often a sign of a deeper problem in a particular use of mutexes.
func (m *Mutex) TryLock() bool {
	m.x.noCopy("Mutex")
	return m.x.lock(context.Background(), "Mutex", false, false) == nil
}

// Unlock unlocks m. It is a run-time error, and panics with "redlock: unlock of unlocked
// mutex", if m is not locked, as with sync.Mutex. A failure to release the lock on the nodes
// (they are down, or the lock was already lost) is not a panic: it goes to the
// WithErrorHandler function, or else to the WithLogger logger, and the lock's keys expire by
// their TTL. Either way m is unlocked when Unlock returns.
//
// After the Client's Close, which released the lock, Unlock passes on an error that matches
// ErrNotHeld and ErrClosed.
func (m *Mutex) Unlock() { m.x.report("unlock", m.UnlockContext(context.Background())) }

// UnlockContext unlocks m and returns the release's error: one matching ErrNotHeld if the
// lock had been lost (its validity ran out, or another owner held it on too many nodes),
// or a *QuorumError if too few nodes answered (their keys expire by TTL); see
// Lease.Release. The release is attempted even if ctx is already cancelled. m is unlocked when it
// returns, whatever the error. Like Unlock, it panics if m is not locked.
func (m *Mutex) UnlockContext(ctx context.Context) error {
	m.x.noCopy("Mutex")
	return m.x.unlock(ctx, "redlock: unlock of unlocked mutex")
}

// Token returns the fencing token of m's holding (see Lease.Token), or 0 if m is not locked
// or was made without WithFencing(true). Tokens of a name's Mutexes, RWMutex writers and
// Leases come from one counter, and strictly increase from one holder to the next.
func (m *Mutex) Token() uint64 {
	m.x.noCopy("Mutex")
	if l := m.x.holding(); l != nil {
		return l.Token()
	}
	return 0
}

// Lost returns a channel that is closed if the lock that m holds now is lost: its
// extensions failed until the validity ran out, or the nodes no longer hold it. Unlock does
// not close it, unless the validity had run out by the time Unlock released the lock (the
// holding was lost then, and the WithLostHandler function is called too). When m is not
// locked it returns a closed channel.
func (m *Mutex) Lost() <-chan struct{} {
	m.x.noCopy("Mutex")
	if l := m.x.holding(); l != nil {
		return l.lostCh()
	}
	return closedChan()
}
