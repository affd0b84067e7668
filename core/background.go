package core

import "sync"

// background counts the calls that a Cluster makes after the operation that started them
// returned (the leaves of waiters that gave up, the undoing of failed attempts on nodes that
// answered late), so that Wait can wait for them. Unlike a sync.WaitGroup, it may start
// work while Wait waits.
type background struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n falls to 0; nil while n is 0
}

// goRun runs f in a goroutine of its own, counted until f returns.
func (b *background) goRun(f func()) {
	b.mu.Lock()
	if b.n == 0 {
		b.idle = make(chan struct{})
	}
	b.n++
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

// wait waits until no work is counted.
func (b *background) wait() {
	for {
		b.mu.Lock()
		idle := b.idle
		b.mu.Unlock()
		if idle == nil {
			return
		}
		<-idle
	}
}

// Wait waits until the calls that c makes in the background have ended: the leaves of
// waiters whose wait ended (AcquireWait returned) while a call of theirs was under way, and
// the releases of failed attempts on the nodes that answered after the attempt returned.
// Each such call ends within three node timeouts of the return of the operation that started
// it, on nodes that honour their context's deadline. Calls that operations start while Wait
// waits are waited for too. Call it before closing the nodes, so that none of those calls
// fails for want of a connection and leaves a waiter queued or a lock held until its TTL.
func (c *Cluster) Wait() { c.bg.wait() }
