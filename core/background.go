package core

import (
	"sync"
	"time"
)

// background counts the calls that a Cluster makes after the operation that started them
// returned (the leaves of waiters that gave up, the undoing of failed attempts on nodes that
// answered late), so that Wait can wait for them. Unlike a sync.WaitGroup, it may start
// work while Wait waits; and each piece of work comes with a bound on its time, after which
// Wait stops waiting for it (a node that ignores its context's deadline would otherwise
// hold Wait for ever).
type background struct {
	mu     sync.Mutex
	n      int
	idle   chan struct{} // closed when n falls to 0; nil while n is 0
	latest time.Time     // the latest bound of the work counted since n was last 0
}

// goRun runs f in a goroutine of its own, counted until f returns or bound has passed.
func (b *background) goRun(bound time.Duration, f func()) {
	b.mu.Lock()
	if b.n == 0 {
		b.idle, b.latest = make(chan struct{}), time.Time{}
	}
	b.n++
	if by := time.Now().Add(bound); by.After(b.latest) {
		b.latest = by
	}
	b.mu.Unlock()
	go func() {
		defer b.done()
		f()
	}()
}

func (b *background) done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n--
	if b.n == 0 {
		close(b.idle)
		b.idle = nil
	}
}

// wait waits until no work is counted, or the bound of each piece counted has passed.
func (b *background) wait() {
	for {
		b.mu.Lock()
		idle, latest := b.idle, b.latest
		b.mu.Unlock()
		if idle == nil {
			return
		}
		t := time.NewTimer(time.Until(latest))
		select {
		case <-idle:
			t.Stop()
		case <-t.C:
			b.mu.Lock()
			later := b.idle != nil && b.latest.After(latest) // work with a later bound came
			b.mu.Unlock()
			if !later {
				return
			}
		}
	}
}

// Wait waits until the calls that c makes in the background have ended: the leaves of
// waiters whose wait ended (AcquireWait returned) while a call of theirs was under way, and
// the releases of failed attempts on the nodes that answered after the attempt returned.
// Each such call ends within three node timeouts of the return of the operation that
// started it, and Wait waits no longer for it than that, even where a node ignores its
// context's deadline. Calls that operations start while Wait waits are waited for too.
// Call it before closing the nodes, so that none of those calls fails for want of a
// connection and leaves a waiter queued or a lock held until its TTL.
func (c *Cluster) Wait() { c.bg.wait() }
