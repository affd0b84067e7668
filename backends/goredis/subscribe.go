package goredis

import (
	"context"
	"errors"
	"strings"
	"sync"
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
// and once more, with an empty payload, after the pub/sub connection was re-established,
// since messages may have been missed meanwhile. It returns once the server confirmed the
// subscription; it fails with ctx's error if ctx ends first (whatever the client's
// ContextTimeoutEnabled: the commands are sent by the Node's goroutines), or with the driver's
// error if SUBSCRIBE cannot be sent. After Close, or on a closed client, the error matches
// core.ErrClosed.
//
// One pub/sub connection (a redis.PubSub) serves every channel of the node, and go-redis
// re-establishes it by itself. A cluster client subscribes with SSUBSCRIBE, over one
// redis.PubSub per master, shared by every channel whose slot that master served when the
// channel was subscribed; go-redis reconnects it to the master of one of its channels.
// When that reconnection re-subscribes channels of several slots in one SSUBSCRIBE, which
// the server refuses (CROSSSLOT), the Node re-subscribes them one by one. A channel whose
// slot moved to another master while subscribed is not followed (resharding).
//
// unsubscribe is idempotent; once it returns no call to onMessage starts (one already under
// way may still be running). Callbacks run on a goroutine of the Node's and must not block;
// they may call unsubscribe. Subscribe is safe for concurrent use; a slow or unreachable
// master delays only the channels it serves.
func (n *Node) Subscribe(ctx context.Context, channel string, onMessage func(payload string)) (unsubscribe func(), err error) {
	return n.ps.reg.Subscribe(ctx, channel, onMessage)
}

// ShardedPubSub reports whether the node is a Redis Cluster client, whose Subscribe uses
// SSUBSCRIBE, so that core publishes release notifications with SPUBLISH.
func (n *Node) ShardedPubSub() bool { return n.ps.cluster != nil }

// Close stops the Node's pub/sub machinery: it ends every subscription (no callback starts
// after Close returns), closes the pub/sub connections, stops a connection being made in
// the background (see Eval), and waits for the Node's goroutines to exit. Eval keeps
// working; Subscribe fails afterwards. Close never closes a client given to New, which
// belongs to the caller; a Node made by Dial closes its own client last, and every call
// fails with an error that matches core.ErrClosed afterwards. It is idempotent, and must
// not be called from a Subscribe callback. Against a server that does not answer, it may
// wait for the client's dial and read timeouts (unless Options.ContextTimeoutEnabled). It
// returns the error of closing an owned client, the first time, and nil otherwise.
func (n *Node) Close() error {
	n.ps.close()
	n.warmMu.Lock()
	n.warmCancel()
	n.warmMu.Unlock()
	n.warmGroup.Wait()
	var err error
	if n.owned {
		n.shut.Do(func() { err = n.client.Close() })
	}
	return err
}

// pubsub is the go-redis side of a subs.Registry (its subs.Conn). Its own lock guards only
// its maps: no command is sent, and no connection dialled, under it.
type pubsub struct {
	client  redis.UniversalClient
	cluster *redis.ClusterClient // nil: not a cluster client
	reg     *subs.Registry

	mu     sync.Mutex
	shared *redis.PubSub     // !cluster: one connection for every channel
	shards map[string]*shard // cluster: by master address
	byChan map[string]*shard // cluster: the shard of each channel
	closed bool

	done chan struct{} // closed by close: readers stop retrying
	wg   sync.WaitGroup
}

// shard is the pub/sub connection to one cluster master, with the channels subscribed on it.
type shard struct {
	addr    string
	ps      *redis.PubSub
	chans   map[string]struct{}
	reading bool // its reader was started
}

func newPubSub(c redis.UniversalClient) *pubsub {
	p := &pubsub{client: c, shards: make(map[string]*shard), byChan: make(map[string]*shard), done: make(chan struct{})}
	p.cluster, _ = c.(*redis.ClusterClient)
	p.reg = subs.New(p)
	return p
}

// conn returns the shared redis.PubSub, which connects on its first command, or
// subs.ErrClosed after close.
func (p *pubsub) conn() (*redis.PubSub, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, subs.ErrClosed
	}
	if p.shared == nil {
		p.shared = p.client.Subscribe(context.Background())
	}
	return p.shared, nil
}

// Start starts the reader of the shared connection (subs.Conn). Shards start theirs.
func (p *pubsub) Start() {
	if p.cluster != nil {
		return
	}
	ps, err := p.conn()
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.wg.Add(1)
		go p.read(ps, nil)
	}
}

// Subscribe sends SUBSCRIBE, or SSUBSCRIBE on the connection of channel's master
// (subs.Conn). A closed client's error matches core.ErrClosed.
func (p *pubsub) Subscribe(ctx context.Context, channel string) error {
	return closed(p.subscribe(ctx, channel))
}

