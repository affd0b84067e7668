package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/go-redlock/redlock/core"
)

// MaxPermits is the most permits a Semaphore may have: its first waiter waits on every
// permit at once (see Semaphore).
const MaxPermits = 64

// Semaphore lets at most its number of permits, K, hold it at once, across every process
// that uses the same name and K over the same nodes. Create it with Client.NewSemaphore;
// the zero Semaphore is not usable. One Semaphore is safe for use by many goroutines.
//
// Each permit is a lock of its own, which the Semaphore keeps for itself: its keys are
// those of the lock called name followed by ":permit/<i>", for i from 0 to K-1 (see
// core.NewPartKeys), so that no lock, Mutex or other primitive that a user can name is one
// of them, and every name that a Mutex may have a Semaphore may have. A holder holds one
// permit: a Lease of that lock, named as the Semaphore, with its fencing token (which
// increases from one holder of the same permit to the next). So at most K hold at once, as
// each permit's lock is exclusive, over N nodes as a Mutex is. An acquisition tries the
// permits one after another, from a random one, and takes the first that is free. When all
// are held it waits in turn: waiters queue on the Semaphore's waiters' lock (its keys are
// the name's followed by ":turn"), in the order they started waiting across processes, and
// the first waits on every permit at once, so that a released permit is handed to it (see
// Mutex: no polling where the nodes offer notifications) and no newcomer can take it
// first. It then lets the next waiter be first.
//
// Every holder must count the same K: each acquisition checks it against a record on the
// nodes (the name's lock key followed by ":permits", kept for an hour after the last
// acquisition), and fails with an error that matches ErrInvalid if another holder
// recorded another number.
type Semaphore struct {
	client  *Client
	name    string
	permits int
	set     settings    // the options applied
	keys    core.Keys   // of name: the permits record is keys.Lock + ":permits"
	slots   []core.Keys // permit i's lock
	turn    core.Keys   // the waiters' lock
	err     error
}

// NewSemaphore returns the Semaphore called name with permits permits. Options apply to
// each permit's Lease (TTL, node timeout, restart guard, auto-extension, maximum hold
// time, lost handler, observer...) and to the waiters' lock, and WithRetry and WithLogger
// to Acquire's waits (as to Client.Acquire's). WithErrorHandler does not apply: Acquire
// and TryAcquire return their errors. A bad name, permits below 1 or above MaxPermits, or a
// bad option (WithErrorHandler among them), is reported by Acquire and TryAcquire, as an
// error that matches ErrInvalid and names the Semaphore.
func (c *Client) NewSemaphore(name string, permits int, opts ...Option) *Semaphore {
	c.made("NewSemaphore")
	s := &Semaphore{client: c, name: name, permits: permits}
	var err error
	s.set, err = c.opts.forCall("NewSemaphore", optErrorHandler, opts)
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
	s.keys = core.NewKeys(s.set.prefix, name)
	s.slots = make([]core.Keys, permits)
	for i := range s.slots {
		s.slots[i] = core.NewPartKeys(s.set.prefix, name, "permit/"+strconv.Itoa(i))
	}
	s.turn = core.NewPartKeys(s.set.prefix, name, "turn")
	return s
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits returns the number of permits.
func (s *Semaphore) Permits() int { return s.permits }

// TryAcquire makes one attempt to take a permit, trying each once, and returns its Lease,
// whose Name is the Semaphore's.
//
// Errors: one matching ErrHeld if every permit is held (or waiters queue for them); one
// matching ErrInvalid for a bad name, number of permits or option, or if another holder
// counts another number of permits; ErrClosed after the Client's Close; otherwise the last
// permit's error (ErrNoQuorum, say), or ctx's. Every error names the Semaphore.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) {
	if s.client == nil {
		return nil, &lockError{"acquire", s.name, fmt.Errorf("%w: zero Semaphore (use Client.NewSemaphore)", ErrInvalid)}
	}
	if s.err != nil {
		return nil, s.err
	}
	checked := make(chan error, 1)
	go func() { checked <- s.check(ctx) }()
	l, err := s.try(ctx)
	if cerr := <-checked; cerr != nil {
		if l != nil {
			_ = l.Release(context.WithoutCancel(ctx))
		}
		return nil, cerr
	}
	return l, err
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
	l, err := s.TryAcquire(ctx)
	if err == nil || s.final(ctx, err) {
		return l, err
	}
	for attempt := 0; ; attempt++ {
		l, err = s.wait(ctx)
		if err == nil || s.final(ctx, err) {
			return l, err
		}
		// The permits check failed, for a reason that may pass (too few nodes answered):
		// the permit was let go; wait in turn again after a pause.
		t := time.NewTimer(core.Backoff{Min: s.set.retryMin, Max: s.set.retryMax}.Delay(attempt, 0))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, &lockError{"acquire", s.name, fmt.Errorf("%w; last attempt: %w", ctx.Err(), err)}
		case <-s.client.closed:
			t.Stop()
			return nil, &lockError{"acquire", s.name, ErrClosed}
		}
	}
}

