package conformance

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// outage is how long checkRecoveryAfterOutage keeps the server unreachable: longer than a
// few seconds, as a restart or a network cut may last, and longer than a backend's few
// quick reconnection attempts.
const outage = 3 * time.Second

// burst is how many messages checkNoCallAfterUnsubscribe has published at once.
const burst = 200

// pubsubContractChecks are the pubsub group's checks of the rest of the Subscriber
// contract: unsubscribe twice, a second Subscribe to a channel still being subscribed, a long
// outage, and no call after unsubscribe returned.
func pubsubContractChecks() []check {
	return []check{
		{"unsubscribe-twice", checkUnsubscribeTwice},
		{"subscribe-while-subscribing", checkSubscribeWhileSubscribing},
		{"recovery-after-outage", checkRecoveryAfterOutage},
		{"no-call-after-unsubscribe", checkNoCallAfterUnsubscribe},
	}
}

// checkUnsubscribeTwice: with two subscriptions to one channel, calling the first's
// unsubscribe twice leaves the second subscribed, on the server too.
func checkUnsubscribeTwice(t *testing.T, e *env) {
	addr := e.server(t)
	p := newPubsub(t, e, addr, addr)
	ch := channel("unsubscribe-twice")
	var a, b counter
	unsubA := p.subscribe(ch, &a)
	p.subscribe(ch, &b)
	unsubA()
	unsubA()
	if n := p.subscribers(ch); n < 1 {
		t.Errorf("after the first of two subscriptions to %q was unsubscribed twice, the server counts %d subscribers of it: unsubscribe is idempotent, and other subscriptions to the same channel stay active (does the backend count down a channel at every call?)", ch, n)
	}
	p.delivered(ch, &b, "after the first of two subscriptions to one channel was unsubscribed twice, the second must stay active (unsubscribe is idempotent):")
}

// checkSubscribeWhileSubscribing: a second Subscribe to a channel whose first Subscribe's
// confirmation a proxy holds back (the connection listens on it, as the server already
// counts) returns only once the subscription is active, not because the backend has the
// channel already; once the confirmation comes, both deliver.
func checkSubscribeWhileSubscribing(t *testing.T, e *env) {
	e.skipOnCluster(t, "it puts a proxy in front of the server, and a cluster client dials the addresses the cluster announces")
	addr := e.server(t)
	px := startProxy(t, addr)
	p := newPubsub(t, e, addr, px.addr())
	defer px.close() // before the Node's cleanup
	var warm counter
	p.subscribe(channel("while-warm"), &warm) // the pub/sub connection is open
	ch := channel("while-subscribing")
	type result struct {
		unsub func()
		err   error
	}
	var counters [2]counter
	results := []chan result{make(chan result, 1), make(chan result, 1)}
	subscribe := func(i int) {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*waitBound)
			defer cancel()
			unsub, err := p.sub.Subscribe(ctx, ch, counters[i].onMessage)
			results[i] <- result{unsub, err}
		}()
	}
	px.hold()
	subscribe(0)
	if !eventually(waitBound, func() bool { return p.subscribers(ch) > 0 }) {
		px.release()
		t.Fatalf("the Node's SUBSCRIBE to %q never reached the server (PUBSUB %s) within %v, while the proxy held back only the server's replies%s", ch, p.countCmd(), waitBound, p.otherKind(ch))
	}
	subscribe(1)
	time.Sleep(quietPeriod)
	for i, r := range results {
		select {
		case got := <-r:
			px.release()
			if got.unsub != nil {
				p.unsubscribe(got.unsub)
			}
			t.Fatalf("Subscribe #%d of two to %q returned (error %v) while the server's confirmation of the first was held back: a Subscribe to a channel the connection already listens on must return only once the subscription is active (the first's confirmation came), or a PUBLISH right after it may be missed", i+1, ch, got.err)
		default:
		}
	}
	px.release()
	for i, r := range results {
		select {
		case got := <-r:
			require.NoError(t, got.err, "Subscribe #%d of two to %q, once the server's confirmation reached the Node", i+1, ch)
			t.Cleanup(func() { p.unsubscribe(got.unsub) })
		case <-time.After(2 * waitBound):
			t.Fatalf("Subscribe #%d of two to %q had not returned %v after the server's confirmation reached the Node", i+1, ch, 2*waitBound)
		}
	}
	p.delivered(ch, &counters[0], "with two subscriptions to one channel, made while the first was confirmed,")
	p.delivered(ch, &counters[1], "with two subscriptions to one channel, the second made while the first was confirmed,")
}

