package redlock

import (
	"context"
	"testing"

	"github.com/go-redlock/redlock/core"
)

// TestObservationUnsetAllocatesNothing: without an Observer, every observation path the
// lock operations run (start, failed-attempt hook, the three ways an acquisition ends, and
// the Lease's own checks) allocates nothing.
func TestObservationUnsetAllocatesNothing(t *testing.T) {
	s := defaults()
	ctx := context.Background()
	l := &Lease{name: "n", kind: KindMutex, opts: s}
	g := &core.Held{Grant: core.Grant{Attempts: 1}}
	err := ErrHeld
	log := func(error) {}
	allocs := testing.AllocsPerRun(100, func() {
		a := observeAcquire(ctx, &s, "n", KindMutex, false)
		if a != nil {
			t.Fatal("an acquisition observed without an Observer")
		}
		if f := a.failedHook(log); f == nil {
			t.Fatal("the logger's hook was dropped")
		}
		a.failedHook(nil)
		a.queued(err)
		a.once(l, g, nil)
		a.waited(l, g, nil)
		a.waited(l, nil, err)
		if l.opts.observer != nil {
			t.Fatal("observer set")
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations without an Observer, want 0", allocs)
	}
}

// TestAcquisitionAttempts: the attempts that an acquisition reports, from the failed
// attempts core reported (Lock.Failed) and its outcome: a grant after two reported failures
// is attempt 3; a wait that ended with an error that core had not reported counts that last
// attempt, and one that ended with its context after a reported failure does not.
func TestAcquisitionAttempts(t *testing.T) {
	s := defaults()
	obs := &recordAcquired{}
	s.observer = obs
	heldErr := &QuorumError{Op: "acquire"}
	for _, tc := range []struct {
		name     string
		failures []error
		g        *core.Held
		err      error
		attempts int
	}{
		{"first", nil, &core.Held{Grant: core.Grant{Attempts: 1}}, nil, 1},
		{"third", []error{ErrHeld, ErrHeld}, &core.Held{Grant: core.Grant{Attempts: 3}}, nil, 3},
		{"permanent error", []error{ErrHeld}, nil, ErrInvalid, 2},
		{"context after a reported failure", []error{heldErr}, nil, joinLast(context.DeadlineExceeded, heldErr), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &Lease{opts: s}
			a := observeAcquire(context.Background(), &s, "n", KindLease, false)
			f := a.failedHook(nil)
			for _, err := range tc.failures {
				f(err)
			}
			a.waited(l, tc.g, tc.err)
			e := obs.last
			if e.Attempts != tc.attempts {
				t.Errorf("attempts %d; want %d", e.Attempts, tc.attempts)
			}
			if tc.g != nil && l.acquired.IsZero() {
				t.Error("the hold time's start is not set")
			}
			if tc.g == nil && e.Outcome == OutcomeOK {
				t.Error("a failed acquisition reported ok")
			}
		})
	}
}

// joinLast wraps last as core does when a wait's context ends: "ctx's error; last attempt:
// last".
func joinLast(ctxErr, last error) error {
	return &lockError{"acquire", "n", &wrapped{ctxErr, last}}
}

type wrapped struct{ a, b error }

func (w *wrapped) Error() string   { return w.a.Error() + "; last attempt: " + w.b.Error() }
func (w *wrapped) Unwrap() []error { return []error{w.a, w.b} }

type recordAcquired struct {
	NopObserver
	last AcquireEvent
}

func (r *recordAcquired) Acquired(e AcquireEvent) { r.last = e }
