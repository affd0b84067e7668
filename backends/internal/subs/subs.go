// Package subs is the pub/sub subscription registry of the backends in this module: the
// driver-neutral half of core.Subscriber. It counts the callbacks per channel, decides when a
// backend sends SUBSCRIBE and UNSUBSCRIBE, waits for the server's confirmation, delivers
// messages to the callbacks of their channel, and turns a repeated confirmation (the driver
// re-subscribed after a reconnect) into one "messages may have been missed" call per
// callback. A backend supplies only the wire: a Conn.
//
// The Registry's lock guards its maps and flags only: it never sends a command, dials or
// waits for a server while holding it. What to send is decided under the lock; a driver
// goroutine per channel sends it without the lock, one command of that channel at a time, and
// re-checks afterwards whether the channel's callbacks changed meanwhile. So a Subscribe or
// Unsubscribe of one channel never waits for the server on behalf of another channel, and an
// Unsubscribe racing a Subscribe of the same channel still leaves the server subscribed
// exactly when the channel has callbacks.
package subs

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/go-redlock/redlock/core"
)

// ErrClosed is returned by Subscribe after Close, and to Subscribe calls still waiting for
// their confirmation when Close is called. It matches core.ErrClosed, as every error of a
// closed node must.
var ErrClosed = fmt.Errorf("%w: the node's subscriptions are closed", core.ErrClosed)

// Conn is a backend's pub/sub connection as a Registry drives it. The Registry calls
// Subscribe and Unsubscribe without its lock, from goroutines of its own, and never two at a
// time for one channel: each call returns before the next command of its channel is decided.
// Calls for different channels run concurrently. They must not call back into the Registry's
// Subscribe or unsubscribe functions; they may block on the network, and should return soon
// after ctx, which ends at Close, is done.
type Conn interface {
	// Subscribe sends SUBSCRIBE (or SSUBSCRIBE) for channel. nil means the command was sent,
	// or will be by the backend's reader when it (re)connects: its confirmation will reach
	// Confirmed, or the attempt Fail. An error means the server is not subscribed to channel
	// by this call; the Subscribe calls waiting for it fail with the error. It may ask
	// ResendPending whether the Registry will call it again for channel (see Resubscribe).
	Subscribe(ctx context.Context, channel string) error
	// Unsubscribe sends UNSUBSCRIBE (or SUNSUBSCRIBE) for channel, best effort.
	Unsubscribe(ctx context.Context, channel string)
	// Start starts the backend's reader when the first channel is added while none runs
	// (see Idle). It is called without the Registry's lock. A backend whose readers live per
	// channel or per connection does nothing here.
	Start()
}

// Registry is the set of subscriptions of one node. It is safe for concurrent use. The
// backend's reader reports what it reads with Message, Confirmed and Fail; none of them
// blocks on the network.
type Registry struct {
	conn   Conn
	ctx    context.Context // passed to the Conn; ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // drivers

	mu      sync.Mutex
	chans   map[string]*entry
	running bool // a reader started by Start has not yet stopped through Idle
	closed  bool
}

// entry is one channel. Every callback in subs belongs to cur: cur is replaced only when
// subs is empty (the channel is unsubscribed) or emptied (the attempt failed).
type entry struct {
	subs    map[*sub]struct{}
	cur     *round
	sent    bool // the last command decided for the channel is SUBSCRIBE
	pending bool // a SUBSCRIBE of it awaits its confirmation
	resend  bool // send SUBSCRIBE again although sent: the backend reconnected
	busy    bool // a driver is sending for the channel
}

// round is one server-side subscription, from the SUBSCRIBE that starts it.
type round struct {
	ready     chan struct{} // closed when confirmed, or failed with err
	confirmed bool
	err       error
}

func newRound() *round { return &round{ready: make(chan struct{})} }

type sub struct {
	fn  func(payload string)
	off atomic.Bool // set under Registry.mu: no call to fn starts afterwards
}

// New returns an empty Registry over conn.
func New(conn Conn) *Registry {
	ctx, cancel := context.WithCancel(context.Background())
	return &Registry{conn: conn, ctx: ctx, cancel: cancel, chans: make(map[string]*entry)}
}

