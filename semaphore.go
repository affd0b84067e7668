package redlock

import (
	"context"
	"fmt"

	"github.com/go-redlock/redlock/core"
)

// MaxPermits is the most permits a Semaphore may have: each acquisition and release runs
// one script over every permit's key on each node.
const MaxPermits = 1024

// Semaphore lets at most its number of permits, K, hold it at once, across every process
// that uses the same name and K over the same nodes. Create it with Client.NewSemaphore;
// the zero Semaphore is not usable. One Semaphore is safe for use by many goroutines.
//
// Its K permits are K locks under one queue (see core.NewSemaphoreKeys: no key of a lock,
// under any name, is one of them). A holder holds one permit: a Lease, named as the
// Semaphore, that a quorum of the nodes granted for that same permit, so at most K hold
// at once, over N nodes as a Mutex is. Its fencing token comes from one counter for the
// Semaphore: it is larger than the token of every holder granted before its acquisition
// began, whichever permit that one held (so the holders of one permit have increasing
// tokens). Waiters take turns in the order they started waiting, across processes: with f
// permits free, a node grants one only to a caller with fewer than f live waiters ahead
// of it, and a release wakes the first waiters, one per permit it frees, as a Mutex's
// release wakes the first.
//
// Every holder must count the same K: the nodes record it (under the name's lock key
// followed by ":permits"), and an acquisition that counts another number fails with an
// error that matches ErrInvalid while the record is in use: while a node has a permit of
// its count held, or a waiter waiting. Once none has (every holder of the old count let
// go, or its permits' TTLs ran out), a Semaphore of a new K takes over: a rolling deploy
// that changes K succeeds once the processes of the old count hold and wait no more.
type Semaphore struct {
	client  *Client
	name    string
	permits int
	set     settings // the options applied
	keys    core.Keys
	err     error
}

// NewSemaphore returns the Semaphore called name with permits permits. Options apply to
// each permit's Lease (TTL, node timeout, restart guard, auto-extension, maximum hold
// time, lost handler, observer...), and WithRetry and WithLogger to Acquire's waits (as
// to Client.Acquire's). WithErrorHandler does not apply: Acquire and TryAcquire return
// their errors. A bad name, permits below 1 or above MaxPermits, or a bad option
// (WithErrorHandler among them), is reported by Acquire and TryAcquire, as an error that
// matches ErrInvalid and names the Semaphore.
func (c *Client) NewSemaphore(name string, permits int, opts ...Option) *Semaphore {
	c.made("NewSemaphore")
	s := &Semaphore{client: c, name: name, permits: permits}
	var err error
	s.set, err = c.opts.forCall("NewSemaphore", optErrorHandler|optFencing, opts)
	switch {
	case err != nil:
	case checkName(name) != nil:
		err = checkName(name)
	case permits < 1 || permits > MaxPermits:
		err = fmt.Errorf("%w: %d permits: a semaphore has from 1 to %d", ErrInvalid, permits, MaxPermits)
	}
	if err != nil {
		s.err = &lockError{"NewSemaphore", name, err}
		return s
	}
	s.keys = core.NewSemaphoreKeys(s.set.prefix, name, permits)
	return s
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits returns the number of permits.
func (s *Semaphore) Permits() int { return s.permits }

// TryAcquire makes one attempt to take a permit, and returns its Lease, whose Name is the
// Semaphore's.
//
// Errors: one matching ErrHeld if every permit is held (or waiters queue for the free
// ones); one matching ErrInvalid for a bad name, number of permits or option, or if
// another holder counts another number of permits; ErrClosed after the Client's Close;
// otherwise the attempt's error (ErrNoQuorum, say), or ctx's. Every error names the
// Semaphore.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) {
	return s.acquire(ctx, false)
}

// Acquire takes a permit, waiting while all are held and retrying through node failures
// (nodes down, or abstaining under the restart guard), until it succeeds or ctx ends, and
// returns its Lease. Waiters take turns in the order they started waiting, across
// processes.
//
// When ctx ends first the error matches ctx's error and the last attempt's (ErrHeld,
// ErrNoQuorum...). An error that no retry can fix ends it at once, as for Client.Acquire:
// ErrInvalid for a bad name, number of permits or option, or for another count of permits
// on the nodes; ErrClosed after the Client's Close (also while it waits); a *QuorumError
// in which too many nodes fail for good. Every error names the Semaphore.
func (s *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	return s.acquire(ctx, true)
}

// acquire takes a permit: if wait, waiting in turn.
func (s *Semaphore) acquire(ctx context.Context, wait bool) (*Lease, error) {
	if s.client == nil {
		return nil, &lockError{"acquire", s.name, fmt.Errorf("%w: zero Semaphore (use Client.NewSemaphore)", ErrInvalid)}
	}
	if s.err != nil {
		return nil, s.err
	}
	return s.client.acquireLease(ctx, s.client.leaseOf(s.name, KindLease, s.keys, s.set), wait)
}
