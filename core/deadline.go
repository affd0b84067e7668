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
}

// sharedDeadline is a context with a deadline, shared by the calls under parent that start
// before until.
type sharedDeadline struct {
	parent  context.Context
	ctx     context.Context
	cancel  context.CancelFunc // never called: ctx ends at its deadline, or with parent
	timeout time.Duration
	until   time.Time
}

// under returns ctx with a deadline timeout away (at most a millisecond more), for a call in
// the caller's goroutine, and the function that cancels it, or nil where there is nothing to
// cancel (a shared context ends at its deadline, or with ctx). A ctx seen for the first time
// gets a context of its own, so that calls under ever new contexts (one per request, say)
// leave no shared context behind waiting for its deadline; from its second call in a row
// on, a ctx's calls share one per millisecond.
func (s *sharedDeadlines) under(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	v := reflect.ValueOf(ctx)
	if ctx.Done() == nil || v.Kind() != reflect.Pointer { // nothing to register with; or == could panic
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