// Subscribe implements core.Subscriber: it adds onMessage to channel, has SUBSCRIBE sent when
// channel is new, and returns once the server confirmed the subscription, ctx ended
// (ctx.Err()), the attempt failed (the Conn's or Fail's error) or the Registry was closed
// (ErrClosed). It never waits for the network itself, so it returns soon after ctx ends.
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
		e = &entry{subs: make(map[*sub]struct{}), cur: newRound()}
		r.chans[channel] = e
	}
	e.subs[s] = struct{}{}
	rd := e.cur
	start := !r.running
	r.running = true
	drive := r.claim(e)
	r.mu.Unlock()
	if start {
		r.conn.Start()
	}
	if drive {
		go r.drive(channel, e)
	}

	unsubscribe = func() { r.unsubscribe(channel, e, s) }
	select {
	case <-rd.ready:
		if rd.err != nil {
			return nil, rd.err
		}
		return unsubscribe, nil
	case <-ctx.Done():
		unsubscribe()
		return nil, ctx.Err()
	}
}

// unsubscribe removes s. The last callback of a channel has it unsubscribed, once its
// SUBSCRIBE is confirmed: an unconfirmed channel is left to Confirmed, so that its
// confirmation is never mistaken for the one of a later SUBSCRIBE.
func (r *Registry) unsubscribe(channel string, e *entry, s *sub) {
	r.mu.Lock()
	if s.off.Load() {
		r.mu.Unlock()
		return
	}
	s.off.Store(true)
	delete(e.subs, s)
	drive := r.claim(e)
	r.mu.Unlock()
	if drive {
		go r.drive(channel, e)
	}
}

type op int

const (
	none op = iota
	subscribe
	unsubscribe
)

// next returns the command that would bring the server in line with e; the caller holds
// r.mu. The server should be subscribed while e has callbacks, or a SUBSCRIBE of e is still
// unanswered: its confirmation must not be taken for the one of a later SUBSCRIBE.
func (r *Registry) next(e *entry) op {
	if r.closed {
		return none
	}
	want := len(e.subs) > 0 || e.sent && e.pending
	switch {
	case want && (!e.sent || e.resend):
		return subscribe
	case !want && e.sent:
		return unsubscribe
	}
	return none
}

// claim reports whether the caller must start a driver for e, and marks e busy if so; the
// caller holds r.mu.
func (r *Registry) claim(e *entry) bool {
	if e.busy || r.next(e) == none {
		return false
	}
	e.busy = true
	r.wg.Add(1)
	return true
}

// drive sends e's commands, without r.mu, until the server is in line with e. It alone sends
// for channel while e is busy, so the commands of one channel reach the Conn in order.
func (r *Registry) drive(channel string, e *entry) {
	defer r.wg.Done()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		switch r.next(e) {
		case subscribe:
			e.sent, e.pending, e.resend = true, true, false
			rd := e.cur
			r.mu.Unlock()
			err := r.conn.Subscribe(r.ctx, channel)
			r.mu.Lock()
			// A failed re-subscription of a confirmed channel is the reader's to retry when it
			// reconnects; a failed first one fails its waiters.
			if err != nil && !rd.confirmed && rd.err == nil && !r.closed {
				e.sent = false
				r.fail(e, err)
			}
			if err != nil && e.cur.confirmed {
				e.pending = false // no confirmation is coming
			}
		case unsubscribe:
			e.sent, e.pending, e.resend = false, false, false
			e.cur = newRound() // for later callbacks: the next SUBSCRIBE's
			r.mu.Unlock()
			r.conn.Unsubscribe(r.ctx, channel)
			r.mu.Lock()
		default:
			e.busy = false
			if len(e.subs) == 0 && !e.sent && r.chans[channel] == e {
				delete(r.chans, channel)
			}
			return
		}
	}
}

// Message calls every callback of channel with the message's payload. It runs the
// callbacks on the caller's goroutine, without the Registry's lock. A message that comes
// before the confirmation of the channel's current SUBSCRIBE is dropped: the connection
// delivers in order, so it was published before that SUBSCRIBE, for an earlier
// subscription of the channel whose callbacks have all left.
func (r *Registry) Message(channel, payload string) {
	r.mu.Lock()
	var subs []*sub
	if e := r.chans[channel]; e != nil && e.cur.confirmed {
		subs = r.snapshot(e)
	}
	r.mu.Unlock()
	call(subs, payload)
}