// final reports whether err, from an attempt of Acquire, ends it: ctx ended, or no retry
// can fix err.
func (s *Semaphore) final(ctx context.Context, err error) bool {
	return ctx.Err() != nil || core.Permanent(err)
}

// wait waits in turn on the waiters' lock, then for a permit (see await), and checks the
// count of permits.
func (s *Semaphore) wait(ctx context.Context) (*Lease, error) {
	set := s.set
	set.autoExtend, set.maxHold, set.onLost = true, 0, nil // the first waiter may wait long
	turn, err := s.client.acquireLease(ctx, s.client.leaseOf(s.name, KindLease, s.turn, set), true)
	if err != nil {
		return nil, err
	}
	defer func() { _ = turn.Release(context.WithoutCancel(ctx)) }()
	l, err := s.await(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.check(ctx); err != nil {
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	return l, nil
}

// check checks that the nodes record s's number of permits (see core.Cluster.Permits).
func (s *Semaphore) check(ctx context.Context) error {
	return s.client.cluster.Permits(ctx, s.keys, s.permits, s.set.nodeTimeout, s.set.guard) // its errors name s
}

// permit returns a Lease, not yet held, of permit i.
func (s *Semaphore) permit(i int) *Lease {
	return s.client.leaseOf(s.name, KindLease, s.slots[i], s.set)
}

// try tries each permit once, from a random one, and returns the first it takes.
func (s *Semaphore) try(ctx context.Context) (*Lease, error) {
	first := rand.IntN(s.permits)
	var last error
	for k := range s.permits {
		l, err := s.client.acquireLease(ctx, s.permit((first+k)%s.permits), false)
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil || errors.Is(err, ErrInvalid) || errors.Is(err, ErrClosed) {
			return nil, err
		}
		if !errors.Is(err, ErrHeld) {
			last = err
		}
	}
	if last != nil {
		return nil, last
	}
	return nil, &lockError{"acquire", s.name, fmt.Errorf("%w: all %d permits are held", ErrHeld, s.permits)}
}

// await waits for every permit at once, for the first waiter: each wait queues it on that
// permit, so that a release hands the permit to it. It returns the first permit taken, and
// lets go of the others (a wait that ends takes it out of that permit's queue, and a
// permit taken at the same moment is released).
func (s *Semaphore) await(ctx context.Context) (*Lease, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		l   *Lease
		err error
	}
	results := make(chan result, s.permits)
	var wg sync.WaitGroup
	for i := range s.permits {
		wg.Go(func() {
			l, err := s.client.acquireLease(wctx, s.permit(i), true)
			results <- result{l, err}
		})
	}
	var won *Lease
	var last error
	for range s.permits {
		r := <-results
		switch {
		case r.err == nil && won == nil:
			won = r.l
			cancel() // the other waits end, and leave their queues
		case r.err == nil:
			_ = r.l.Release(context.WithoutCancel(ctx))
		case wctx.Err() == nil:
			// It ended by itself (ctx ended, or an error that no retry can fix): so do the rest.
			last = r.err
			cancel()
		case last == nil:
			last = r.err
		}
	}
	wg.Wait()
	if won != nil {
		return won, nil
	}
	return nil, last
}
