package redlock

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"weak"

	"github.com/go-redlock/redlock/core"
)

// queue is the local FIFO queue of one lock key within a Client: a goroutine holds one of
// slot's places (one, or a Semaphore's permits) while it holds or waits for the lock in
// Redis (through a Mutex, an RWMutex's writer side, or a Lease from Acquire, TryAcquire or
// a Semaphore), and the others wait to send. A Mutex
// and an RWMutex keep their name's queue for their lifetime; the Client finds a key's queue
// through a weak pointer, and forgets the key once nothing uses its queue (see queueOf).
type queue struct {
	slot   chan struct{}
	closed <-chan struct{} // the Client's: closed by its Close
}

// join takes a place in q, in FIFO order; the caller gives it back with leave. If
// wait, it waits for the place, and fails with ctx's error (and errHeldHere, the reason to
// wait) if ctx ends first, or with ErrClosed if the Client is closed first. Else it fails
// at once if the place is taken: with ErrClosed if the Client is closed, or errHeldHere.
func (q *queue) join(ctx context.Context, wait bool) error {
	select {
	case q.slot <- struct{}{}:
		return nil
	default:
	}
	if !wait {
		select {
		case <-q.closed:
			return ErrClosed
		default:
			return errHeldHere
		}
	}
	select {
	case q.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w; last attempt: %w", ctx.Err(), errHeldHere)
	case <-q.closed:
		return ErrClosed
	}
}

// leave gives back the place that join took; on a nil q (a lock over several names, which
// has no local queue) it does nothing.
func (q *queue) leave() {
	if q != nil {
		<-q.slot
	}
}

// localQueue returns the local queue of the lock whose keys are keys (see queueOf), or nil
// for a lock over several names: those queue in Redis only. A set's names cannot share one
// local queue, and a place in each name's queue would let a goroutine hold one name's place
// while it waits for another's, behind goroutines that Redis would have ordered otherwise.
// So a set never finds "held by another goroutine of this Client" locally, nor makes a
// single name find it: Redis, which sees every holder and waiter of each name, decides,
// and the goroutines of one Client that wait for overlapping sets, or for a set and one of
// its names, take turns there as the waiters of different processes do. (A Mutex or an
// RWMutex over several names has a queue of its own for its writer's side: see exclusive.)
// A Semaphore's queue, of one place per permit, is that of its name and number of permits:
// Semaphores of one name that count different numbers never wait for each other here, so
// that each reaches the nodes, which refuse a count other than the one they record.
func (c *Client) localQueue(keys core.Keys) *queue {
	if keys.Set != nil {
		return nil
	}
	if n := len(keys.Permits); n > 0 {
		return c.queueOf(keys.Lock+"#"+strconv.Itoa(n), n)
	}
	return c.queueOf(keys.Lock, 1)
}

// queueOf returns the local queue of key: the one its Mutexes, Leases and waiters use while
// any of them is live, or else a new one with slots places. A key whose queue is no longer used is forgotten
// after the garbage collector finds it, so that a Client that locks many names once does not
// keep them all.
func (c *Client) queueOf(key string, slots int) *queue {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if q := c.queues[key].Value(); q != nil {
		return q
	}
	if c.queues == nil {
		c.queues = make(map[string]weak.Pointer[queue])
	}
	q := &queue{slot: make(chan struct{}, slots), closed: c.closed}
	c.queues[key] = weak.Make(q)
	runtime.AddCleanup(q, c.forget, key)
	return q
}

// forget drops key, unless a newer queue took its place.
func (c *Client) forget(key string) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.queues[key].Value() == nil {
		delete(c.queues, key)
	}
}
