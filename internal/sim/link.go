package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/go-redlock/redlock/core"
)

// errReset is what a call whose connection broke before its reply returns.
var errReset = errors.New("sim: connection reset by peer")

// link is one client's path to one server through the fault layer: every request and
// reply on it, and every release notification, meets the faults of the run's plan.
type link struct {
	client, server int
	srv            *simServer
	plan           *plan
	rec            *recorder
	execTimeout    time.Duration    // how long the driver's call to the server may take
	bad            chan<- violation // where the per-node rules checked here report a violation

	mu  sync.Mutex
	rng *rand.Rand // the link's per-call faults, guarded by mu
}

// fault is what the fault layer does to one call.
type fault struct {
	reqDelay, replyDelay time.Duration
	dropRequest          bool          // never arrives
	dropReply            bool          // runs, and its reply never comes
	reset                bool          // runs, and the connection resets before the reply
	twice                bool          // runs, the connection resets, the call is sent again
	resendAfter          time.Duration // twice: the time between the two runs (a new connection)
}

func (f fault) String() string {
	s := ""
	if f.reqDelay > 0 {
		s += fmt.Sprintf(" request+%v", f.reqDelay)
	}
	if f.replyDelay > 0 {
		s += fmt.Sprintf(" reply+%v", f.replyDelay)
	}
	switch {
	case f.dropRequest:
		s += " request-lost"
	case f.dropReply:
		s += " reply-lost"
	case f.reset:
		s += " reset-after-run"
	case f.twice:
		s += fmt.Sprintf(" run-twice(+%v)", f.resendAfter)
	}
	return s
}

// latency is the least time a message takes one way, and latencyJitter the most it adds:
// without it, every round trip would take no time at all, and clients that split the
// votes would retry at once, at the same instant, for ever.
const (
	latency       = 50 * time.Microsecond
	latencyJitter = 450 * time.Microsecond
)

// decide draws the fault of a call sent at t, and the latency of its request and reply.
func (l *link) decide(t time.Time) (f fault, reqLatency, replyLatency time.Duration) {
	p := l.plan
	if p.dead(l.client, t) || p.cut(l.client, l.server, true, t) {
		f.dropRequest = true
		return f, 0, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	reqLatency = latency + time.Duration(l.rng.Int64N(int64(latencyJitter)))
	replyLatency = latency + time.Duration(l.rng.Int64N(int64(latencyJitter)))
	if !p.in(t) || p.callP == 0 || l.rng.Float64() >= p.callP {
		return f, reqLatency, replyLatency
	}
	var kinds []func()
	if p.delayMax > 0 {
		kinds = append(kinds, func() {
			f.reqDelay = time.Duration(l.rng.Int64N(int64(p.delayMax)))
			f.replyDelay = time.Duration(l.rng.Int64N(int64(p.delayMax)))
			if p.delayWithin { // the two together within the node timeout
				f.replyDelay = min(f.replyDelay, p.delayMax-f.reqDelay)
			}
		})
	}
	if p.lost {
		kinds = append(kinds, func() {
			if l.rng.IntN(2) == 0 {
				f.reset = true
			} else {
				f.dropReply = true
			}
		})
	}
	if p.twice {
		kinds = append(kinds, func() {
			f.twice, f.resendAfter = true, time.Duration(l.rng.Int64N(int64(nodeTimeout)))
		})
	}
	if len(kinds) > 0 {
		kinds[l.rng.IntN(len(kinds))]()
	}
	return f, reqLatency, replyLatency
}

type result struct {
	v   any
	err error
}

// call sends run over the link and returns its reply, or ctx's error if none came before
// ctx ended. run is called with a context of its own: a request on its way goes on after
// its caller gave up, as one on the network does.
func (l *link) call(ctx context.Context, what string, run func(context.Context) (any, error)) (any, error) {
	l.rec.called(what)
	f, reqLatency, replyLatency := l.decide(time.Now())
	f.reqDelay += reqLatency
	f.replyDelay += replyLatency
	if f.dropRequest || f.dropReply || f.reset || f.twice || f.reqDelay > latency+latencyJitter || f.replyDelay > latency+latencyJitter {
		l.rec.note("c%d->s%d %s:%s", l.client, l.server, what, f)
	}
	done := make(chan result, 1)
	go l.carry(f, run, done)
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// carry takes a call through its fault f to the server and its reply back to done.
func (l *link) carry(f fault, run func(context.Context) (any, error), done chan<- result) {
	// A message lost or cut off sends nothing: the caller waits until its context ends.
	if f.dropRequest {
		return
	}
	time.Sleep(f.reqDelay)
	if l.plan.cut(l.client, l.server, true, time.Now()) {
		return
	}
	r := l.exec(run)
	if f.twice {
		time.Sleep(f.resendAfter)
		r = l.exec(run)
	}
	switch {
	case f.dropReply:
		return
	case f.reset:
		done <- result{err: errReset}
		return
	}
	time.Sleep(f.replyDelay)
	if l.plan.cut(l.client, l.server, false, time.Now()) || l.plan.dead(l.client, time.Now()) {
		return
	}
	done <- r
}

// exec runs run on the server now.
func (l *link) exec(run func(context.Context) (any, error)) result {
	if l.srv.sync() == nil {
		return result{err: errDown}
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.execTimeout)
	defer cancel()
	v, err := run(ctx)
	return result{v, err}
}

// delivers reports whether a notification from the server reaches the client at t.
func (l *link) delivers(t time.Time) bool {
	return !l.plan.cut(l.client, l.server, false, t) && !l.plan.dead(l.client, t)
}

// node is a core.Node (and Subscriber and io.Closer) that reaches its server
// through a link: a backend's Node behind the fault layer.
type node struct {
	inner interface {
		core.Node
		core.Subscriber
		io.Closer
	}
	link *link
	// sharded: a Redis Cluster client (see cluster.go): ShardedPubSub reports true, a
	// script's keys must fall in one slot, and Subscribe listens to the shard channel
	sharded bool
}

// ShardedPubSub reports whether the node is cluster-shaped (see core.ShardedPubSub).
func (n *node) ShardedPubSub() bool { return n.sharded }

var (
	_ core.Node       = (*node)(nil)
	_ core.Subscriber = (*node)(nil)
)

func (n *node) String() string { return n.inner.String() }

func (n *node) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	n.link.srv.scripts.note(s)
	n.checkContext(ctx, s)
	if n.sharded {
		if err := n.crossSlot(s.Name(), keys); err != nil {
			return nil, err
		}
	}
	v, err := n.link.call(ctx, s.Name(), func(ctx context.Context) (any, error) {
		v, err := n.inner.Eval(ctx, s, keys, args...)
		if err == nil {
			n.checkGuard(s, args, v)
		}
		return v, err
	})
	if err != nil {
		return nil, err
	}
	return v.([]int64), nil
}

func (n *node) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	n.link.srv.scripts.note(s)
	n.checkContext(ctx, s)
	if n.sharded {
		if err := n.crossSlot(s.Name(), keys); err != nil {
			return nil, err
		}
	}
	v, err := n.link.call(ctx, s.Name(), func(ctx context.Context) (any, error) {
		return n.inner.EvalStrings(ctx, s, keys, args...)
	})
	if err != nil {
		return nil, err
	}
	return v.([]string), nil
}

