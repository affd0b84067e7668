package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/require"
)

// pubsubRecoveryChecks are the pubsub group's checks of what happens after a reconnect, a
// cancellation or a timeout, and of channels that share a hash tag.
func pubsubRecoveryChecks() []check {
	return []check{
		{"recovery-every-channel", checkRecoveryEveryChannel},
		{"recovery-after-resubscribe", checkRecoveryAfterResubscribe},
		{"subscribe-cancel/new-connection", func(t *testing.T, e *env) { checkSubscribeCancel(t, e, false) }},
		{"subscribe-cancel/open-connection", func(t *testing.T, e *env) { checkSubscribeCancel(t, e, true) }},
		{"subscribe-deadline/leaves-nothing", checkTimedOutSubscribeLeavesNothing},
		{"isolation-same-lock", checkIsolationSameLock},
	}
}

// killable starts a server and returns its address, the address the Node must dial, and
// kill, which ends the Node's pub/sub connection: CLIENT KILL TYPE pubsub on redis-server and
// on a cluster (on every master), and on miniredis (which has no CLIENT KILL) by closing
// every connection of a proxy the Node goes through (px, nil on redis-server and a cluster).
func killable(t *testing.T, e *env, proxied bool) (addr, nodeAddr string, kill func(), px *proxy) {
	t.Helper()
	addr = e.server(t)
	if e.kind == Miniredis || (proxied && e.kind != RedisCluster) {
		px = startProxy(t, addr)
		return addr, px.addr(), px.cut, px
	}
	return addr, addr, func() {
		var killed int64
		for _, n := range adminAll(t, addr, "CLIENT", "KILL", "TYPE", "pubsub") {
			k, _ := n.(int64)
			killed += k
		}
		require.Positive(t, killed, "CLIENT KILL TYPE pubsub found no pub/sub connection to kill, though Subscribe returned")
	}, nil
}

// checkRecoveryEveryChannel: with three channels subscribed, after the pub/sub connection is
// killed every channel's onMessage is called (messages of each may have been lost), and
// each channel delivers again.
func checkRecoveryEveryChannel(t *testing.T, e *env) {
	addr, nodeAddr, kill, _ := killable(t, e, false)
	p := newPubsub(t, e, addr, nodeAddr)
	chans := []string{channel("recovery-1"), channel("recovery-2"), channel("recovery-3")}
	counters := make([]counter, len(chans))
	for i, ch := range chans {
		p.subscribe(ch, &counters[i])
	}
	for i, ch := range chans {
		if !p.delivered(ch, &counters[i], "before the connection was killed") {
			return
		}
	}
	before := make([]int64, len(chans))
	for i := range counters {
		before[i] = counters[i].calls()
	}
	kill()
	eventually(waitBound, func() bool {
		for i := range counters {
			if counters[i].calls() <= before[i] {
				return false
			}
		}
		return true
	})
	for i, ch := range chans {
		if counters[i].calls() <= before[i] {
			t.Errorf("after the pub/sub connection was killed, onMessage of %q (channel %d of %d subscribed) was not called within %v: after a reconnect the backend must call onMessage of every subscribed channel once, since each may have missed messages (a waiter not woken waits its full refresh)", ch, i+1, len(chans), waitBound)
		}
	}
	for i, ch := range chans {
		p.delivered(ch, &counters[i], fmt.Sprintf("after the backend recovered from a killed connection, on channel %d of %d", i+1, len(chans)))
	}
}

