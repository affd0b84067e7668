package conformance

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pubsubChecks check a Node that implements core.Subscriber against the Subscriber
// contract. Notifications are published by the suite's own client, as the release script
// publishes them: PUBLISH (SPUBLISH for a Node whose ShardedPubSub reports true) on a
// waiter's channel, of an empty message (a wake-up) or a hand-over, whose payload must
// reach onMessage unchanged.
func pubsubChecks() []check {
	return []check{
		{"delivery", checkDelivery},
		{"ready-means-confirmed/new-connection", func(t *testing.T, e *env) { checkReadyMeansConfirmed(t, e, false) }},
		{"ready-means-confirmed/open-connection", func(t *testing.T, e *env) { checkReadyMeansConfirmed(t, e, true) }},
		{"isolation", checkIsolation},
		{"unsubscribe", checkUnsubscribe},
		{"unsubscribe-on-server", checkUnsubscribeOnServer},
		{"two-subscribers", checkTwoSubscribers},
		{"shared-connection", checkSharedConnection},
		{"recovery", checkRecovery},
		{"subscribe-deadline/new-connection", func(t *testing.T, e *env) { checkSubscribeDeadline(t, e, false) }},
		{"subscribe-deadline/open-connection", func(t *testing.T, e *env) { checkSubscribeDeadline(t, e, true) }},
		{"semaphore-wake", checkSemaphoreWake},
	}
}

// skipUnlessSubscriber skips the pub/sub checks, once, for a Node that does not implement
// core.Subscriber. It asks NewNode for one Node, to learn its type.
func skipUnlessSubscriber(t *testing.T, e *env) {
	n := e.node(t, e.server(t))
	if _, ok := n.(core.Subscriber); !ok {
		t.Skipf("conformance: the Node (%T) does not implement core.Subscriber: pub/sub checks skipped", n)
	}
}

// pubsub is the Subscriber under test on one server.
type pubsub struct {
	t       *testing.T
	addr    string // the server's own address, for the suite's client
	sub     core.Subscriber
	sharded bool
}

// newPubsub makes a Node on nodeAddr (the server at addr, or a proxy to it) and returns it
// as a Subscriber; it skips the check if the Node is not one.
func newPubsub(t *testing.T, e *env, addr, nodeAddr string) *pubsub {
	t.Helper()
	n := e.node(t, nodeAddr)
	sub, ok := n.(core.Subscriber)
	if !ok {
		t.Skipf("conformance: the Node (%T) does not implement core.Subscriber: pub/sub checks skipped", n)
	}
	sh, ok := n.(core.ShardedPubSub)
	sharded := ok && sh.ShardedPubSub()
	if sharded && e.kind == Miniredis {
		t.Skip("conformance: the Node uses sharded pub/sub (ShardedPubSub), which miniredis does not have: checked on redis-server only")
	}
	return &pubsub{t: t, addr: addr, sub: sub, sharded: sharded}
}

// channel returns a release channel named after the check.
func channel(name string) string { return core.NewKeys("conformance:", name).Channel }

// counter counts calls of an onMessage callback, and keeps the payloads it was given.
type counter struct {
	n        atomic.Int64
	mu       sync.Mutex
	payloads map[string]bool
}

func (c *counter) onMessage(payload string) {
	c.mu.Lock()
	if c.payloads == nil {
		c.payloads = make(map[string]bool)
	}
	c.payloads[payload] = true
	c.mu.Unlock()
	c.n.Add(1)
}

func (c *counter) calls() int64 { return c.n.Load() }

// got reports whether onMessage was given payload.
func (c *counter) got(payload string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.payloads[payload]
}

// grows waits up to waitBound for more than from calls.
func (c *counter) grows(from int64) bool {
	return eventually(waitBound, func() bool { return c.calls() > from })
}

// subscribe subscribes c to ch and fails the check on an error. t.Cleanup unsubscribes.
func (p *pubsub) subscribe(ch string, c *counter) (unsubscribe func()) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	unsub, err := p.sub.Subscribe(ctx, ch, c.onMessage)
	require.NoError(p.t, err, "Subscribe(%q) on a healthy server", ch)
	require.NotNil(p.t, unsub, "Subscribe(%q) returned a nil unsubscribe function and no error", ch)
	p.t.Cleanup(func() { p.unsubscribe(unsub) })
	return func() { p.unsubscribe(unsub) }
}

