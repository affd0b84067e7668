package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
)

// contextChecks: against a server that accepts and never replies (a proxy that stops
// forwarding), Eval must return soon after its context's deadline or cancellation, with an
// error and no reply. "open-connection" freezes the proxy after one successful Eval, so the
// call hangs on an established connection; "new-connection" freezes it before the first
// Eval, so a lazily connecting Node hangs in its dial or handshake.
func contextChecks() []check {
	deadline := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), ctxDeadline)
	}
	cancelLater := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(ctxDeadline, cancel)
		return ctx, cancel
	}
	cancelled := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	}
	cases := []struct {
		name   string
		warm   bool // one Eval before the proxy freezes
		ctx    func() (context.Context, context.CancelFunc)
		wantIs error // the error must match it under errors.Is; nil: any error
		what   string
	}{
		{"deadline/open-connection", true, deadline, nil, "a context with a deadline " + ctxDeadline.String() + " away"},
		{"deadline/new-connection", false, deadline, nil, "a context with a deadline " + ctxDeadline.String() + " away"},
		{"cancel/open-connection", true, cancelLater, context.Canceled, "a context cancelled " + ctxDeadline.String() + " into the call"},
		{"cancel/new-connection", false, cancelLater, context.Canceled, "a context cancelled " + ctxDeadline.String() + " into the call"},
		{"cancelled-before", true, cancelled, context.Canceled, "an already cancelled context"},
	}
	var checks []check
	for _, c := range cases {
		checks = append(checks, check{c.name, func(t *testing.T, e *env) {
			p := startProxy(t, e.server(t))
			n := e.node(t, p.addr())
			defer p.close() // before the Node's cleanup: closing a client must not wait for a frozen server
			s := script(t, "extend")
			keys := []string{core.NewKeys("conformance:", "context").Lock}
			if c.warm {
				mustEval(t, n, s, keys, ours, ttl)
			}
			p.freeze()

			ctx, cancel := c.ctx()
			defer cancel()
			var got []int64
			var err error
			bound := ctxDeadline + ctxBound
			elapsed, ok := withinBound(t, bound, p.close, func() {
				got, err = n.Eval(ctx, s, keys, ours, ttl)
			})
			if !ok {
				t.Fatalf("Eval with %s, against a server that accepts and never replies, had not returned within %v (it did %v later, once the suite closed its connections): the Node must honour ctx", c.what, bound, (elapsed - bound).Round(time.Millisecond))
			}
			if err == nil {
				t.Fatalf("Eval with %s, against a server that never replies, returned %s and no error after %v: an ended context is an error", c.what, format(got), elapsed.Round(time.Millisecond))
			}
			assert.Empty(t, got, "Eval with %s returned error %q together with reply %s", c.what, err, format(got))
			if c.wantIs != nil && !errors.Is(err, c.wantIs) {
				t.Errorf("Eval with %s returned %q (%T), want an error matching %v under errors.Is", c.what, err, err, c.wantIs)
			}
			t.Logf("Eval with %s returned after %v: %v", c.what, elapsed.Round(time.Millisecond), err)
		}})
	}
	return checks
}
