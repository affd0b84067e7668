package core

import (
	"context"
	"sync"
	"time"
)

// notifier keeps the wake-up subscriptions of a Cluster's waiters: the first waiter for a
// channel subscribes on every node that is a Subscriber, later ones join it, and the last
// one to leave unsubscribes. Each waiter now has a channel of its own (Keys.Wake), so
// a channel has exactly one waiter and the sharing goes unused.
type notifier struct {
	mu   sync.Mutex
	subs map[string]*subscription
}

// subscription is one channel's subscription on the nodes, and the waiters it wakes.
type subscription struct {
	ready   chan struct{} // closed once the nodes answered Subscribe
	active  bool          // at least one node confirmed (set before ready closes)
	unsubs  []func()
	waiters map[*watch]struct{} // guarded by notifier.mu
}

// watch is one waiter's view of a subscription.
type watch struct {
	c    *Cluster
	ch   string
	sub  *subscription
	wake chan struct{} // receives when a release may have happened
}

// watch subscribes to channel (or joins the subscription already there) and returns once
// the nodes have confirmed it, each within timeout. w.active reports whether any node did;
// if none did (no node is a Subscriber, or all failed) the waiter must poll.
func (c *Cluster) watch(ctx context.Context, channel string, timeout time.Duration) *watch {
	n := &c.notify
	w := &watch{c: c, ch: channel, wake: make(chan struct{}, 1)}
	n.mu.Lock()
	if n.subs == nil {
		n.subs = make(map[string]*subscription)
	}
	sub, ok := n.subs[channel]
	if !ok {
		sub = &subscription{ready: make(chan struct{}), waiters: make(map[*watch]struct{})}
		n.subs[channel] = sub
	}
	sub.waiters[w] = struct{}{}
	w.sub = sub
	n.mu.Unlock()

	if !ok {
		c.subscribe(ctx, sub, channel, timeout)
	}
	select {
	case <-sub.ready:
	case <-ctx.Done():
	}
	return w
}

// active reports whether the waiter will be woken by release notifications.
func (w *watch) active() bool {
	select {
	case <-w.sub.ready:
		return w.sub.active
	default:
		return false
	}
}

// subscribe subscribes sub on every Subscriber node in parallel and closes sub.ready.
func (c *Cluster) subscribe(ctx context.Context, sub *subscription, channel string, timeout time.Duration) {
	onMessage := func() { c.notify.wakeAll(sub) }
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, node := range c.nodes {
		s, ok := node.(Subscriber)
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			defer cancel()
			unsub, err := s.Subscribe(sctx, channel, onMessage)
			if err != nil {
				return
			}
			mu.Lock()
			sub.unsubs = append(sub.unsubs, unsub)
			sub.active = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(sub.ready)
}

func (n *notifier) wakeAll(sub *subscription) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for w := range sub.waiters {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// stop leaves the subscription; the last waiter to leave unsubscribes on the nodes. It is a
// no-op on a nil watch.
func (w *watch) stop() {
	if w == nil {
		return
	}
	n := &w.c.notify
	n.mu.Lock()
	delete(w.sub.waiters, w)
	last := len(w.sub.waiters) == 0
	if last && n.subs[w.ch] == w.sub {
		delete(n.subs, w.ch)
	}
	n.mu.Unlock()
	if last {
		<-w.sub.ready // its subscriber set the unsubs; it returns within a node timeout
		for _, unsub := range w.sub.unsubs {
			unsub()
		}
	}
}

// drain forgets a pending wake-up. It is a no-op on a nil watch.
func (w *watch) drain() {
	if w == nil {
		return
	}
	select {
	case <-w.wake:
	default:
	}
}
