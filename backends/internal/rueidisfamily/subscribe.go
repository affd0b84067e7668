package rueidisfamily

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redlock/redlock/backends/internal/subs"
)

// Subscribe implements core.Subscriber (see backends/rueidis's Node.Subscribe): onMessage
// is called with every message on channel, and once more after the driver re-established
// the subscription on a new connection. Each channel is one Client.Receive call.
func (n *Node[M, P]) Subscribe(ctx context.Context, channel string, onMessage func(payload string)) (unsubscribe func(), err error) {
	return n.ps.reg.Subscribe(ctx, channel, onMessage)
}

// ShardedPubSub reports whether the Node is over a cluster client, whose Subscribe uses
// SSUBSCRIBE, so that core publishes release notifications with SPUBLISH.
func (n *Node[M, P]) ShardedPubSub() bool { return n.ps.sharded }

// Close stops the Node's pub/sub machinery: it ends every subscription (no callback starts
// after Close returns), unsubscribes on the server (waiting at most a second for it) and
// waits for the Node's goroutines to exit. It always returns nil. Eval keeps
// working; Subscribe fails afterwards. Close never closes the client. It is idempotent and
// safe for concurrent use, and must not be called from a Subscribe callback.
func (n *Node[M, P]) Close() error {
	n.ps.cancel()
	n.ps.reg.Close()
	n.ps.reg.Wait() // first: a Registry goroutine may still start a receiver
	n.ps.wg.Wait()
	return nil
}

// receiver is what pubsub needs of a Client.
type receiver interface {
	Driver
	Receive(ctx context.Context, channel string, sharded bool, onSubscription func(kind, channel string), onMessage func(payload string)) error
	Unsubscribe(ctx context.Context, channel string, sharded bool) error
}

// pubsub is the driver's side of a subs.Registry (its subs.Conn): a goroutine per
// subscribed channel, blocked in Client.Receive.
type pubsub struct {
	client  receiver
	sharded bool
	reg     *subs.Registry
	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup // receivers

	mu    sync.Mutex
	chans map[string]*channelReceiver // the newest receiver of each channel
}

// channelReceiver is the goroutine that receives one channel.
type channelReceiver struct {
	stop context.CancelFunc
	done chan struct{} // closed once it has sent its UNSUBSCRIBE
}

func newPubSub(c receiver, sharded bool) *pubsub {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pubsub{client: c, sharded: sharded, ctx: ctx, cancel: cancel, chans: make(map[string]*channelReceiver)}
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
	r := &channelReceiver{stop: stop, done: make(chan struct{})}
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

// receive calls Client.Receive for channel until ctx ends, and again after each error (the
// driver reconnects meanwhile), reporting messages and the server's confirmations to the
// Registry; then it unsubscribes on the server.
func (p *pubsub) receive(ctx context.Context, channel string, r, prev *channelReceiver) {
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
	onSubscription := func(kind, ch string) {
		if (kind == "subscribe" || kind == "ssubscribe") && ch == channel {
			confirmed.Store(true)
			p.reg.Confirmed(channel) // a second confirmation is a re-subscription
		}
	}
	onMessage := func(payload string) { p.reg.Message(channel, payload) }
receiving:
	for failures := 0; ; failures++ {
		err := p.client.Receive(ctx, channel, p.sharded, onSubscription, onMessage)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			p.reg.Fail(channel, closed(p.client, err)) // fails the waiting Subscribe calls, if not yet confirmed
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
	_ = p.client.Unsubscribe(uctx, channel, p.sharded)
}
