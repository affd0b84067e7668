package redlockgocron

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-redlock/redlock"
)

// leaseKey is the context key of a wrapped run's Lease.
type leaseKey struct{}

// LeaseFromContext returns the Lease under which a job function wrapped with Locker.Job or
// Elector.Job runs, from its context (or one derived from it): the run's lock for a
// Locker, the leader's lease for an Elector. Its Token fences the job's writes. ok is
// false for any other context.
func LeaseFromContext(ctx context.Context) (lease *redlock.Lease, ok bool) {
	lease, ok = ctx.Value(leaseKey{}).(*redlock.Lease)
	return lease, ok
}

// lostError is the error of a lease that ended, for reason, under what (`job "report"`,
// say): it matches ErrLockLost and reason.
func lostError(what string, reason error) error {
	return fmt.Errorf("%w (%s): %w", ErrLockLost, what, reason)
}

// runLeased calls fn with ctx, carrying lease, cancelled when lease ends while fn runs, and
// returns fn's error joined with the loss, if the lease ended first. It does not call fn
// if the lease has already ended.
func runLeased(ctx context.Context, lease *redlock.Lease, what string, fn func(context.Context) error) (err error) {
	if reason := lease.Err(); reason != nil {
		return lostError(what, reason)
	}
	runCtx, cancel := context.WithCancelCause(context.WithValue(ctx, leaseKey{}, lease))
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-lease.Done():
			cancel(lostError(what, lease.Err()))
		case <-stop:
		}
	}()
	defer func() { // also when fn panics
		close(stop)
		<-watched
		if cause := context.Cause(runCtx); errors.Is(cause, ErrLockLost) {
			err = errors.Join(err, cause)
		}
		cancel(nil)
	}()
	return fn(runCtx)
}
