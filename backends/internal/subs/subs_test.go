package subs_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock/backends/internal/subs"
	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// conn records what the Registry asks of the wire; the test plays the server.
type conn struct {
	mu     sync.Mutex
	log    []string
	starts int
	fail   error // returned by Subscribe
}

func (c *conn) Subscribe(_ context.Context, ch string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, "SUBSCRIBE "+ch)
	return c.fail
}

func (c *conn) Unsubscribe(_ context.Context, ch string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, "UNSUBSCRIBE "+ch)
}

func (c *conn) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.starts++
}

func (c *conn) sent() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}

// counter counts its calls and keeps the last payload.
type counter struct {
	n    atomic.Int64
	last atomic.Value
}

func (c *counter) fn(payload string) { c.last.Store(payload); c.n.Add(1) }

// subscribe calls Subscribe in the background: it returns only after Confirmed.
func subscribe(r *subs.Registry, ctx context.Context, ch string, fn func(string)) <-chan func() {
	out := make(chan func(), 1)
	go func() {
		u, err := r.Subscribe(ctx, ch, fn)
		if err != nil {
			u = nil
		}
		out <- u
	}()
	return out
}

// waitSent waits until exactly want was sent.
func waitSent(t *testing.T, c *conn, want ...string) {
	t.Helper()
	require.Eventually(t, func() bool { return slices.Equal(c.sent(), want) }, time.Second, time.Millisecond, "sent %q, want %q", c.sent(), want)
}

// confirmWhenSent plays the server: it confirms ch once the n-th SUBSCRIBE of it was sent.
func confirmWhenSent(t *testing.T, c *conn, r *subs.Registry, ch string, n int) {
	require.Eventually(t, func() bool {
		count := 0
		for _, l := range c.sent() {
			if l == "SUBSCRIBE "+ch {
				count++
			}
		}
		return count >= n
	}, time.Second, time.Millisecond)
	r.Confirmed(ch)
}

func TestLifecycle(t *testing.T) {
	c := &conn{}
	r := subs.New(c)
	var a, b counter
	ctx := context.Background()

	pa := subscribe(r, ctx, "ch", a.fn)
	confirmWhenSent(t, c, r, "ch", 1)
	unA := <-pa
	require.NotNil(t, unA)
	unB, err := r.Subscribe(ctx, "ch", b.fn) // already confirmed: at once, no second SUBSCRIBE
	require.NoError(t, err)
	assert.Equal(t, []string{"SUBSCRIBE ch"}, c.sent())
	assert.Equal(t, 1, c.starts)

	r.Message("ch", "w.1 7")
	r.Message("other", "")
	assert.Equal(t, int64(1), a.n.Load())
	assert.Equal(t, int64(1), b.n.Load())
	assert.Equal(t, "w.1 7", a.last.Load(), "the payload must reach the callback unchanged")

	r.Confirmed("ch") // a re-subscription after a reconnect: everyone re-checks
	assert.Equal(t, int64(2), a.n.Load())
	assert.Equal(t, int64(2), b.n.Load())
	assert.Equal(t, "", b.last.Load(), "the re-check after a reconnect has an empty payload")

	unA()
	unA()
	r.Message("ch", "")
	assert.Equal(t, int64(2), a.n.Load(), "after unsubscribe")
	assert.Equal(t, int64(3), b.n.Load())
	assert.False(t, r.Idle())

	unB()
	waitSent(t, c, "SUBSCRIBE ch", "UNSUBSCRIBE ch")
	require.Eventually(t, r.Idle, time.Second, time.Millisecond, "nothing subscribed")

	pc := subscribe(r, ctx, "ch", a.fn)
	confirmWhenSent(t, c, r, "ch", 2)
	require.NotNil(t, <-pc)
	assert.Equal(t, 2, c.starts, "the reader is started again after Idle")
}

