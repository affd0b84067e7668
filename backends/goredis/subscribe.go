package goredis

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redlock/redlock/backends/internal/subs"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
)

var (
	_ core.Subscriber    = (*Node)(nil)
	_ core.ShardedPubSub = (*Node)(nil)
)

// Subscribe implements core.Subscriber: onMessage is called with every message on channel,
// and once more, with an empty payload, after the pub/sub connection was re-established, since messages may have
// been missed meanwhile. It returns once the server confirmed the subscription; it fails
// with ctx's error if ctx ends first, with the driver's error if SUBSCRIBE cannot be sent,
// and with an error after Close.
//
// One pub/sub connection (a redis.PubSub) serves every channel of the node, and go-redis
// re-establishes it by itself. A cluster client subscribes with SSUBSCRIBE instead, over one
// redis.PubSub per channel, since each channel lives on the shard that owns its slot.
//
// unsubscribe is idempotent; once it returns no call to onMessage starts (one already under
// way may still be running). Callbacks run on a goroutine of the Node's and must not block;
// they may call unsubscribe. Subscribe is safe for concurrent use.
func (n *Node) Subscribe(ctx context.Context, channel string, onMessage func(payload string)) (unsubscribe func(), err error) {
	// Without Options.ContextTimeoutEnabled, go-redis connects and sends with its own
	// timeouts only; the subscription then completes in the background and is dropped.
	var abandoned atomic.Bool
	type result struct {
		unsubscribe func()
		err         error
	}
	done := make(chan result, 1)
	go func() {
		u, err := n.ps.reg.Subscribe(ctx, channel, func(payload string) {
			if !abandoned.Load() {
				onMessage(payload)
			}
		})
		done <- result{u, err}
	}()
	select {
	case r := <-done:
		return r.unsubscribe, r.err
	case <-ctx.Done():
		abandoned.Store(true)
		go func() {
			if r := <-done; r.unsubscribe != nil {
				r.unsubscribe()
			}
		}()
		return nil, ctx.Err()
	}
}

// ShardedPubSub reports whether the node is a Redis Cluster client, whose Subscribe uses
// SSUBSCRIBE, so that core publishes release notifications with SPUBLISH.
func (n *Node) ShardedPubSub() bool { return n.ps.sharded }

// Close stops the Node's pub/sub machinery: it ends every subscription (no callback starts
// after Close returns), closes the pub/sub connections and waits for the Node's goroutines to
// exit. Eval keeps working; Subscribe fails afterwards. Close never closes the go-redis
// client, which belongs to the caller. It is idempotent, and must not be called from a
// Subscribe callback. Against a server that does not answer, it may wait for the client's
// dial and read timeouts (unless Options.ContextTimeoutEnabled).
func (n *Node) Close() error {
	n.ps.close()
	return nil
}

// pubsub is the go-redis side of a subs.Registry. Its fields other than done and wg are
// guarded by the Registry's lock (all Conn methods run under it), and read by close only
// after the Registry is closed.
type pubsub struct {
	client  redis.UniversalClient
	sharded bool
	reg     *subs.Registry

	shared  *redis.PubSub            // !sharded: one connection for every channel
	perChan map[string]*redis.PubSub // sharded: one per channel

	closeOnce sync.Once
	done      chan struct{} // closed by close: readers stop retrying
	wg        sync.WaitGroup
}

func newPubSub(c redis.UniversalClient) *pubsub {
	_, sharded := c.(*redis.ClusterClient)
	p := &pubsub{client: c, sharded: sharded, perChan: make(map[string]*redis.PubSub), done: make(chan struct{})}
	p.reg = subs.New(p)
	return p
}

// conn returns the shared redis.PubSub. It connects on its first command.
func (p *pubsub) conn() *redis.PubSub {
	if p.shared == nil {
		p.shared = p.client.Subscribe(context.Background())
	}
	return p.shared
}

// Start starts the reader of the shared connection (subs.Conn).
func (p *pubsub) Start() {
	if !p.sharded {
		p.wg.Add(1)
		go p.read(p.conn(), true)
	}
}

// Subscribe sends SUBSCRIBE, or opens a connection and sends SSUBSCRIBE (subs.Conn).
func (p *pubsub) Subscribe(ctx context.Context, channel string) error {
	if !p.sharded {
		ps := p.conn()
		err := ps.Subscribe(ctx, channel)
		if err != nil { // forget the channel, or go-redis would re-subscribe it on reconnect
			_ = ps.Unsubscribe(ctx, channel)
		}
		return err
	}
	ps := p.client.SSubscribe(ctx)
	if err := ps.SSubscribe(ctx, channel); err != nil {
		_ = ps.Close()
		return err
	}
	p.perChan[channel] = ps
	p.wg.Add(1)
	go p.read(ps, false)
	return nil
}

// Unsubscribe sends UNSUBSCRIBE, or closes the channel's connection (subs.Conn).
func (p *pubsub) Unsubscribe(channel string) {
	if !p.sharded {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = p.conn().Unsubscribe(ctx, channel)
		return
	}
	if ps := p.perChan[channel]; ps != nil {
		delete(p.perChan, channel)
		_ = ps.Close()
	}
}

// read reports what ps receives to the Registry until ps is closed or, for the shared
// connection (idle true), no channel is left. After a read error go-redis reconnects and
// re-subscribes on the next Receive; the repeated confirmations tell the Registry.
func (p *pubsub) read(ps *redis.PubSub, idle bool) {
	defer p.wg.Done()
	for failures := 0; ; {
		msg, err := ps.Receive(context.Background())
		switch m := msg.(type) {
		case *redis.Message:
			p.reg.Message(m.Channel, m.Payload)
		case *redis.Subscription:
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				p.reg.Confirmed(m.Channel)
			}
		}
		if errors.Is(err, redis.ErrClosed) || idle && p.reg.Idle() {
			return
		}
		if err == nil {
			failures = 0
			continue
		}
		// Wait a little before the next attempt when the server stays unreachable.
		select {
		case <-p.done:
			return
		case <-time.After(min(time.Duration(failures)*100*time.Millisecond, time.Second)):
		}
		failures++
	}
}

func (p *pubsub) close() {
	p.closeOnce.Do(func() {
		p.reg.Close()
		close(p.done)
		if p.shared != nil {
			_ = p.shared.Close()
		}
		for _, ps := range p.perChan {
			_ = ps.Close()
		}
	})
	p.wg.Wait()
}
