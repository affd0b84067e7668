package redigo

import (
	"context"
	"sync"
	"time"

	"github.com/go-redlock/redlock/backends/internal/subs"
	"github.com/go-redlock/redlock/core"
	"github.com/gomodule/redigo/redis"
)

var _ core.Subscriber = (*Node)(nil)

// Subscribe implements core.Subscriber: onMessage is called with every message on channel,
// and once more, with an empty payload, after the pub/sub connection was re-established, since messages may have
// been missed meanwhile. It returns once the server confirmed the subscription; it fails
// with ctx's error if ctx ends first, or with the pool's error if no connection can be had.
// After Close, or on a pool closed before the Node took its pub/sub connection, the error
// matches core.ErrClosed (a pool closed later leaves that connection to the Node, and
// redigo does not say whether a pool is closed).
//
// One connection from the pool serves every channel of the node. It is taken on the first
// Subscribe and kept, subscribed or not, until Close; it is never returned to the pool in
// subscribed state. When it breaks, the Node takes another one and re-subscribes. There is
// no per-shard variant: redigo has no Redis Cluster client (see the package doc), so a Node
// never spans several masters.
//
// unsubscribe is idempotent; once it returns no call to onMessage starts (one already under
// way may still be running). Callbacks run on a goroutine of the Node's and must not block;
// they may call unsubscribe. Subscribe is safe for concurrent use.
func (n *Node) Subscribe(ctx context.Context, channel string, onMessage func(payload string)) (unsubscribe func(), err error) {
	return n.ps.reg.Subscribe(ctx, channel, onMessage)
}

// Close stops the Node's pub/sub machinery: it ends every subscription (no callback starts
// after Close returns), drops the pub/sub connection and waits for the Node's goroutines to
// exit. Eval keeps working; Subscribe fails afterwards. Close never closes a pool given to
// New, which belongs to the caller; a Node made by Dial closes its own pool last, and every
// call fails with an error that matches core.ErrClosed afterwards. It returns the error of
// closing that pool. It is idempotent, and must not be called from a Subscribe callback.
func (n *Node) Close() error {
	n.ps.close()
	if n.owned != nil {
		return n.owned.Close()
	}
	return nil
}

// pubsub is the redigo side of a subs.Registry (its subs.Conn): one connection, read by one
// goroutine while any channel is subscribed, written by the Registry's goroutines. Its mu
// guards conn and closed; wmu serializes the writers of conn (a redigo connection takes
// one writer and one reader at a time), and neither is the Registry's lock. mu is taken
// before the Registry's lock, never after: a new conn is put in place and its channels marked
// for re-subscription (Registry.Resubscribe) in one step under mu, and send picks conn and
// asks Registry.ResendPending under mu (see send).
type pubsub struct {
	pool   Pool
	reg    *subs.Registry
	ctx    context.Context // ends at close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	conn   redis.Conn // nil while disconnected
	closed bool

	wmu sync.Mutex

	beforeSend func(cmd, channel string) // tests only: called by send first
}

func newPubSub(pool Pool) *pubsub {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pubsub{pool: pool, ctx: ctx, cancel: cancel}
	p.reg = subs.New(p)
	return p
}

// Start starts the reader (subs.Conn).
func (p *pubsub) Start() {
	p.wg.Add(1)
	go p.read()
}

// Subscribe sends SUBSCRIBE (subs.Conn). Without a connection, or when the send fails,
// it leaves the channel to the reader, which (re)connects and re-subscribes every channel.
func (p *pubsub) Subscribe(_ context.Context, channel string) error {
	p.send("SUBSCRIBE", channel)
	return nil
}

// Unsubscribe sends UNSUBSCRIBE (subs.Conn).
func (p *pubsub) Unsubscribe(_ context.Context, channel string) { p.send("UNSUBSCRIBE", channel) }