// Messages that come between a channel's UNSUBSCRIBE and the confirmation of its next
// SUBSCRIBE were published for the subscription that ended: the new callbacks do not get
// them, and get those after the confirmation.
func TestMessagesBeforeTheConfirmationAreDropped(t *testing.T) {
	c := &conn{}
	r := subs.New(c)
	ctx := context.Background()
	var a, b counter
	pa := subscribe(r, ctx, "ch", a.fn)
	r.Message("ch", "before the first confirmation")
	confirmWhenSent(t, c, r, "ch", 1)
	unA := <-pa
	require.NotNil(t, unA)
	r.Message("ch", "after")
	assert.Equal(t, int64(1), a.n.Load())
	assert.Equal(t, "after", a.last.Load())
	unA()
	waitSent(t, c, "SUBSCRIBE ch", "UNSUBSCRIBE ch")

	pb := subscribe(r, ctx, "ch", b.fn)
	require.Eventually(t, func() bool { return len(c.sent()) == 3 }, time.Second, time.Millisecond)
	r.Message("ch", "published before the UNSUBSCRIBE, read late")
	assert.Zero(t, b.n.Load(), "a message of the earlier subscription")
	r.Confirmed("ch")
	unB := <-pb
	require.NotNil(t, unB)
	defer unB()
	r.Message("ch", "new")
	assert.Equal(t, int64(1), b.n.Load())
	assert.Equal(t, "new", b.last.Load())
	assert.Equal(t, int64(1), a.n.Load())
}

// A waiter that gives up before the confirmation leaves the channel subscribed until the
// confirmation comes, so that it is never taken for the confirmation of a later SUBSCRIBE.
func TestGiveUpBeforeConfirmation(t *testing.T) {
	c := &conn{}
	r := subs.New(c)
	ctx, cancel := context.WithCancel(context.Background())
	p := subscribe(r, ctx, "ch", func(string) { t.Error("called after giving up") })
	require.Eventually(t, func() bool { return len(c.sent()) == 1 }, time.Second, time.Millisecond)
	var b counter
	pb := subscribe(r, context.Background(), "ch", b.fn) // joins the pending SUBSCRIBE
	time.Sleep(50 * time.Millisecond)                    // for b to join
	cancel()
	assert.Nil(t, <-p)
	assert.Equal(t, []string{"SUBSCRIBE ch"}, c.sent(), "no UNSUBSCRIBE while b waits")
	r.Confirmed("ch")
	unB := <-pb
	require.NotNil(t, unB)
	r.Message("ch", "")
	assert.Equal(t, int64(1), b.n.Load())
	unB()
	waitSent(t, c, "SUBSCRIBE ch", "UNSUBSCRIBE ch")

	ctx, cancel = context.WithCancel(context.Background())
	p = subscribe(r, ctx, "ch2", func(string) {})
	require.Eventually(t, func() bool { return len(c.sent()) == 3 }, time.Second, time.Millisecond)
	cancel()
	<-p
	r.Confirmed("ch2")
	waitSent(t, c, "SUBSCRIBE ch", "UNSUBSCRIBE ch", "SUBSCRIBE ch2", "UNSUBSCRIBE ch2")
	require.Eventually(t, r.Idle, time.Second, time.Millisecond)
}

func TestFailAndClose(t *testing.T) {
	boom := errors.New("boom")
	c := &conn{fail: boom}
	r := subs.New(c)
	_, err := r.Subscribe(context.Background(), "ch", func(string) {})
	assert.ErrorIs(t, err, boom, "SUBSCRIBE could not be sent")

	c.mu.Lock()
	c.fail = nil
	c.mu.Unlock()
	p1 := subscribe(r, context.Background(), "a", func(string) {})
	confirmWhenSent(t, c, r, "a", 1)
	un1 := <-p1
	p2 := subscribe(r, context.Background(), "b", func(string) {})
	require.Eventually(t, func() bool { return len(c.sent()) == 3 }, time.Second, time.Millisecond)
	r.Fail("", boom) // the connection broke before b was confirmed
	assert.Nil(t, <-p2)
	waitSent(t, c, "SUBSCRIBE ch", "SUBSCRIBE a", "SUBSCRIBE b", "UNSUBSCRIBE b")
	r.Resubscribe(nil)
	waitSent(t, c, "SUBSCRIBE ch", "SUBSCRIBE a", "SUBSCRIBE b", "UNSUBSCRIBE b", "SUBSCRIBE a") // a, confirmed, is subscribed again

	var d counter
	p3 := subscribe(r, context.Background(), "c", d.fn)
	require.Eventually(t, func() bool { return len(c.sent()) == 6 }, time.Second, time.Millisecond)
	var e counter
	unE, err := r.Subscribe(context.Background(), "a", e.fn)
	require.NoError(t, err)
	r.Close()
	r.Close()
	assert.Nil(t, <-p3, "a waiting Subscribe fails at Close")
	r.Message("a", "")
	r.Confirmed("a")
	assert.Zero(t, e.n.Load(), "no call after Close")
	un1()
	unE()
	_, err = r.Subscribe(context.Background(), "a", func(string) {})
	assert.ErrorIs(t, err, subs.ErrClosed)
	assert.ErrorIs(t, err, core.ErrClosed, "a closed node's error")
	assert.True(t, r.Idle())
	r.Wait()
}