func (p *pubsub) subscribe(ctx context.Context, channel string) error {
	if p.cluster == nil {
		ps, err := p.conn()
		if err != nil {
			return err
		}
		err = ps.Subscribe(ctx, channel)
		if err != nil { // forget the channel, or go-redis would re-subscribe it on reconnect
			_ = ps.Unsubscribe(ctx, channel)
		}
		return err
	}
	sh, err := p.join(ctx, channel)
	if err != nil {
		return err
	}
	if err := sh.ps.SSubscribe(ctx, channel); err != nil {
		p.leave(ctx, channel)
		return err
	}
	// The reader starts after the first SSUBSCRIBE: before it, the PubSub would connect to
	// a random master.
	p.mu.Lock()
	start := !sh.reading && !p.closed && p.shards[sh.addr] == sh
	if start {
		sh.reading = true
		p.wg.Add(1)
	}
	p.mu.Unlock()
	if start {
		go p.read(sh.ps, sh)
	}
	return nil
}

// Unsubscribe sends UNSUBSCRIBE, or SUNSUBSCRIBE on channel's shard, which it closes when
// channel was its last (subs.Conn).
func (p *pubsub) Unsubscribe(ctx context.Context, channel string) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if p.cluster == nil {
		if ps, err := p.conn(); err == nil {
			_ = ps.Unsubscribe(ctx, channel)
		}
		return
	}
	p.leave(ctx, channel)
}

// join returns the shard of channel's master, made if need be, with channel added to it.
// It asks the cluster client for the master, which may load the cluster's slots.
func (p *pubsub) join(ctx context.Context, channel string) (*shard, error) {
	p.mu.Lock()
	sh := p.byChan[channel] // SUBSCRIBE again, after a reconnect
	p.mu.Unlock()
	if sh != nil {
		return sh, nil
	}
	master, err := p.cluster.MasterForKey(ctx, channel)
	if err != nil {
		return nil, err
	}
	addr := master.Options().Addr
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, subs.ErrClosed
	}
	sh = p.shards[addr]
	if sh == nil {
		// A PubSub without channels: no connection yet.
		sh = &shard{addr: addr, ps: p.cluster.SSubscribe(context.Background()), chans: make(map[string]struct{})}
		p.shards[addr] = sh
	}
	sh.chans[channel] = struct{}{}
	p.byChan[channel] = sh
	return sh, nil
}

// leave removes channel from its shard: SUNSUBSCRIBE, or closing the shard's connection when
// no channel is left on it.
func (p *pubsub) leave(ctx context.Context, channel string) {
	p.mu.Lock()
	sh := p.byChan[channel]
	if sh == nil {
		p.mu.Unlock()
		return
	}
	delete(p.byChan, channel)
	delete(sh.chans, channel)
	last := len(sh.chans) == 0
	if last && p.shards[sh.addr] == sh {
		delete(p.shards, sh.addr)
	}
	p.mu.Unlock()
	if last {
		_ = sh.ps.Close()
	} else {
		_ = sh.ps.SUnsubscribe(ctx, channel)
	}
}

// read reports what ps receives to the Registry until ps is closed or, for the shared
// connection (sh nil), no channel is left. After a read error go-redis reconnects and
// re-subscribes on the next Receive; the repeated confirmations tell the Registry.
func (p *pubsub) read(ps *redis.PubSub, sh *shard) {
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
		if errors.Is(err, redis.ErrClosed) || sh == nil && p.reg.Idle() {
			return
		}
		var rerr redis.Error
		if sh != nil && errors.As(err, &rerr) && strings.HasPrefix(err.Error(), "CROSSSLOT") {
			// go-redis reconnected and re-subscribed the shard's channels in one SSUBSCRIBE,
			// which the server refused: subscribe them one by one.
			p.resubscribe(sh)
			continue
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

// resubscribe has the Registry send SSUBSCRIBE again for each channel of sh.
func (p *pubsub) resubscribe(sh *shard) {
	p.mu.Lock()
	chans := make(map[string]struct{}, len(sh.chans))
	for ch := range sh.chans {
		chans[ch] = struct{}{}
	}
	p.mu.Unlock()
	p.reg.Resubscribe(func(ch string) bool { _, ok := chans[ch]; return ok })
}

func (p *pubsub) close() {
	p.reg.Close()
	p.mu.Lock()
	first := !p.closed
	p.closed = true
	shared, shards := p.shared, p.shards
	p.shards = make(map[string]*shard)
	p.mu.Unlock()
	if first {
		close(p.done)
	}
	if shared != nil {
		_ = shared.Close()
	}
	for _, sh := range shards {
		_ = sh.ps.Close()
	}
	p.reg.Wait() // no connection is made once closed is set
	p.wg.Wait()
}
