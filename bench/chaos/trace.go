package main

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
)

// call is one request a worker's Client sent one node, as the tracing node saw it: the
// evidence of where availability goes (which replies attempts got, how long failed calls
// took, when a failed attempt let go of the keys it got).
type call struct {
	worker, node int
	script       string // acquire, extend, release, raise
	token        string // the attempt's token (ARGV[1])
	start, end   time.Duration
	status       int64  // the reply's first value (1 yes, 0 refused, -1 abstained)
	value        int64  // its second (for a refusal: the holder's remaining TTL, or 0 if a waiter is ahead)
	err          string // the error's kind, "" for a reply
	// abandon marks a release that lets go of a failed attempt's keys and keeps the
	// waiter's place (core's abandon sends "stay" as ARGV[5]), as opposed to a holder's
	// release or a waiter leaving the queue ("leave").
	abandon bool
}

// tracer collects the calls of one nemesis's workers, up to maxCalls.
type tracer struct {
	clk     clock
	mu      sync.Mutex
	calls   []call
	dropped int
}

const maxCalls = 1 << 20

func (t *tracer) add(c call) {
	t.mu.Lock()
	if len(t.calls) < maxCalls {
		t.calls = append(t.calls, c)
	} else {
		t.dropped++
	}
	t.mu.Unlock()
}

// reset forgets the calls recorded so far.
func (t *tracer) reset() {
	t.mu.Lock()
	t.calls, t.dropped = nil, 0
	t.mu.Unlock()
}

func (t *tracer) record() ([]call, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]call(nil), t.calls...), t.dropped
}

// tracedNode wraps a backend's Node and records every Eval and EvalStrings. It passes the
// optional capabilities core looks for (Subscriber, ShardedPubSub, io.Closer)
// through to the backend's Node, so the Client behaves as it would without it.
type tracedNode struct {
	inner        redlock.Node
	t            *tracer
	worker, node int
}

func (n *tracedNode) String() string { return n.inner.String() }

func (n *tracedNode) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	c := call{worker: n.worker, node: n.node, script: s.Name(), start: n.t.clk.now()}
	if len(args) > 0 {
		c.token = args[0]
	}
	c.abandon = s.Name() == "release" && len(args) >= 5 && args[4] == "stay"
	vals, err := n.inner.Eval(ctx, s, keys, args...)
	c.end = n.t.clk.now()
	if err != nil {
		c.err = errKind(err)
	} else {
		if len(vals) > 0 {
			c.status = vals[0]
		}
		if len(vals) > 1 {
			c.value = vals[1]
		}
	}
	n.t.add(c)
	return vals, err
}

// EvalStrings records a call as Eval does, with the reply's first value as its status.
func (n *tracedNode) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	c := call{worker: n.worker, node: n.node, script: s.Name(), start: n.t.clk.now()}
	if len(args) > 0 {
		c.token = args[0]
	}
	vals, err := n.inner.EvalStrings(ctx, s, keys, args...)
	c.end = n.t.clk.now()
	if err != nil {
		c.err = errKind(err)
	} else if len(vals) > 0 {
		c.status, _ = strconv.ParseInt(vals[0], 10, 64)
	}
	n.t.add(c)
	return vals, err
}

func (n *tracedNode) Subscribe(ctx context.Context, channel string, onMessage func(string)) (func(), error) {
	return n.inner.(core.Subscriber).Subscribe(ctx, channel, onMessage)
}

func (n *tracedNode) ShardedPubSub() bool {
	s, ok := n.inner.(core.ShardedPubSub)
	return ok && s.ShardedPubSub()
}

func (n *tracedNode) Close() error {
	if c, ok := n.inner.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// newTracedNode wraps inner. Every backend of this repository is a Subscriber; a Node that
// is not gets a wrapper without Subscribe.
func newTracedNode(inner redlock.Node, t *tracer, worker, node int) redlock.Node {
	n := &tracedNode{inner: inner, t: t, worker: worker, node: node}
	if _, sub := inner.(core.Subscriber); sub {
		return n
	}
	return struct {
		evalOnly
		io.Closer
	}{evalOnly{n}, n}
}

// evalOnly exposes only a tracedNode's Eval, EvalStrings and String.
type evalOnly struct{ n *tracedNode }

func (e evalOnly) String() string { return e.n.String() }
func (e evalOnly) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	return e.n.Eval(ctx, s, keys, args...)
}
func (e evalOnly) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	return e.n.EvalStrings(ctx, s, keys, args...)
}

// errKind names a node error's kind, from the transport up.
func errKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, core.ErrNodeTimeout):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "reset"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, redlock.ErrClosed):
		return "closed"
	case strings.Contains(err.Error(), "connection reset"), strings.Contains(err.Error(), "broken pipe"):
		return "reset"
	case strings.Contains(err.Error(), "connection refused"):
		return "refused"
	case strings.Contains(err.Error(), "LOADING"):
		return "loading"
	}
	return "other"
}
