// Package subs is the pub/sub subscription registry of the backends in this module: the
// driver-neutral half of core.Subscriber. It counts the callbacks per channel, decides when a
// backend sends SUBSCRIBE and UNSUBSCRIBE, waits for the server's confirmation, delivers
// messages to the callbacks of their channel, and turns a repeated confirmation (the driver
// re-subscribed after a reconnect) into one "messages may have been missed" call per
// callback. A backend supplies only the wire: a Conn.
package subs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// ErrClosed is returned by Subscribe after Close, and to Subscribe calls still waiting for
// their confirmation when Close is called.
var ErrClosed = errors.New("redlock: subscriber closed")

// Conn is a backend's pub/sub connection as a Registry drives it. The Registry calls its
// methods with its lock held: they must not call back into the Registry, and must not block
// for long (writing one command is fine; dialling is not, except with Subscribe's ctx).
type Conn interface {
	// Subscribe sends SUBSCRIBE (or SSUBSCRIBE) for channel. An error fails the Subscribe
	// call that asked for it. nil means the confirmation will reach Confirmed, or Fail.
	Subscribe(ctx context.Context, channel string) error
	// Unsubscribe sends UNSUBSCRIBE for channel, best effort.
	Unsubscribe(channel string)
	// Start starts the backend's reader when the first channel is added while none runs
	// (see Idle). A backend whose readers live per channel does nothing here.
	Start()
}

// Registry is the set of subscriptions of one node. It is safe for concurrent use. The
// backend's reader reports what it reads with Message, Confirmed and Fail.
type Registry struct {
	conn Conn

	mu      sync.Mutex
	chans   map[string]*entry
	running bool // a reader started by Start has not yet stopped through Idle
	closed  bool
}

type entry struct {
	subs      map[*sub]struct{}
	confirmed bool
	ready     chan struct{} // closed when confirmed, or failed with err
	err       error
}

type sub struct {
	fn  func(payload string)
	off atomic.Bool // set under Registry.mu: no call to fn starts afterwards
}

// New returns an empty Registry over conn.
func New(conn Conn) *Registry {
	return &Registry{conn: conn, chans: make(map[string]*entry)}
}

// Subscribe implements core.Subscriber: it adds onMessage to channel, asks the Conn to
// subscribe when channel is new, and returns once the server confirmed the subscription,
// ctx ended (ctx.Err()), it failed (Fail's error) or the Registry was closed (ErrClosed).
func (r *Registry) Subscribe(ctx context.Context, channel string, onMessage func(payload string)) (unsubscribe func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &sub{fn: onMessage}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	e := r.chans[channel]
	if e == nil {
		e = &entry{subs: make(map[*sub]struct{}), ready: make(chan struct{})}
		r.chans[channel] = e
		if !r.running {
			r.running = true
			r.conn.Start()
		}
		if err := r.conn.Subscribe(ctx, channel); err != nil {
			delete(r.chans, channel)
			r.mu.Unlock()
			return nil, err
		}
	}
	e.subs[s] = struct{}{}
	r.mu.Unlock()

	unsubscribe = func() { r.unsubscribe(channel, e, s) }
	select {
	case <-e.ready:
		if e.err != nil {
			return nil, e.err
		}
		return unsubscribe, nil
	case <-ctx.Done():
		unsubscribe()
		return nil, ctx.Err()
	}
}

// unsubscribe removes s. The last callback of a confirmed channel unsubscribes it; an
// unconfirmed channel is left to Confirmed, so that its confirmation is never mistaken for
// the one of a later SUBSCRIBE.
func (r *Registry) unsubscribe(channel string, e *entry, s *sub) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.off.Load() {
		return
	}
	s.off.Store(true)
	delete(e.subs, s)
	if len(e.subs) == 0 && e.confirmed && r.chans[channel] == e {
		delete(r.chans, channel)
		r.conn.Unsubscribe(channel)
	}
}

// Message calls every callback of channel with the message's payload. It runs the
// callbacks on the caller's goroutine, without the Registry's lock.
func (r *Registry) Message(channel, payload string) {
	r.mu.Lock()
	subs := r.snapshot(r.chans[channel])
	r.mu.Unlock()
	call(subs, payload)
}

// Confirmed records the server's subscribe confirmation for channel. The first one lets
// Subscribe return; a later one means the driver re-subscribed on a new connection, and
// every callback of channel is called once, with an empty payload, because messages may
// have been lost meanwhile.
func (r *Registry) Confirmed(channel string) {
	r.mu.Lock()
	e := r.chans[channel]
	if e == nil {
		r.mu.Unlock()
		return
	}
	if !e.confirmed {
		e.confirmed = true
		close(e.ready)
		if len(e.subs) == 0 { // every waiter gave up meanwhile
			delete(r.chans, channel)
			r.conn.Unsubscribe(channel)
		}
		r.mu.Unlock()
		return
	}
	subs := r.snapshot(e)
	r.mu.Unlock()
	call(subs, "")
}

// Fail fails the Subscribe calls still waiting for a confirmation, on channel, or on every
// channel when channel is "", with err; the Conn is asked to unsubscribe them. Confirmed
// channels are unaffected: the backend re-subscribes them when it reconnects.
func (r *Registry) Fail(channel string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ch, e := range r.chans {
		if !e.confirmed && (channel == "" || ch == channel) {
			r.fail(ch, e, err)
			r.conn.Unsubscribe(ch)
		}
	}
}

func (r *Registry) fail(channel string, e *entry, err error) {
	e.err = err
	close(e.ready)
	for s := range e.subs {
		s.off.Store(true)
	}
	delete(r.chans, channel)
}

// Resubscribe asks the Conn to subscribe every channel again, for a backend that reconnects
// by itself; the confirmations then reach Confirmed. It returns the first error.
func (r *Registry) Resubscribe(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first error
	for ch := range r.chans {
		if err := r.conn.Subscribe(ctx, ch); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Idle reports whether the reader should stop: no channel is subscribed, or the Registry is
// closed. When it reports true, the next Subscribe calls Start again.
func (r *Registry) Idle() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.chans) > 0 && !r.closed {
		return false
	}
	r.running = false
	return true
}

// Close stops all delivery: no callback starts after it returns, waiting Subscribe calls
// return ErrClosed, and later ones fail with ErrClosed. It does not touch the Conn; the
// backend closes its connections itself. Close is idempotent.
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for ch, e := range r.chans {
		if e.confirmed {
			for s := range e.subs {
				s.off.Store(true)
			}
			delete(r.chans, ch)
		} else {
			r.fail(ch, e, ErrClosed)
		}
	}
}

// snapshot returns e's callbacks; the caller holds r.mu.
func (r *Registry) snapshot(e *entry) []*sub {
	if e == nil || len(e.subs) == 0 {
		return nil
	}
	subs := make([]*sub, 0, len(e.subs))
	for s := range e.subs {
		subs = append(subs, s)
	}
	return subs
}

// call runs each callback that has not been unsubscribed meanwhile.
func call(subs []*sub, payload string) {
	for _, s := range subs {
		if !s.off.Load() {
			s.fn(payload)
		}
	}
}