// A callback may unsubscribe itself and subscribe again without deadlock.
func TestReentrantCallback(t *testing.T) {
	c := &conn{}
	r := subs.New(c)
	p := subscribe(r, context.Background(), "ch", func(string) {})
	confirmWhenSent(t, c, r, "ch", 1)
	<-p
	var self atomic.Pointer[func()]
	var calls counter
	un, err := r.Subscribe(context.Background(), "ch", func(string) {
		calls.fn("")
		(*self.Load())()
		u, err := r.Subscribe(context.Background(), "ch", func(string) {}) // confirmed: returns at once
		assert.NoError(t, err)
		u()
	})
	require.NoError(t, err)
	self.Store(&un)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Confirmed("ch") // a re-subscription: calls every callback
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("deadlock")
	}
	assert.Equal(t, int64(1), calls.n.Load())
}

// skipConn is a conn whose first Subscribe waits for release, and which sends nothing when
// ResendPending says the Registry calls it again: the way a backend that re-subscribes on a
// new connection keeps a SUBSCRIBE decided before it from going there twice.
type skipConn struct {
	conn
	r        *subs.Registry
	entered  chan struct{}
	release  chan struct{}
	calls    int
	resendAt []bool // ResendPending at each call
}

func (c *skipConn) Subscribe(ctx context.Context, ch string) error {
	c.mu.Lock()
	c.calls++
	first := c.calls == 1
	c.mu.Unlock()
	if first {
		close(c.entered)
		<-c.release
	}
	pending := c.r.ResendPending(ch)
	c.mu.Lock()
	c.resendAt = append(c.resendAt, pending)
	c.mu.Unlock()
	if pending {
		return nil
	}
	return c.conn.Subscribe(ctx, ch)
}

// A Resubscribe that comes while a channel's first SUBSCRIBE is decided but not yet sent
// has the Registry call Conn.Subscribe again; ResendPending tells the call under way, which
// may then send nothing. The channel is subscribed once, its confirmation is its first (no
// callback runs for it), and it is unsubscribed when its callback leaves: no confirmation is
// left awaited.
func TestResendPending(t *testing.T) {
	c := &skipConn{entered: make(chan struct{}), release: make(chan struct{})}
	r := subs.New(c)
	c.r = r
	var a counter
	p := subscribe(r, context.Background(), "ch", a.fn)
	<-c.entered
	assert.False(t, r.ResendPending("ch"), "decided, not marked")
	r.Resubscribe(nil) // the backend's new connection
	assert.True(t, r.ResendPending("ch"))
	assert.False(t, r.ResendPending("other"))
	close(c.release)
	waitSent(t, &c.conn, "SUBSCRIBE ch")
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.calls == 2 && len(c.resendAt) == 2
	}, time.Second, time.Millisecond)
	assert.False(t, r.ResendPending("ch"), "the next call decided")
	c.mu.Lock()
	assert.Equal(t, []bool{true, false}, c.resendAt, "ResendPending in the call under way, and in the next")
	c.mu.Unlock()

	r.Confirmed("ch")
	un := <-p
	require.NotNil(t, un)
	assert.Zero(t, a.n.Load(), "the first confirmation calls no callback")
	r.Message("ch", "m")
	assert.Equal(t, int64(1), a.n.Load())
	un()
	waitSent(t, &c.conn, "SUBSCRIBE ch", "UNSUBSCRIBE ch")
	require.Eventually(t, r.Idle, time.Second, time.Millisecond)
}
