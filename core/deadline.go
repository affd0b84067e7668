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

// Value looks in the deadline's context first, where the context package finds its
// cancellation.
func (c *detached) Value(key any) any {
	if v := c.deadline.Value(key); v != nil {
		return v
	}
	return c.values.Value(key)
}