// checkRecoveryAfterResubscribe: after the pub/sub connection is killed, onMessage is called
// only once the server has the subscription again, so that a waiter that calls at once
// cannot miss the PUBLISH of a release that follows. On one server the Node goes through a
// proxy that holds back the server's confirmation of the new connection's SUBSCRIBE: no
// onMessage call may come while it is held. On a cluster, the server must count the
// channel's subscription when onMessage is called.
func checkRecoveryAfterResubscribe(t *testing.T, e *env) {
	addr, nodeAddr, kill, px := killable(t, e, true)
	p := newPubsub(t, e, addr, nodeAddr)
	ch := channel("recovery-resubscribe")
	var c counter
	var mu sync.Mutex
	var woke []int64 // the server's count of ch's subscribers at each onMessage call
	killed := make(chan struct{})
	p.subscribe(ch, &c)
	if !p.delivered(ch, &c, "before the connection was killed") {
		return
	}
	if px == nil { // a cluster: count the subscription at each call
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		unsubCount, err := p.sub.Subscribe(ctx, ch, func(string) {
			select {
			case <-killed:
			default:
				return
			}
			n := p.count(ch) // on the backend's goroutine: no t.Fatal here
			mu.Lock()
			woke = append(woke, n)
			mu.Unlock()
		})
		require.NoError(t, err, "Subscribe(%q) on a healthy server", ch)
		t.Cleanup(func() { p.unsubscribe(unsubCount) })
	}
	before := c.calls()
	if px != nil {
		subscribed := px.subscribers()
		px.holdFromSubscribe()
		kill()
		if !eventually(waitBound, func() bool { return px.subscribers() > subscribed }) {
			px.release()
			t.Fatalf("after the pub/sub connection was cut, the backend sent no SUBSCRIBE on a new connection within %v: it must reconnect and re-subscribe by itself", waitBound)
		}
		// The new connection's SUBSCRIBE is sent and its confirmation held back.
		if got := c.calls(); got != before {
			px.release()
			t.Fatalf("after the pub/sub connection was cut, onMessage was called (%d times) while the server's confirmation of the new SUBSCRIBE was held back: the backend must call it only once it has subscribed again, or a waiter that calls at once misses the PUBLISH of the release that follows and waits its full refresh (does it call onMessage on the read error?)", got-before)
		}
		time.Sleep(quietPeriod) // a wake from a goroutine of the backend's own
		if got := c.calls(); got != before {
			px.release()
			t.Fatalf("after the pub/sub connection was cut, onMessage was called (%d times) while the server's confirmation of the new SUBSCRIBE was held back: the backend must call it only once it has subscribed again, or a waiter that calls at once misses the PUBLISH of the release that follows and waits its full refresh (does it call onMessage on the read error?)", got-before)
		}
		px.release()
	} else {
		close(killed)
		kill()
	}
	if !c.grows(before) {
		t.Fatalf("after the pub/sub connection was killed, the backend did not call onMessage within %v of being able to re-subscribe: it must call onMessage once after recovery, because messages may have been lost meanwhile", waitBound)
	}
	mu.Lock()
	for _, n := range woke {
		if n == 0 { // -1: the count failed
			t.Errorf("after the pub/sub connection was killed, onMessage was called while the server counted no subscriber of %q: the backend must call it only once it has subscribed again, or a waiter that calls at once misses the PUBLISH of the release that follows and waits its full refresh (does it call onMessage on the read error?)", ch)
			break
		}
	}
	mu.Unlock()
	p.delivered(ch, &c, "after the backend recovered from a killed connection")
}

// checkSubscribeCancel: against a server that stopped answering, Subscribe must return soon
// after its context is cancelled (a context without a deadline), with an error that
// matches context.Canceled.
func checkSubscribeCancel(t *testing.T, e *env, open bool) {
	e.skipOnCluster(t, "it puts a proxy in front of the server, and a cluster client dials the addresses the cluster announces")
	addr := e.server(t)
	px := startProxy(t, addr)
	p := newPubsub(t, e, addr, px.addr())
	defer px.close() // before the Node's cleanup: closing a client must not wait for a frozen server
	if open {
		var c counter
		p.subscribe(channel("cancel-open"), &c)
	}
	px.freeze()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(ctxDeadline, cancel)
	var unsub func()
	var err error
	bound := ctxDeadline + ctxBound
	elapsed, ok := withinBound(t, bound, px.close, func() {
		unsub, err = p.sub.Subscribe(ctx, channel("cancel"), func(string) {})
	})
	px.close()
	if !ok {
		t.Fatalf("Subscribe with a context cancelled %v into the call (no deadline), against a server that never replies, had not returned within %v: Subscribe must honour ctx's cancellation, not only its deadline (core cancels a waiter's subscription when its Lock call ends)", ctxDeadline, bound)
	}
	if err == nil {
		if unsub != nil {
			p.unsubscribe(unsub)
		}
		t.Fatalf("Subscribe against a server that never replies returned no error after %v: it must return only once the subscription is active on the server, or ctx's error", elapsed.Round(time.Millisecond))
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Subscribe with a cancelled context returned %q (%T), want an error matching context.Canceled under errors.Is", err, err)
	}
	t.Logf("Subscribe returned after %v: %v", elapsed.Round(time.Millisecond), err)
}