// checkGuard reports a violation if reply is a grant of script s (acquire, rlock) that asked
// for the restart guard (args[2], in seconds) on a server whose uptime, in the whole seconds
// that INFO reports, is at most the guard: such a node abstains (README, Restart safety). A
// guard that abstains too briefly lets a second owner in only where a holder's key that the
// crash lost would still stand, which few seeds arrange; the grant itself shows it at once.
func (n *node) checkGuard(s *core.Script, args []string, reply []int64) {
	if (s.Name() != "acquire" && s.Name() != "rlock") || len(args) < 3 || len(reply) == 0 || reply[0] != 1 {
		return
	}
	guard, err := strconv.ParseInt(args[2], 10, 64)
	if err != nil || guard <= 0 {
		return
	}
	if up, ok := n.link.srv.uptime(); ok && up <= guard {
		n.link.report("%s granted c%d's %s at uptime %d s, within its restart guard of %d s", n.link.srv.name, n.link.client, s.Name(), up, guard)
	}
}

// checkContext reports a call of core's made under a context that a cancellation could end
// (core.Node: a backend may run a call under core's own context, which ends only at its
// deadline, in the caller's goroutine).
func (n *node) checkContext(ctx context.Context, s *core.Script) {
	if !core.EndsAtDeadline(ctx) {
		n.link.report("c%d's %s call to %s came under a context that core did not make (core.EndsAtDeadline)", n.link.client, s.Name(), n.link.srv.name)
	}
}

// report records a violation of the run, found on the link.
func (l *link) report(format string, args ...any) {
	select {
	case l.bad <- violation{time.Now(), fmt.Sprintf(format, args...)}:
	default:
	}
}

// Subscribe subscribes through the link: a subscription cannot be made while the link is
// cut, and a notification is lost if the link is cut when it would arrive.
func (n *node) Subscribe(ctx context.Context, channel string, onMessage func(string)) (func(), error) {
	l := n.link
	if l.plan.cut(l.client, l.server, true, time.Now()) || l.plan.dead(l.client, time.Now()) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if n.sharded {
		channel = shardChannel(channel)
	}
	return n.inner.Subscribe(ctx, channel, func(payload string) {
		if l.delivers(time.Now()) {
			onMessage(payload)
		}
	})
}

// Close closes the backend Node's subscriptions.
func (n *node) Close() error { return n.inner.Close() }