// send writes cmd on the current connection, if any. A write blocked on a server that does
// not read ends when close breaks the connection.
//
// A SUBSCRIBE that the Registry decided before connect put the current connection in place
// is not sent: connect's Resubscribe marked its channel, which counts as subscribed from the
// decision on, and the Registry calls Subscribe for it again. Sent now as well, it would
// reach the connection twice; the server confirms both, and the Registry takes the second
// confirmation for a re-subscription after a reconnect (every callback of the channel called
// once more, for no lost message) or, if the channel was left and subscribed again
// meanwhile, for the confirmation of that later SUBSCRIBE, before the server has it. conn and
// ResendPending are read under mu, under which connect replaces conn and calls Resubscribe,
// so they agree.
func (p *pubsub) send(cmd, channel string) {
	if p.beforeSend != nil {
		p.beforeSend(cmd, channel)
	}
	p.mu.Lock()
	conn := p.conn
	if conn != nil && cmd == "SUBSCRIBE" && p.reg.ResendPending(channel) {
		conn = nil
	}
	p.mu.Unlock()
	if conn == nil {
		return
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if conn.Send(cmd, channel) == nil {
		_ = conn.Flush()
	}
}

// read reports what the connection receives to the Registry, and reconnects after an
// error, until no channel is left or close. It alone closes a connection it read from.
func (p *pubsub) read() {
	defer p.wg.Done()
	failures := 0 // in a row
	for !p.reg.Idle() {
		p.mu.Lock()
		conn := p.conn
		p.mu.Unlock()
		if conn == nil {
			if conn = p.connect(failures); conn == nil {
				failures++
				continue
			}
		}
		switch m := (redis.PubSubConn{Conn: conn}).ReceiveWithTimeout(0).(type) {
		case redis.Message:
			failures = 0
			p.reg.Message(m.Channel, string(m.Data))
		case redis.Subscription:
			failures = 0
			if m.Kind == "subscribe" {
				p.reg.Confirmed(m.Channel)
			}
		case error:
			failures++
			p.mu.Lock()
			p.conn = nil
			p.mu.Unlock()
			p.wmu.Lock()     // a writer that took conn before it was cleared has finished
			_ = conn.Close() // broken: the pool drops it
			p.wmu.Unlock()
		}
	}
}

// connect takes a connection from the pool, after a pause if the last attempts failed, and
// subscribes every channel on it. When none can be had, the Subscribe calls still waiting
// fail with the pool's error. It returns nil on failure or after close.
func (p *pubsub) connect(failures int) redis.Conn {
	if failures > 1 {
		select {
		case <-p.ctx.Done():
			return nil
		case <-time.After(min(time.Duration(failures-1)*100*time.Millisecond, time.Second)):
		}
	}
	conn, err := p.pool.GetContext(p.ctx)
	if err != nil {
		p.reg.Fail("", closed(err))
		return nil
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = conn.Close()
		return nil
	}
	p.conn = conn
	// Sent by the Registry's goroutines, on conn; marked under mu, with conn in place (see send).
	p.reg.Resubscribe(nil)
	p.mu.Unlock()
	return conn
}

func (p *pubsub) close() {
	p.cancel()
	p.reg.Close() // no Registry calls from here on, and the reader stops at its next turn
	p.mu.Lock()
	if p.conn != nil && !p.closed {
		breakConn(p.conn) // wakes the reader
	}
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
	p.reg.Wait() // their writes failed on the broken connection, or found none
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil { // no reader ran: nothing was subscribed
		_ = p.conn.Close()
		p.conn = nil
	}
}

// breakConn makes redigo close conn's socket at once, from any goroutine and without
// reading: redis.ReceiveContext with a context whose deadline has passed does exactly that.
// A reader blocked on conn then gets an error, and the pool drops conn when it is closed.
func breakConn(conn redis.Conn) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	cancel()
	_, _ = redis.ReceiveContext(conn, ctx)
}