// checkTimedOutSubscribeLeavesNothing: a Subscribe whose deadline passed while the server's
// confirmation was held back returns an error; once the server answers again, nothing is
// left subscribed to that channel on the server.
func checkTimedOutSubscribeLeavesNothing(t *testing.T, e *env) {
	e.skipOnCluster(t, "it puts a proxy in front of the server, and a cluster client dials the addresses the cluster announces")
	addr := e.server(t)
	px := startProxy(t, addr)
	p := newPubsub(t, e, addr, px.addr())
	defer px.close() // before the Node's cleanup
	var warm counter
	p.subscribe(channel("timed-out-warm"), &warm) // the pub/sub connection is open
	ch := channel("timed-out")
	px.hold()
	ctx, cancel := context.WithTimeout(context.Background(), ctxDeadline)
	defer cancel()
	var unsub func()
	var err error
	bound := ctxDeadline + ctxBound
	_, ok := withinBound(t, bound, px.release, func() {
		unsub, err = p.sub.Subscribe(ctx, ch, func(string) {})
	})
	if !ok {
		t.Fatalf("Subscribe with a context with a deadline %v away, while the server's replies were held back, had not returned within %v: Subscribe must honour ctx while it waits for the confirmation", ctxDeadline, bound)
	}
	if err == nil {
		px.release()
		if unsub != nil {
			p.unsubscribe(unsub)
		}
		t.Fatalf("Subscribe(%q) returned no error while the server's confirmation was held back: it must return only once the server confirmed the subscription, or ctx's error", ch)
	}
	px.release()
	if !eventually(waitBound, func() bool { return p.subscribers(ch) == 0 }) {
		t.Fatalf("%v after the server answered again, it still counts %d subscribers of %q, whose Subscribe had failed with %q: a Subscribe that timed out must leave nothing subscribed on the server once it answers (UNSUBSCRIBE on the late confirmation), or channels pile up there for the life of the process", waitBound, p.subscribers(ch), ch, err)
	}
	time.Sleep(quietPeriod) // a SUBSCRIBE still on its way
	if n := p.subscribers(ch); n != 0 {
		t.Fatalf("%v after the server answered again, it counts %d subscribers of %q, whose Subscribe had failed with %q: a Subscribe that timed out must leave nothing subscribed on the server once it answers (UNSUBSCRIBE on the late confirmation), or channels pile up there for the life of the process", quietPeriod, n, ch, err)
	}
}

// checkIsolationSameLock: the wake-up channels of two waiters of one lock, which share the
// lock's hash tag (and so its cluster slot), each get their own messages only.
func checkIsolationSameLock(t *testing.T, e *env) {
	addr := e.server(t)
	p := newPubsub(t, e, addr, addr)
	k := core.NewKeys("conformance:", "isolation-same-lock")
	chA, chB := k.Wake("waiter-a"), k.Wake("waiter-b")
	var a, b counter
	p.subscribe(chA, &a)
	p.subscribe(chB, &b)
	p.delivered(chA, &a, "with the channels of two waiters of one lock subscribed on one Node")
	p.delivered(chB, &b, "with the channels of two waiters of one lock subscribed on one Node")
	time.Sleep(quietPeriod)
	a.mu.Lock()
	b.mu.Lock()
	defer a.mu.Unlock()
	defer b.mu.Unlock()
	for payload := range b.payloads {
		if payload != "" && a.payloads[payload] {
			t.Errorf("onMessage of %q was given %q, published on %q, the channel of another waiter of the same lock (same hash tag, same slot): a Subscriber must deliver each message only to the handlers of its own channel, not of its slot or hash tag", chA, payload, chB)
		}
	}
	for payload := range a.payloads {
		if payload != "" && b.payloads[payload] {
			t.Errorf("onMessage of %q was given %q, published on %q, the channel of another waiter of the same lock (same hash tag, same slot): a Subscriber must deliver each message only to the handlers of its own channel, not of its slot or hash tag", chB, payload, chA)
		}
	}
}

// count returns how many connections the server has subscribed to ch, or -1 if it cannot
// tell; unlike subscribers, it may run on any goroutine.
func (p *pubsub) count(ch string) int64 {
	var total int64
	for _, a := range masters(p.addr) {
		v, err := do(a, "PUBSUB", p.countCmd(), ch)
		r, _ := v.([]any)
		if err != nil || len(r) != 2 {
			return -1
		}
		n, _ := r[1].(int64)
		total += n
	}
	return total
}