// Confirmed records the server's subscribe confirmation for channel. The first one lets
// the Subscribe calls waiting for it return; a later one means the driver re-subscribed on a
// new connection, and every callback of channel is called once, with an empty payload,
// because messages may have been lost meanwhile. It runs those callbacks on the caller's
// goroutine, without the Registry's lock.
func (r *Registry) Confirmed(channel string) {
	r.mu.Lock()
	e := r.chans[channel]
	if e == nil || !e.sent { // a late answer to a channel left since
		r.mu.Unlock()
		return
	}
	e.pending = false
	if !e.cur.confirmed {
		e.cur.confirmed = true
		close(e.cur.ready)
		drive := r.claim(e) // every waiter gave up meanwhile: unsubscribe
		r.mu.Unlock()
		if drive {
			go r.drive(channel, e)
		}
		return
	}
	subs := r.snapshot(e)
	r.mu.Unlock()
	call(subs, "")
}

// Fail fails the Subscribe calls still waiting for a confirmation, on channel, or on every
// channel when channel is "", with err; their channels are then unsubscribed. Confirmed
// channels are unaffected: the backend re-subscribes them when it reconnects.
func (r *Registry) Fail(channel string, err error) {
	r.mu.Lock()
	var kick []claimed
	for ch, e := range r.chans {
		if (channel == "" || ch == channel) && !e.cur.confirmed && e.cur.err == nil && (e.sent || len(e.subs) > 0) {
			r.fail(e, err)
			if r.claim(e) {
				kick = append(kick, claimed{ch, e})
			}
		}
	}
	r.mu.Unlock()
	r.start(kick)
}

// fail ends e's current round with err: its waiters return err and its callbacks are off.
// The caller holds r.mu.
func (r *Registry) fail(e *entry, err error) {
	e.pending = false
	e.cur.err = err
	close(e.cur.ready)
	for s := range e.subs {
		s.off.Store(true)
	}
	clear(e.subs)
	e.cur = newRound()
}

// Resubscribe has SUBSCRIBE sent again for every subscribed channel for which match reports
// true (every one when match is nil), for a backend whose connection came back without its
// subscriptions; the confirmations then reach Confirmed. match is called with the
// Registry's lock held and must not call the Registry. The commands are sent by the
// Registry's goroutines, in order with the other commands of each channel.
//
// A channel counts as subscribed from the moment its SUBSCRIBE is decided, before the
// Conn.Subscribe call that sends it: a call under way when Resubscribe is called is followed
// by another one. A backend that would send the one under way on the new connection sends
// SUBSCRIBE there twice, and the server confirms both: the second confirmation would be taken
// for a re-subscription (every callback called, with an empty payload, for no lost message)
// or for the one of a later SUBSCRIBE of the channel. See ResendPending.
func (r *Registry) Resubscribe(match func(channel string) bool) {
	r.mu.Lock()
	var kick []claimed
	for ch, e := range r.chans {
		if e.sent && (match == nil || match(ch)) {
			e.resend = true
			if r.claim(e) {
				kick = append(kick, claimed{ch, e})
			}
		}
	}
	r.mu.Unlock()
	r.start(kick)
}

// ResendPending reports whether Resubscribe marked channel to have SUBSCRIBE sent again and
// no command of channel was decided since. A Conn.Subscribe call may ask it: true means the
// call was decided before that Resubscribe, and the Registry calls Conn.Subscribe again for
// channel once it returns, unless the channel is left or the Registry closed meanwhile. A
// backend that calls Resubscribe as it puts a new connection in place, under a lock that its
// Conn.Subscribe holds while it picks the connection to send on and asks ResendPending,
// skips the send when ResendPending is true: that SUBSCRIBE reaches the new connection once,
// from the next call. ResendPending takes the Registry's lock.
func (r *Registry) ResendPending(channel string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.chans[channel]
	return e != nil && e.resend
}

// claimed is an entry that claim marked busy, with its channel.
type claimed struct {
	channel string
	e       *entry
}

// start starts a driver for each of cs.
func (r *Registry) start(cs []claimed) {
	for _, c := range cs {
		go r.drive(c.channel, c.e)
	}
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
// return ErrClosed, and later ones fail with ErrClosed. It cancels the context of the Conn
// calls under way and sends nothing more, but does not wait for those calls (see Wait) nor
// close the Conn: the backend closes its connections itself. Close is idempotent.
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.cancel()
	for ch, e := range r.chans {
		if !e.cur.confirmed && e.cur.err == nil {
			r.fail(e, ErrClosed)
		}
		for s := range e.subs {
			s.off.Store(true)
		}
		delete(r.chans, ch)
	}
}

// Wait waits, after Close, for the Conn calls under way to return. A backend calls it once
// it has closed its connections, which ends calls blocked on them.
func (r *Registry) Wait() { r.wg.Wait() }

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
