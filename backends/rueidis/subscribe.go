package rueidis

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redlock/redlock/backends/internal/subs"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/rueidis"
)

var (
	_ core.Subscriber    = (*Node)(nil)
	_ core.ShardedPubSub = (*Node)(nil)
)

// Subscribe implements core.Subscriber: onMessage is called with every message on channel,
// and once more after the subscription was re-established on a new connection, since
// messages may have been missed meanwhile. It returns once the server confirmed the
// subscription; it fails with ctx's error if ctx ends first, or with the client's error if
// SUBSCRIBE fails. After Close, or on a closed client, the error matches core.ErrClosed.
//
// Each channel is one rueidis Client.Receive call, which rueidis multiplexes with every
// other channel over the client's one pub/sub connection (per cluster shard; with RESP3 the
// pipelined command connection itself). A cluster client subscribes with SSUBSCRIBE.
//
// unsubscribe is idempotent; once it returns no call to onMessage starts (one already under
// way may still be running). Callbacks run on a goroutine of the Node's or rueidis's and must
// not block; they may call unsubscribe. Subscribe is safe for concurrent use.
func (n *Node) Subscribe(ctx context.Context, channel string, onMessage func(payload string)) (unsubscribe func(), err error) {
	return n.ps.reg.Subscribe(ctx, channel, onMessage)
}

// ShardedPubSub reports whether the node is a Redis Cluster client, whose Subscribe uses
// SSUBSCRIBE, so that core publishes release notifications with SPUBLISH.
func (n *Node) ShardedPubSub() bool { return n.ps.sharded }

// Close stops the Node's pub/sub machinery: it ends every subscription (no callback starts
// after Close returns), unsubscribes on the server (waiting at most a second for it) and
// waits for the Node's goroutines to exit. Eval keeps working; Subscribe fails afterwards.
// Close never closes the rueidis client, which belongs to the caller. It is idempotent, and
// must not be called from a Subscribe callback.
func (n *Node) Close() error {
	n.ps.cancel()
	n.ps.reg.Close()
	n.ps.reg.Wait() // before wg.Wait: a Registry goroutine may still start a receiver
	n.ps.wg.Wait()
	return nil
}

// pubsub is the rueidis side of a subs.Registry: one goroutine per channel, blocked in
// Client.Receive.
type pubsub struct {
	client  rueidis.Client
	sharded bool
	reg     *subs.Registry
	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu    sync.Mutex
	chans map[string]*receiver
}

// receiver is the goroutine that receives one channel.
type receiver struct {
	stop context.CancelFunc
	done chan struct{} // closed once it has unsubscribed on the server
}

func newPubSub(c rueidis.Client, sharded bool) *pubsub {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pubsub{client: c, sharded: sharded, ctx: ctx, cancel: cancel, chans: make(map[string]*receiver)}
	p.reg = subs.New(p)
	return p
}

// Start does nothing: receivers live per channel (subs.Conn).
func (p *pubsub) Start() {}

// Subscribe starts the channel's receiver (subs.Conn). It begins once the channel's
// previous receiver, if any, has unsubscribed on the server.
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

// Unsubscribe stops the channel's receiver (subs.Conn).
func (p *pubsub) Unsubscribe(_ context.Context, channel string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.chans[channel]; r != nil {
		r.stop()
	}
}

// receive calls Client.Receive until ctx ends, again after each error (rueidis reconnects),
// reporting messages and subscribe confirmations to the Registry, then unsubscribes.
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
		<-prev.done // its UNSUBSCRIBE must not overtake our SUBSCRIBE
	}
	var confirmed atomic.Bool // in the current Receive
	hooked := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
		if (s.Kind == "subscribe" || s.Kind == "ssubscribe") && s.Channel == channel {
			confirmed.Store(true)
			p.reg.Confirmed(channel)
		}
	})
	onMessage := func(m rueidis.PubSubMessage) { p.reg.Message(channel, m.Message) }
	for failures := 0; ; failures++ {
		cmd := p.client.B().Subscribe().Channel(channel).Build()
		if p.sharded {
			cmd = p.client.B().Ssubscribe().Channel(channel).Build()
		}
		err := p.client.Receive(hooked, cmd, onMessage)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			p.reg.Fail(channel, closed(err)) // only if not yet confirmed: that Subscribe fails
		}
		if confirmed.Swap(false) {
			failures = 0
		}
		select { // the first retry at once, then wait a little while the server stays away
		case <-ctx.Done():
		case <-time.After(min(time.Duration(failures)*100*time.Millisecond, time.Second)):
		}
	}
	// A Receive that returns by its context leaves the server subscribed.
	uctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cmd := p.client.B().Unsubscribe().Channel(channel).Build()
	if p.sharded {
		cmd = p.client.B().Sunsubscribe().Channel(channel).Build()
	}
	_ = p.client.Do(uctx, cmd).Error()
}
