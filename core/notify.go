package core

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// message is one notification on a waiter's channel: which node sent it, and its payload
// ("" for a plain wake-up, see release.lua for a hand-over).
type message struct {
	node    int
	payload string
}

// watch is one waiter's subscription to its own wake-up channel (Keys.Wake) on every node
// that is a Subscriber.
type watch struct {
	// usable is closed once every node answered Subscribe, or a quorum of them confirmed
	// (all of them, if fewer are Subscribers) and the rest had twice as long as that took:
	// the waiter need not wait longer for the rest.
	usable chan struct{}
	ready  chan struct{} // closed once every node answered Subscribe
	active atomic.Bool   // at least one node confirmed
	unsubs []func()      // complete once ready is closed
	msgs   chan message  // what the nodes said; messages beyond its room are dropped
}

// watch subscribes to channel on every Subscriber node in parallel and returns once every
// one answered, each within timeout; or once a quorum of them confirmed and the rest had
// twice as long as the quorum took (so that nodes about as fast as the others are not
// left out); or when ctx ended: a node that does not answer (a partition, a stopped
// server) does not hold the waiter for the timeout. A subscription that a node confirms
// later delivers its messages from then on;
// one a release sent before it is lost, which costs at most a refresh interval (the
// hand-over is taken at the next call), never safety. w.isActive reports whether any node
// confirmed; if none did (no node is a Subscriber, or all failed) the waiter must poll.
func (c *Cluster) watch(ctx context.Context, channel string, timeout time.Duration) *watch {
	// Room for several messages per node: a waiter reads them between attempts, and a
	// dropped one costs at most a refresh interval (the hand-over is taken at the next call).
	w := &watch{usable: make(chan struct{}), ready: make(chan struct{}), msgs: make(chan message, 4*len(c.nodes)+4)}
	go c.subscribe(ctx, w, channel, timeout)
	select {
	case <-w.usable:
	case <-ctx.Done():
	}
	return w
}

// subscribe subscribes w on every Subscriber node in parallel, closes w.usable when watch
// may return, and w.ready once all answered.
func (c *Cluster) subscribe(ctx context.Context, w *watch, channel string, timeout time.Duration) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	subscribers := 0
	for _, node := range c.nodes {
		if _, ok := node.(Subscriber); ok {
			subscribers++
		}
	}
	need, confirmed, answered := min(c.quorum, subscribers), 0, 0
	start := time.Now()
	var grace *time.Timer
	usable := sync.OnceFunc(func() { close(w.usable) })
	for i, node := range c.nodes {
		s, ok := node.(Subscriber)
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			defer cancel()
			unsub, err := s.Subscribe(sctx, channel, func(payload string) {
				select {
				case w.msgs <- message{node: i, payload: payload}:
				default:
				}
			})
			mu.Lock()
			defer mu.Unlock()
			answered++
			if err == nil {
				w.active.Store(true)
				w.unsubs = append(w.unsubs, unsub)
				confirmed++
			}
			switch {
			case answered == subscribers:
				usable()
			case err == nil && confirmed == need:
				// The rest get twice as long as the quorum took: a node that answers
				// about as fast as the others does not lose the messages of the
				// waiter's first moments, and one that does not answer is not waited
				// for.
				if d := 2 * time.Since(start); d > 0 {
					grace = time.AfterFunc(d, usable)
				} else { // in virtual time: a timer due at once would only run usable now
					usable()
				}
			}
		}()
	}
	wg.Wait()
	usable() // none (or too few) confirmed, or no node is a Subscriber
	if grace != nil {
		grace.Stop()
	}
	close(w.ready)
}

// isActive reports whether the waiter will hear release notifications. It is false on a
// nil watch.
func (w *watch) isActive() bool {
	if w == nil {
		return false
	}
	select {
	case <-w.usable:
		return w.active.Load()
	default:
		return false
	}
}

// drain forgets the messages received so far: they were sent before the attempt about to
// be made, whose own answers supersede them. Without it, messages that arrive while the
// waiter is not listening would fill w.msgs and crowd out later ones. It is a no-op on a
// nil watch.
func (w *watch) drain() {
	if w == nil {
		return
	}
	for {
		select {
		case <-w.msgs:
		default:
			return
		}
	}
}

// stop unsubscribes on the nodes, after the subscriptions still under way have answered
// (within a node timeout). It is a no-op on a nil watch.
func (w *watch) stop() {
	if w == nil {
		return
	}
	<-w.ready
	for _, unsub := range w.unsubs {
		unsub()
	}
}
