package conformance

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
)

// contextChecks: against a server that accepts and never replies (a proxy that stops
// forwarding; on a cluster, CLIENT PAUSE WRITE on every master), Eval must return soon after
// its context's deadline or cancellation, with an error and no reply. "open-connection"
// freezes the server after one successful Eval, so the call hangs on an established
// connection; "new-connection" freezes it before the first Eval, so a lazily connecting
// Node hangs in its dial or handshake (on a cluster, in the command: a pause lets the
// handshake through). "call-deadline" uses the context core calls a Node under, which ends
// only at its deadline (core.EndsAtDeadline): a Node may run such a call in the caller's
// goroutine, and its driver must end it there.
func contextChecks() []check {
	keys := extendKeys(core.NewKeys("conformance:", "context"))
	return ctxChecks("Eval", func(t *testing.T, n core.Node) call {
		s := script(t, "extend")
		return func(ctx context.Context) (string, error) {
			got, err := n.Eval(ctx, s, keys, ours, ttl, "w")
			if got != nil {
				return format(got), err
			}
			return "", err
		}
	})
}

// call is one call to a Node under ctx: it returns the reply, rendered ("" for none), and
// the error.
type call func(ctx context.Context) (reply string, err error)

// ctxChecks are the context checks for the Node method called method: prepare returns the
// call to make (on a healthy server first, then on the frozen one).
func ctxChecks(method string, prepare func(t *testing.T, n core.Node) call) []check {
	deadline := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), ctxDeadline)
	}
	cancelLater := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(ctxDeadline, cancel)
		return ctx, cancel
	}
	callDeadline := func() (context.Context, context.CancelFunc) { // as core calls a Node
		return core.WithDeadline(context.Background(), ctxDeadline), func() {}
	}
	cancelled := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	}
	cases := []struct {
		name   string
		warm   bool // one call before the proxy freezes
		ctx    func() (context.Context, context.CancelFunc)
		wantIs error // the error must match it under errors.Is; nil: any error
		what   string
	}{
		{"deadline/open-connection", true, deadline, nil, "a context with a deadline " + ctxDeadline.String() + " away"},
		{"deadline/new-connection", false, deadline, nil, "a context with a deadline " + ctxDeadline.String() + " away"},
		{"call-deadline/open-connection", true, callDeadline, nil, "core's call context (core.WithDeadline) " + ctxDeadline.String() + " away"},
		{"call-deadline/new-connection", false, callDeadline, nil, "core's call context (core.WithDeadline) " + ctxDeadline.String() + " away"},
		{"cancel/open-connection", true, cancelLater, context.Canceled, "a context cancelled " + ctxDeadline.String() + " into the call"},
		{"cancel/new-connection", false, cancelLater, context.Canceled, "a context cancelled " + ctxDeadline.String() + " into the call"},
		{"cancelled-before", true, cancelled, context.Canceled, "an already cancelled context"},
	}
	var checks []check
	for _, c := range cases {
		checks = append(checks, check{c.name, func(t *testing.T, e *env) {
			n, freeze, unblock := unanswering(t, e)
			defer unblock() // before the Node's cleanup: closing a client must not wait for a frozen server
			f := prepare(t, n)
			if c.warm {
				ctx, cancel := context.WithTimeout(context.Background(), waitBound)
				_, err := f(ctx)
				cancel()
				if err != nil {
					t.Fatalf("%s on a healthy server returned error %v", method, err)
				}
			}
			freeze()

			ctx, cancel := c.ctx()
			defer cancel()
			var got string
			var err error
			bound := ctxDeadline + ctxBound
			elapsed, ok := withinBound(t, bound, unblock, func() { got, err = f(ctx) })
			if !ok {
				t.Fatalf("%s with %s, against a server that accepts and never replies, had not returned within %v (it did %v later, once the suite closed its connections): the Node must honour ctx", method, c.what, bound, (elapsed - bound).Round(time.Millisecond))
			}
			if err == nil {
				t.Fatalf("%s with %s, against a server that never replies, returned %q and no error after %v: an ended context is an error", method, c.what, got, elapsed.Round(time.Millisecond))
			}
			assert.Empty(t, got, "%s with %s returned error %q together with reply %s", method, c.what, err, got)
			if c.wantIs != nil && !errors.Is(err, c.wantIs) {
				t.Errorf("%s with %s returned %q (%T), want an error matching %v under errors.Is", method, c.what, err, err, c.wantIs)
			}
			t.Logf("%s with %s returned after %v: %v", method, c.what, elapsed.Round(time.Millisecond), err)
		}})
	}
	return checks
}

// unanswering starts a server and returns a Node on it, freeze, which makes the server
// accept and never answer from then on, and unblock, which ends that for good (the calls
// still waiting fail or are answered at once; idempotent). On one server the Node dials a
// proxy, which freeze stops; on a cluster, freeze pauses the scripts and writes of every
// master (CLIENT PAUSE WRITE, for longer than any check waits), and unblock unpauses them.
func unanswering(t *testing.T, e *env) (n core.Node, freeze, unblock func()) {
	t.Helper()
	addr := e.server(t)
	if e.kind == RedisCluster {
		var once sync.Once
		unpause := func() { once.Do(func() { adminAll(t, addr, "CLIENT", "UNPAUSE") }) }
		t.Cleanup(unpause)
		pause := strconv.FormatInt((4 * waitBound).Milliseconds(), 10)
		return e.node(t, addr), func() { adminAll(t, addr, "CLIENT", "PAUSE", pause, "WRITE") }, unpause
	}
	p := startProxy(t, addr)
	return e.node(t, p.addr()), p.freeze, p.close
}
