package valkey

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redlock/redlock/backends/internal/subs"
	"github.com/go-redlock/redlock/core"
	"github.com/valkey-io/valkey-go"
)

var (
	_ core.Subscriber    = (*Node)(nil)
	_ core.ShardedPubSub = (*Node)(nil)
)

// Subscribe implements core.Subscriber: onMessage is called with every message on channel,
// and once more after valkey-go re-established the subscription on a new connection, since
// messages may have been missed meanwhile. It returns once the server confirmed the
// subscription; it fails with ctx's error if ctx ends first, or with the client's error if
// SUBSCRIBE fails. After Close, or on a closed client, the error matches core.ErrClosed.
//
// Each channel is one valkey-go Client.Receive call, which valkey-go multiplexes with every
// other channel over the client's one pub/sub connection (one per master of a cluster; under
// RESP3 the pipelined command connection itself). A cluster client subscribes with
// SSUBSCRIBE.
//
// unsubscribe is idempotent; once it returns no call to onMessage starts (one already under
// way may still be running). Callbacks run on a goroutine of the Node's or valkey-go's and
// must not block; they may call unsubscribe. Subscribe is safe for concurrent use.
func (n *Node) Subscribe(ctx context.Context, channel string, onMessage func(payload string)) (unsubscribe func(), err error) {
	return n.ps.reg.Subscribe(ctx, channel, onMessage)
}

// ShardedPubSub reports whether the Node is over a cluster client, whose Subscribe uses
// SSUBSCRIBE, so that core publishes release notifications with SPUBLISH.
func (n *Node) ShardedPubSub() bool { return n.ps.sharded }

// Close stops the Node's pub/sub machinery: it ends every subscription (no callback starts
// after Close returns), unsubscribes on the server (waiting at most a second for it)
// and waits for the Node's goroutines to exit. It always returns nil. Eval and SetNX keep
// working; Subscribe fails afterwards. Close never closes the valkey-go client, which
// belongs to the caller. It is idempotent and safe for concurrent use, and must not be
// called from a Subscribe callback.
func (n *Node) Close() error {
	n.ps.cancel()
	n.ps.reg.Close()
	n.ps.reg.Wait() // first: a Registry goroutine may still start a receiver
	n.ps.wg.Wait()
	return nil
}

// pubsub is the valkey-go side of a subs.Registry (its subs.Conn): a goroutine per
// subscribed channel, blocked in Client.Receive.
type pubsub struct {
	client  valkey.Client
	sharded bool
	reg     *subs.Registry
	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup // receivers

	mu    sync.Mutex
	chans map[string]*receiver // the newest receiver of each channel
}

// receiver is the goroutine that receives one channel.
type receiver struct {
	stop context.CancelFunc
	done chan struct{} // closed once it has sent its UNSUBSCRIBE
}

func newPubSub(c valkey.Client, sharded bool) *pubsub {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pubsub{client: c, sharded: sharded, ctx: ctx, cancel: cancel, chans: make(map[string]*receiver)}
	p.reg = subs.New(p)
	return p
}

// Start does nothing (subs.Conn): receivers live per channel, started by Subscribe.
func (p *pubsub) Start() {}

// Subscribe starts a receiver for channel (subs.Conn). The Registry reports no error to its
// callers from here: the receiver's SUBSCRIBE is confirmed, or fails, through the Registry.
// The receiver sends SUBSCRIBE only once the channel's previous receiver, if any, has sent
// its UNSUBSCRIBE.
func (p *pubsub) Subscribe(_ context.Context, channel string) error {
	ctx, stop := context.WithCancel(p.ctx)
	r := &receiver{stop: stop, done: make(chan struct{})}
	p.mu.Lock()
	prev := p.chans[channel]
	p.chans[channel] = r
	p.mu.Unlock()
	p.wg.Add(1)
	go p.receive(ctx, channel, r, prev)
	return nil
}

// Unsubscribe stops the channel's receiver (subs.Conn), which then unsubscribes on the
// server.
func (p *pubsub) Unsubscribe(_ context.Context, channel string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.chans[channel]; r != nil {
		r.stop()
	}
}

// command returns SUBSCRIBE or SSUBSCRIBE (subscribe), or UNSUBSCRIBE or SUNSUBSCRIBE, for
// channel.
func (p *pubsub) command(channel string, subscribe bool) valkey.Completed {
	b := p.client.B()
	switch {
	case subscribe && p.sharded:
		return b.Ssubscribe().Channel(channel).Build()
	case subscribe:
		return b.Subscribe().Channel(channel).Build()
	case p.sharded:
		return b.Sunsubscribe().Channel(channel).Build()
	}
	return b.Unsubscribe().Channel(channel).Build()
}

// receive calls Client.Receive for channel until ctx ends, and again after each error
// (valkey-go reconnects meanwhile), reporting messages and the server's confirmations to
// the Registry; then it unsubscribes on the server.
func (p *pubsub) receive(ctx context.Context, channel string, r, prev *receiver) {
	defer p.wg.Done()
	defer close(r.done)
	defer func() {
		p.mu.Lock()
		if p.chans[channel] == r {
			delete(p.chans, channel)
		}
		p.mu.Unlock()
	}()
	if prev != nil {
		<-prev.done // its UNSUBSCRIBE must not reach the server after our SUBSCRIBE
	}
	var confirmed atomic.Bool // by the server, within the current Receive call
	hooked := valkey.WithOnSubscriptionHook(ctx, func(s valkey.PubSubSubscription) {
		if (s.Kind == "subscribe" || s.Kind == "ssubscribe") && s.Channel == channel {
			confirmed.Store(true)
			p.reg.Confirmed(channel) // a second confirmation is a re-subscription
		}
	})
	onMessage := func(m valkey.PubSubMessage) { p.reg.Message(channel, m.Message) }
receiving:
	for failures := 0; ; failures++ {
		err := p.client.Receive(hooked, p.command(channel, true), onMessage)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			p.reg.Fail(channel, closed(err)) // fails the waiting Subscribe calls, if not yet confirmed
		}
		if confirmed.Swap(false) {
			failures = 0
		}
		// Retry at once the first time, then back off, up to a second, while the server
		// stays away.
		select {
		case <-ctx.Done():
			break receiving
		case <-time.After(min(time.Duration(failures)*100*time.Millisecond, time.Second)):
		}
	}
	// A Receive that returned because ctx ended leaves the server subscribed.
	uctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = p.client.Do(uctx, p.command(channel, false)).Error()
}