// unsubscribe calls unsub, failing the check if it panics or blocks.
func (p *pubsub) unsubscribe(unsub func()) {
	p.t.Helper()
	var panicked any
	_, ok := withinBound(p.t, waitBound, func() {}, func() {
		defer func() { panicked = recover() }()
		unsub()
	})
	if !ok {
		p.t.Errorf("unsubscribe had not returned after %v", 2*waitBound)
	} else if panicked != nil {
		p.t.Errorf("unsubscribe panicked (it must be idempotent): %v", panicked)
	}
}

// publish sends a release notification on ch, with payload, and returns how many
// subscribers the server delivered it to.
func (p *pubsub) publish(ch, payload string) int64 {
	p.t.Helper()
	n, _ := admin(p.t, p.addr, p.publishCmd(), ch, payload).(int64)
	return n
}

// publishCmd is the command that publishes a release notification as core's release
// script does for the Node: SPUBLISH if its ShardedPubSub reports true, PUBLISH otherwise.
func (p *pubsub) publishCmd() string {
	if p.sharded {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// countCmd is the PUBSUB subcommand that counts the subscribers of a channel of the kind the
// Node uses: SHARDNUMSUB for a Node whose ShardedPubSub reports true, NUMSUB otherwise.
func (p *pubsub) countCmd() string {
	if p.sharded {
		return "SHARDNUMSUB"
	}
	return "NUMSUB"
}

// otherKind returns, for a failure message about a subscription the server does not count,
// a note when it counts subscribers of ch of the other kind of pub/sub than the Node reports
// (SHARDNUMSUB for a Node that does not report core.ShardedPubSub, NUMSUB for one that
// does); "" otherwise (and on miniredis, which has no SHARDNUMSUB).
func (p *pubsub) otherKind(ch string) string {
	cmd := "SHARDNUMSUB"
	if p.sharded {
		cmd = "NUMSUB"
	}
	var total int64
	for _, a := range masters(p.addr) {
		v, err := do(a, "PUBSUB", cmd, ch)
		if r, _ := v.([]any); err == nil && len(r) == 2 {
			n, _ := r[1].(int64)
			total += n
		}
	}
	switch {
	case total == 0:
		return ""
	case !p.sharded:
		return fmt.Sprintf("; the server counts %d subscribers of %q by PUBSUB SHARDNUMSUB: the Node subscribed with SSUBSCRIBE, so it must implement core.ShardedPubSub (reporting true) on the outer Node, the one given to core, or core's release script publishes with PUBLISH, which no SSUBSCRIBE receives (a wrapper that embeds only core.Node and core.Subscriber hides it)", total, ch)
	default:
		return fmt.Sprintf("; the server counts %d subscribers of %q by PUBSUB NUMSUB: the Node subscribed with SUBSCRIBE, though its core.ShardedPubSub reports true, so core's release script publishes with SPUBLISH, which no SUBSCRIBE receives: report false (or do not implement core.ShardedPubSub) on the outer Node, or subscribe with SSUBSCRIBE", total, ch)
	}
}

// subscribers returns how many connections the server has subscribed to ch.
func (p *pubsub) subscribers(ch string) int64 {
	p.t.Helper()
	cmd := p.countCmd()
	var total int64
	for _, reply := range adminAll(p.t, p.addr, "PUBSUB", cmd, ch) { // on a cluster, each master counts its own
		v, _ := reply.([]any)
		if len(v) != 2 {
			p.t.Fatalf("conformance: PUBSUB %s replied %#v", cmd, v)
		}
		n, _ := v[1].(int64)
		total += n
	}
	return total
}

// delivered publishes on ch, with a payload of its own, and checks that the server had a
// subscriber and that c was called with that payload, saying when in the failure message.
func (p *pubsub) delivered(ch string, c *counter, when string) bool {
	p.t.Helper()
	before := c.calls()
	// A hand-over's shape (see release.lua), distinct per channel and call.
	payload := fmt.Sprintf("%s.%d %d", ch, before+1, bigFence)
	if n := p.publish(ch, payload); n < 1 {
		p.t.Errorf("%s, %s on %q reached %d subscribers: the subscription must be active on the server%s", when, p.publishCmd(), ch, n, p.otherKind(ch))
		return false
	}
	if !c.grows(before) {
		p.t.Errorf("%s, a notification published on %q was not delivered to onMessage within %v", when, ch, waitBound)
		return false
	}
	if !eventually(waitBound, func() bool { return c.got(payload) }) {
		p.t.Errorf("%s, a notification published on %q with payload %q reached onMessage without it: the payload must be passed unchanged", when, ch, payload)
		return false
	}
	return true
}

func checkDelivery(t *testing.T, e *env) {
	addr := e.server(t)
	p := newPubsub(t, e, addr, addr)
	ch := channel("delivery")
	var c counter
	p.subscribe(ch, &c)
	// No wait here: Subscribe must return only once the server has the subscription.
	p.delivered(ch, &c, "right after Subscribe returned")
}

// checkReadyMeansConfirmed: the Node reaches the server through a proxy that holds back
// everything the server sends: open, once the Node's pub/sub connection is up (a first
// subscription was confirmed); new, from the Node's first SUBSCRIBE (or SSUBSCRIBE) on, on
// a Node that never subscribed (the replies to a new connection's handshake pass). Subscribe
// must not return while the server's confirmation is held back, though the server already
// has the subscription; once the proxy lets it through, Subscribe returns and delivery works.
func checkReadyMeansConfirmed(t *testing.T, e *env, open bool) {
	e.skipOnCluster(t, "it puts a proxy in front of the server, and a cluster client dials the addresses the cluster announces")
	addr := e.server(t)
	px := startProxy(t, addr)
	p := newPubsub(t, e, addr, px.addr())
	defer px.close() // before the Node's cleanup
	ch := channel("ready")
	what := "the first subscription of a Node (on a new pub/sub connection)"
	if open {
		var warm counter
		p.subscribe(channel("ready-warm"), &warm)
		if !eventually(waitBound, func() bool { return p.subscribers(channel("ready-warm")) > 0 }) {
			t.Fatalf("the server counts no subscriber of %q %v after Subscribe returned: Subscribe must return only once the subscription is active on the server%s", channel("ready-warm"), waitBound, p.otherKind(channel("ready-warm")))
		}
		what = "a subscription on an open pub/sub connection"
		px.hold() // the Node's pub/sub connection is open from here on
	} else {
		px.holdFromSubscribe()
	}
	type result struct {
		unsub func()
		err   error
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitBound)
	defer cancel()
	var c counter
	go func() {
		unsub, err := p.sub.Subscribe(ctx, ch, c.onMessage)
		done <- result{unsub, err}
	}()
	if !eventually(waitBound, func() bool { return p.subscribers(ch) > 0 }) {
		px.release()
		t.Fatalf("the Node's SUBSCRIBE to %q (%s) never reached the server (PUBSUB %s) within %v, while the proxy held back only the server's replies: does Subscribe wait for another reply first, such as a new connection's handshake where a pub/sub connection was already open?%s", ch, what, p.countCmd(), waitBound, p.otherKind(ch))
	}
	time.Sleep(quietPeriod)
	select {
	case r := <-done:
		px.release()
		if r.unsub != nil {
			p.unsubscribe(r.unsub)
		}
		t.Fatalf("Subscribe(%q), %s, returned (error %v) while the server's confirmation was held back: it must return only once the server confirmed the subscription, or a PUBLISH right after it may be missed", ch, what, r.err)
	default:
	}
	px.release()
	select {
	case r := <-done:
		require.NoError(t, r.err, "Subscribe(%q) once the server's confirmation reached the Node", ch)
		t.Cleanup(func() { p.unsubscribe(r.unsub) })
		p.delivered(ch, &c, "after Subscribe returned on the server's confirmation")
	case <-time.After(waitBound):
		t.Fatalf("Subscribe(%q) had not returned %v after the server's confirmation reached the Node", ch, waitBound)
	}
}

// checkIsolation: each handler gets the messages of its own channel only.
func checkIsolation(t *testing.T, e *env) {
	addr := e.server(t)
	p := newPubsub(t, e, addr, addr)
	chA, chB := channel("isolation-a"), channel("isolation-b")
	var a, b counter
	p.subscribe(chA, &a)
	p.subscribe(chB, &b)
	p.delivered(chA, &a, "with two channels subscribed on one Node")
	p.delivered(chB, &b, "with two channels subscribed on one Node")
	time.Sleep(quietPeriod)
	a.mu.Lock()
	b.mu.Lock()
	defer a.mu.Unlock()
	defer b.mu.Unlock()
	for payload := range b.payloads {
		if payload != "" && a.payloads[payload] {
			t.Errorf("onMessage of %q was given %q, published on %q: a Subscriber must deliver each message only to the handlers of its own channel", chA, payload, chB)
		}
	}
	for payload := range a.payloads {
		if payload != "" && b.payloads[payload] {
			t.Errorf("onMessage of %q was given %q, published on %q: a Subscriber must deliver each message only to the handlers of its own channel", chB, payload, chA)
		}
	}
}

// checkUnsubscribeOnServer: once the last subscription to a channel is unsubscribed, the
// server no longer counts a subscriber of it (PUBSUB NUMSUB, or SHARDNUMSUB).
func checkUnsubscribeOnServer(t *testing.T, e *env) {
	addr := e.server(t)
	p := newPubsub(t, e, addr, addr)
	ch := channel("unsubscribe-on-server")
	var c counter
	unsub := p.subscribe(ch, &c)
	require.Positive(t, p.subscribers(ch), "after Subscribe(%q) returned, the server counts no subscriber of it (PUBSUB %s)%s", ch, p.countCmd(), p.otherKind(ch))
	unsub()
	if !eventually(waitBound, func() bool { return p.subscribers(ch) == 0 }) {
		t.Errorf("%v after unsubscribe of the only subscription to %q, the server still counts %d subscribers: the backend must unsubscribe on the server (UNSUBSCRIBE, SUNSUBSCRIBE) once no subscription to a channel is left, or channels pile up there for the life of the process", waitBound, ch, p.subscribers(ch))
	}
}

func checkUnsubscribe(t *testing.T, e *env) {
	addr := e.server(t)
	p := newPubsub(t, e, addr, addr)
	ch := channel("unsubscribe")
	var c counter
	unsub := p.subscribe(ch, &c)
	if !p.delivered(ch, &c, "after Subscribe returned") {
		return
	}
	unsub()
	unsub() // idempotent
	after := c.calls()
	for range 3 {
		p.publish(ch, "")
	}
	time.Sleep(quietPeriod)
	assert.Equal(t, after, c.calls(), "onMessage was called after unsubscribe returned: unsubscribe must stop delivery to it")
}

func checkTwoSubscribers(t *testing.T, e *env) {
	addr := e.server(t)
	p := newPubsub(t, e, addr, addr)
	ch := channel("two-subscribers")
	var a, b counter
	unsubA := p.subscribe(ch, &a)
	p.subscribe(ch, &b)
	a0, b0 := a.calls(), b.calls()
	require.GreaterOrEqual(t, p.publish(ch, ""), int64(1), "with two subscriptions to %q, %s reached no subscriber%s", ch, p.publishCmd(), p.otherKind(ch))
	assert.True(t, a.grows(a0), "with two subscriptions to one channel, the first onMessage was not called within %v", waitBound)
	assert.True(t, b.grows(b0), "with two subscriptions to one channel, the second onMessage was not called within %v", waitBound)

	unsubA()
	a1 := a.calls()
	p.delivered(ch, &b, "after the first of two subscriptions to one channel was unsubscribed, the second must stay active:")
	time.Sleep(quietPeriod)
	assert.Equal(t, a1, a.calls(), "onMessage of an unsubscribed subscription was called while another subscription to the same channel stayed")
}

func checkSharedConnection(t *testing.T, e *env) {
	addr := e.server(t)
	nodeAddr := addr
	var px *proxy // counts the connections that subscribe, where CLIENT LIST cannot (miniredis)
	if e.kind != RedisCluster {
		px = startProxy(t, addr)
		nodeAddr = px.addr()
	}
	p := newPubsub(t, e, addr, nodeAddr)
	chans := []string{channel("shared-1"), channel("shared-2"), channel("shared-3")}
	counters := make([]counter, len(chans)+1)
	for i, ch := range chans {
		p.subscribe(ch, &counters[i])
	}
	p.subscribe(chans[0], &counters[len(chans)]) // the same channel twice
	for i, ch := range chans {
		p.delivered(ch, &counters[i], fmt.Sprintf("with %d channels subscribed on one Node", len(chans)))
	}
	if px != nil {
		assert.Equal(t, 1, px.subscribers(), "with %d channels subscribed on one Node, %d connections sent SUBSCRIBE: a backend shares one pub/sub connection per node among all channels", len(chans), px.subscribers())
	}
	if e.kind == Miniredis {
		t.Log("conformance: miniredis has no CLIENT LIST: pub/sub connections counted at a proxy only")
		return
	}
	for i, reply := range adminAll(t, addr, "CLIENT", "LIST", "TYPE", "pubsub") {
		list, _ := reply.(string)
		conns := strings.Count(strings.TrimSpace(list), "\n") + 1
		if strings.TrimSpace(list) == "" {
			conns = 0
		}
		want := assert.Equal
		if e.kind == RedisCluster {
			want = func(t assert.TestingT, limit, conns any, msgAndArgs ...any) bool {
				return assert.LessOrEqual(t, conns, limit, msgAndArgs...)
			}
		}
		want(t, 1, conns, "with %d channels subscribed on one Node, the server %s has %d pub/sub connections: a backend shares one pub/sub connection per node (per master of a cluster) among all channels\n%s", len(chans), masters(addr)[i], conns, list)
	}
}

// checkRecovery kills the Node's pub/sub connection: on redis-server with CLIENT KILL TYPE
// pubsub, on miniredis (which has no CLIENT KILL) by closing every connection of a proxy the
// Node goes through. The backend must re-subscribe by itself, call onMessage once because
// messages may have been lost, and deliver later messages.
func checkRecovery(t *testing.T, e *env) {
	addr := e.server(t)
	kill := func() {
		var killed int64
		for _, n := range adminAll(t, addr, "CLIENT", "KILL", "TYPE", "pubsub") {
			k, _ := n.(int64)
			killed += k
		}
		require.Positive(t, killed, "CLIENT KILL TYPE pubsub found no pub/sub connection to kill, though Subscribe returned")
	}
	nodeAddr := addr
	if e.kind == Miniredis {
		px := startProxy(t, addr)
		nodeAddr, kill = px.addr(), px.cut
	}
	p := newPubsub(t, e, addr, nodeAddr)
	ch := channel("recovery")
	var c counter
	p.subscribe(ch, &c)
	if !p.delivered(ch, &c, "before the connection was killed") {
		return
	}
	before := c.calls()
	kill()
	if !eventually(waitBound, func() bool { return p.subscribers(ch) > 0 }) {
		t.Fatalf("after the server killed the pub/sub connection, the backend had not re-subscribed to %q within %v (PUBSUB %s): it must reconnect and re-subscribe by itself%s", ch, waitBound, p.countCmd(), p.otherKind(ch))
	}
	if !c.grows(before) {
		t.Fatalf("after the server killed the pub/sub connection, the backend re-subscribed but did not call onMessage within %v: it must call onMessage once after recovery, because messages may have been lost meanwhile", waitBound)
	}
	t.Logf("onMessage was called %d times on recovery", c.calls()-before)
	p.delivered(ch, &c, "after the backend recovered from a killed connection")
}

// checkSubscribeDeadline: against a server that stopped answering, Subscribe must return
// soon after its context's deadline, with an error. open: the Node already has an active
// subscription (an open pub/sub connection) when the server stops answering.
func checkSubscribeDeadline(t *testing.T, e *env, open bool) {
	e.skipOnCluster(t, "it puts a proxy in front of the server, and a cluster client dials the addresses the cluster announces")
	addr := e.server(t)
	px := startProxy(t, addr)
	p := newPubsub(t, e, addr, px.addr())
	defer px.close() // before the Node's cleanup: closing a client must not wait for a frozen server
	if open {
		var c counter
		p.subscribe(channel("deadline-open"), &c)
	}
	px.freeze()
	ctx, cancel := context.WithTimeout(context.Background(), ctxDeadline)
	defer cancel()
	var unsub func()
	var err error
	bound := ctxDeadline + ctxBound
	elapsed, ok := withinBound(t, bound, px.close, func() {
		unsub, err = p.sub.Subscribe(ctx, channel("deadline"), func(string) {})
	})
	px.close() // from here on, connections fail at once: nothing the backend does can hang
	if !ok {
		t.Fatalf("Subscribe with a context with a deadline %v away, against a server that never replies, had not returned within %v: Subscribe must honour ctx while it waits for the subscription", ctxDeadline, bound)
	}
	if err == nil {
		if unsub != nil {
			p.unsubscribe(unsub)
		}
		t.Fatalf("Subscribe against a server that never replies returned no error after %v: it must return only once the subscription is active on the server, or ctx's error", elapsed.Round(time.Millisecond))
	}
	t.Logf("Subscribe returned after %v: %v", elapsed.Round(time.Millisecond), err)
}
