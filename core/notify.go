package core

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// message is one notification on a waiter's channel ("" for a plain wake-up).
type message struct {
	node    int
	payload string
}

// watch is a subscription to one channel on every node that is a Subscriber.
type watch struct {
	usable chan struct{} // closed when watch may return
	ready  chan struct{} // closed once every node answered Subscribe
	active atomic.Bool   // at least one node confirmed
	unsubs []func()      // complete once ready is closed
	msgs   chan message  // messages beyond its room are dropped
}

// watch subscribes to channel on every Subscriber node in parallel, each within timeout, and
// returns once every one answered, or a quorum of them (all, if fewer) confirmed and the
// rest had twice as long as that took, or ctx ended. A later confirmation delivers from
// then on. A message lost or dropped costs at most a refresh interval, never safety.
func (c *Cluster) watch(ctx context.Context, channel string, timeout time.Duration) *watch {
	w := &watch{usable: make(chan struct{}), ready: make(chan struct{}), msgs: make(chan message, 4*len(c.nodes)+4)}
	go c.subscribe(ctx, w, channel, timeout)
	select {
	case <-w.usable:
	case <-ctx.Done():
	}
	return w
}

// subscribe subscribes w on every Subscriber node, closing w.usable when watch may return
// and w.ready once all answered.
func (c *Cluster) subscribe(ctx context.Context, w *watch, channel string, timeout time.Duration) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var subscribers []int // the nodes that are Subscribers
	for i, node := range c.nodes {
		if _, ok := node.(Subscriber); ok {
			subscribers = append(subscribers, i)
		}
	}
	need, confirmed, answered := min(c.quorum, len(subscribers)), 0, 0
	start := time.Now()
	var grace *time.Timer
	usable := sync.OnceFunc(func() { close(w.usable) })
	for _, i := range subscribers {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			defer cancel()
			unsub, err := c.nodes[i].(Subscriber).Subscribe(sctx, channel, func(payload string) {
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
			} else {
				c.failedWith(i, err) // a SUBSCRIBE refused for good (an ACL), if the backend says so: the waiter polls
			}
			switch {
			case answered == len(subscribers):
				usable()
			case err == nil && confirmed == need:
				if d := 2 * time.Since(start); d > 0 {
					grace = time.AfterFunc(d, usable)
				} else { // in virtual time, where an AfterFunc due at once would come late
					usable()
				}
			}
		})
	}
	wg.Wait()
	usable()
	if grace != nil {
		grace.Stop()
	}
	close(w.ready)
}

// isActive reports whether the waiter will hear release notifications; false on a nil watch.
func (w *watch) isActive() bool { return w != nil && closed(w.usable) && w.active.Load() }

// closed reports whether ch is closed (or has a value ready).
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// drain forgets the messages received so far; a no-op on a nil watch.
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

// stop unsubscribes once the subscriptions under way answered; a no-op on a nil watch.
func (w *watch) stop() {
	if w == nil {
		return
	}
	<-w.ready
	for _, unsub := range w.unsubs {
		unsub()
	}
}

// Subscriber is an optional capability of a Node: it delivers the release notifications that
// the release script publishes, so that waiters wake as soon as a lock is let go instead of
// polling. Core discovers it with a type assertion.
//
// Contract:
//   - Subscribe returns only once the subscription is active on the server: a PUBLISH on
//     channel that the server handles after Subscribe returned is delivered.
//   - onMessage is called with the payload of every message on channel, unchanged, from a
//     goroutine of the backend's; it must not block (core's callbacks never do). It may also
//     be called with an empty payload when no message arrived: a spurious call only makes a
//     waiter check the lock once more. A payload must never be made up or altered: a
//     message from one node is counted as that node's wake-up.
//   - After the connection drops, the backend reconnects and re-subscribes by itself, and then
//     calls onMessage("") once for every subscribed channel, because messages may have been
//     lost in between: the waiter re-checks instead of sleeping through a release.
//   - onMessage receives the messages of its own channel only.
//   - unsubscribe stops delivery to this onMessage and is idempotent: once it returns, no new
//     call starts (one already under way may still be running, which is why callbacks
//     must be harmless when late). Other subscriptions to the same channel stay active.
//     Once no subscription to a channel is left, the backend unsubscribes on the server
//     (UNSUBSCRIBE, or SUNSUBSCRIBE), so that channels do not pile up there.
//   - A backend shares one pub/sub connection per node (at most one per master of a Redis
//     Cluster) among all channels it is asked for, and may be asked for the same channel
//     more than once.
//   - Subscribe honours ctx while it waits for the subscription to become active.
type Subscriber interface {
	Subscribe(ctx context.Context, channel string, onMessage func(payload string)) (unsubscribe func(), err error)
}
