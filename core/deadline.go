package core

import (
	"context"
	"reflect"
	"sync/atomic"
	"time"
)

// sharedDeadlines lets the single-node calls made one after another under one cancellable
// context (many goroutines under one service context, say) share a deadline context: each
// context of its own starts a timer and registers with the caller's context, under that
// context's lock, which cost a tenth of the throughput at N = 1 (see docs/performance.md).
// It is a Cluster's, and safe for concurrent use.
type sharedDeadlines struct {
	last atomic.Pointer[sharedDeadline]
	seen atomic.Uintptr // the address of the last caller context seen
	// detached is the deadline that calls under contexts whose end they ignore share (see
	// detach): its parent is context.Background().
	detached atomic.Pointer[sharedDeadline]
}

// sharedDeadline is a context with a deadline, shared by the calls under parent that start
// before until.
type sharedDeadline struct {
	parent  context.Context
	ctx     context.Context
	cancel  context.CancelFunc // never called: ctx ends at its deadline, or with parent
	timeout time.Duration
	until   time.Time
	last    atomic.Pointer[detached] // the last detached context made with ctx (see detach)
}

// under returns ctx with a deadline timeout away (at most a millisecond more), for a call in
// the caller's goroutine, and the function that cancels it, or nil where there is nothing to
// cancel (a shared context ends at its deadline, or with ctx). A ctx seen for the first time
// gets a context of its own, so that calls under ever new contexts (one per request, say)
// leave no shared context behind waiting for its deadline; from its second call in a row
// on, a ctx's calls share one per millisecond. A ctx that never ends (context.Background,
// say) gets the detached deadline that every call shares (see detach).
func (s *sharedDeadlines) under(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil { // it never ends: nothing to register with
		return s.detach(ctx, timeout), nil
	}
	v := reflect.ValueOf(ctx)
	if v.Kind() != reflect.Pointer { // == could panic
		return context.WithTimeout(ctx, timeout)
	}
	now := time.Now()
	if d := s.last.Load(); d != nil && d.parent == ctx && d.timeout == timeout && now.Before(d.until) {
		return d.ctx, nil
	}
	// Only the address of a context seen once is kept: no reference to it. (An address that
	// a later context reuses only makes that one share from its first call.)
	if s.seen.Swap(v.Pointer()) != v.Pointer() {
		return context.WithTimeout(ctx, timeout)
	}
	d := &sharedDeadline{parent: ctx, timeout: timeout, until: now.Add(time.Millisecond)}
	d.ctx, d.cancel = context.WithDeadline(ctx, d.until.Add(timeout))
	s.last.Store(d)
	return d.ctx, nil
}

// detach returns a context with ctx's values but not its end, and a deadline timeout away
// (at most a millisecond more): for calls that must run to their answer or their deadline
// even if ctx ends (a release; the calls of a fan-out that the caller may stop waiting
// for). The calls that start in the same millisecond share the deadline, so that each
// needs no timer of its own; a call under context.Background() gets the shared context
// itself.
func (s *sharedDeadlines) detach(ctx context.Context, timeout time.Duration) context.Context {
	now := time.Now()
	d := s.detached.Load()
	if d == nil || d.timeout != timeout || !now.Before(d.until) {
		d = &sharedDeadline{parent: context.Background(), timeout: timeout, until: now.Add(time.Millisecond)}
		d.ctx, d.cancel = context.WithDeadline(context.Background(), d.until.Add(timeout))
		s.detached.Store(d)
	}
	if ctx == context.Background() {
		return d.ctx
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

// detached is a context with the values of one context and the deadline (and end) of
// another, which has no values of its own but the context package's.
type detached struct {
	values   context.Context
	deadline context.Context
}

func (c *detached) Deadline() (time.Time, bool) { return c.deadline.Deadline() }
func (c *detached) Done() <-chan struct{}       { return c.deadline.Done() }
func (c *detached) Err() error                  { return c.deadline.Err() }

// Value looks in the deadline's context first: the context package finds its cancellation
// there (for context.Cause, and so that a context derived from this one ends with it).
func (c *detached) Value(key any) any {
	if v := c.deadline.Value(key); v != nil {
		return v
	}
	return c.values.Value(key)
}