// checkRecoveryAfterOutage: the server is unreachable for 3 s (a proxy closes every
// connection, and each new one at once); once it is back, the backend reconnects and
// re-subscribes by itself, calls onMessage, and delivers again.
func checkRecoveryAfterOutage(t *testing.T, e *env) {
	e.skipOnCluster(t, "it puts a proxy in front of the server, and a cluster client dials the addresses the cluster announces")
	addr := e.server(t)
	px := startProxy(t, addr)
	p := newPubsub(t, e, addr, px.addr())
	defer px.close() // before the Node's cleanup
	ch := channel("outage")
	var c counter
	p.subscribe(ch, &c)
	if !p.delivered(ch, &c, "before the outage") {
		return
	}
	px.goDown()
	if !eventually(waitBound, func() bool { return p.subscribers(ch) == 0 }) {
		t.Fatalf("conformance: the server still counts a subscriber of %q %v after the proxy closed every connection", ch, waitBound)
	}
	time.Sleep(outage) // the outage itself
	before := c.calls()
	px.goUp()
	if !eventually(2*waitBound, func() bool { return p.subscribers(ch) > 0 }) {
		t.Fatalf("after the server was unreachable for %v, the backend had not re-subscribed to %q within %v of its return (PUBSUB %s): it must reconnect and re-subscribe by itself, however long the outage (does it give up after a few attempts?)", outage, ch, 2*waitBound, p.countCmd())
	}
	if !c.grows(before) {
		t.Fatalf("after an outage of %v, the backend re-subscribed but did not call onMessage within %v: it must call onMessage once after recovery, because messages may have been lost meanwhile", outage, waitBound)
	}
	p.delivered(ch, &c, "after the backend recovered from an outage of "+outage.String())
}

// checkNoCallAfterUnsubscribe: the server publishes 200 messages on a channel at once (one
// script); onMessage holds up its first call until unsubscribe returned (or, for a backend
// whose unsubscribe waits for a call under way, for a moment), and no call may start after
// unsubscribe returned, though messages were still on their way.
func checkNoCallAfterUnsubscribe(t *testing.T, e *env) {
	addr := e.server(t)
	p := newPubsub(t, e, addr, addr)
	ch := channel("no-call-after")
	first, release := make(chan struct{}), make(chan struct{})
	var calls, late atomic.Int64
	var returned atomic.Bool
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	unsub, err := p.sub.Subscribe(ctx, ch, func(string) {
		if returned.Load() {
			late.Add(1)
		}
		if calls.Add(1) == 1 {
			close(first)
			<-release
		}
	})
	require.NoError(t, err, "Subscribe(%q) on a healthy server", ch)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	publish := "for i = 1, tonumber(ARGV[1]) do redis.call(ARGV[2], KEYS[1], i) end return 1"
	admin(t, addr, "EVAL", publish, "1", ch, strconv.Itoa(burst), p.publishCmd())
	select {
	case <-first:
	case <-time.After(waitBound):
		t.Fatalf("none of %d messages published on %q reached onMessage within %v", burst, ch, waitBound)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		unsub()
		returned.Store(true)
	}()
	select {
	case <-done:
	case <-time.After(quietPeriod): // an unsubscribe that waits for the call under way
	}
	close(release)
	select {
	case <-done:
	case <-time.After(waitBound):
		t.Fatalf("unsubscribe had not returned %v after onMessage's call under way returned", waitBound)
	}
	time.Sleep(quietPeriod) // for the rest of the messages to come, if any is delivered
	assert.Zero(t, late.Load(), "%d onMessage calls started after unsubscribe returned (of %d calls for %d messages): once unsubscribe returns, no new call may start (does the backend drop a callback only when the server confirms the UNSUBSCRIBE, or deliver what it read before from a queue?)", late.Load(), calls.Load(), burst)
}
