package core

import (
	"context"
	"reflect"
	"sync/atomic"
	"time"
)

// sharedDeadlines is a Cluster's source of deadline contexts (see detach), safe for
// concurrent use.
type sharedDeadlines struct {
	detached atomic.Pointer[sharedDeadline]
}

// sharedDeadline is a context with a deadline, shared by the calls that start before until.
type sharedDeadline struct {
	ctx     context.Context
	cancel  context.CancelFunc // never called: ctx ends at its deadline
	timeout time.Duration
	until   time.Time
	plain   detached                 // ctx without values of the caller's, for context.Background()
	last    atomic.Pointer[detached] // the last detached context made with ctx (see detach)
}

// detach returns a context with ctx's values but not its end, and a deadline timeout away
// (at most a millisecond more). The calls that start in the same millisecond share the
// deadline, so that each needs no timer of its own.
func (s *sharedDeadlines) detach(ctx context.Context, timeout time.Duration) context.Context {
	now := time.Now()
	d := s.detached.Load()
	if d == nil || d.timeout != timeout || !now.Before(d.until) {
		d = &sharedDeadline{timeout: timeout, until: now.Add(time.Millisecond)}
		d.ctx, d.cancel = context.WithDeadline(context.Background(), d.until.Add(timeout))
		d.plain = detached{values: context.Background(), deadline: d.ctx}
		s.detached.Store(d)
	}
	if ctx == context.Background() {
		return &d.plain
	}
	// Calls one after another under one context share its detached context too.
	if p := d.last.Load(); p != nil && p.values == ctx { // p.values is a pointer: == cannot panic
		return p
	}
	p := &detached{values: ctx, deadline: d.ctx}
	if reflect.ValueOf(ctx).Kind() == reflect.Pointer {
		d.last.Store(p)
	}
	return p
}

// WithDeadline returns a context with ctx's values but not its end, which ends timeout from
// now and by nothing else: the kind of context core calls a Node's Eval and EvalStrings
// under (EndsAtDeadline reports true for it). Conformance checks use it; it is safe for
// concurrent use.
func WithDeadline(ctx context.Context, timeout time.Duration) context.Context {
	d := &sharedDeadline{timeout: timeout}
	d.ctx, d.cancel = context.WithTimeout(context.Background(), timeout)
	return &detached{values: ctx, deadline: d.ctx}
}

// EndsAtDeadline reports whether ctx is a context that core made for its calls to a Node
// (or WithDeadline did): it ends at its deadline, and no cancellation can end it sooner. A
// backend whose driver ends a call at its context's deadline may run such a call in the
// caller's goroutine, where another context needs a goroutine that returns at its end.
func EndsAtDeadline(ctx context.Context) bool {
	_, ok := ctx.(*detached)
	return ok
}

// detached is a context with the values of one context and the deadline (and end) of
// another, which has no values of its own but the context package's.
type detached struct {
	values   context.Context
	deadline context.Context
}

func (c *detached) Deadline() (time.Time, bool) { return c.deadline.Deadline() }
func (c *detached) Done() <-chan struct{}       { return c.deadline.Done() }
func (c *detached) Err() error                  { return c.deadline.Err() }

// Value looks in the deadline's context first, where the context package finds its
// cancellation.
func (c *detached) Value(key any) any {
	if v := c.deadline.Value(key); v != nil {
		return v
	}
	return c.values.Value(key)
}
