package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Cluster is a set of N independent nodes that grant a lock by majority (quorum N/2+1).
// A Cluster is safe for concurrent use.
type Cluster struct {
	nodes     []Node
	quorum    int
	publish   []string      // per node: the release script's publish command
	sharded   bool          // some node publishes with SPUBLISH
	setters   bool          // every node is a Setter
	unguarded []atomic.Bool // per node: it cannot report its uptime to the restart guard
	down      []atomic.Bool // per node: its last call failed in transit (see suspects)
	warn      func(node string)
	shared    atomic.Pointer[sharedDeadline] // see deadline
	under     atomic.Pointer[sharedDeadline] // see deadlineUnder
	lastUnder atomic.Uintptr                 // the address of the last context deadlineUnder saw
	fans      sync.Pool                      // *fanout, for reuse (see fan)
	id        identity                       // which server each node reaches
	closed    atomic.Bool
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

// ClusterOption configures a Cluster.
type ClusterOption func(*Cluster)

// OnUnguarded sets the function called, once per node and Cluster, when a node was asked to
// apply the restart guard and cannot, because it does not report its uptime (miniredis, or a
// server that forbids INFO in scripts). Such a node takes part unguarded. f must not block.
func OnUnguarded(f func(node string)) ClusterOption {
	return func(c *Cluster) { c.warn = f }
}

// ShardedPubSub is an optional capability of a Node: a Node whose ShardedPubSub returns true
// (a Redis Cluster client whose Subscriber uses SSUBSCRIBE) gets release notifications
// published with SPUBLISH, so that a release is not broadcast to every shard.
type ShardedPubSub interface {
	ShardedPubSub() bool
}

// NewCluster returns the cluster of nodes. It fails with an error that matches ErrInvalid
// if there are no nodes, one is nil (a nil interface or a nil pointer inside one), or one
// Node is given twice: each server must count as one vote. Two Nodes that reach one server
// are found at first contact instead (see Acquire). An even N is allowed but buys nothing:
// 4 nodes tolerate one failure, as 3 do.
func NewCluster(nodes []Node, opts ...ClusterOption) (*Cluster, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: no nodes", ErrInvalid)
	}
	for i, n := range nodes {
		if isNil(n) {
			return nil, fmt.Errorf("%w: node %d is nil", ErrInvalid, i)
		}
		for j := range i {
			if sameNode(nodes[j], n) {
				return nil, fmt.Errorf("%w: nodes %d and %d are the same Node (%s): each server must count as one vote", ErrInvalid, j, i, n)
			}
		}
	}
	c := &Cluster{
		nodes:     append([]Node(nil), nodes...),
		quorum:    len(nodes)/2 + 1,
		publish:   make([]string, len(nodes)),
		unguarded: make([]atomic.Bool, len(nodes)),
		down:      make([]atomic.Bool, len(nodes)),
		done:      make(chan struct{}),
	}
	c.id.init(len(nodes))
	for _, o := range opts {
		o(c)
	}
	c.setters = true
	for i, n := range nodes {
		if _, ok := n.(Setter); !ok {
			c.setters = false
		}
		c.publish[i] = "PUBLISH"
		if s, ok := n.(ShardedPubSub); ok && s.ShardedPubSub() {
			c.publish[i], c.sharded = "SPUBLISH", true
		}
	}
	return c, nil
}

func isNil(n Node) bool {
	if n == nil {
		return true
	}
	v := reflect.ValueOf(n)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// Unguarded returns the names of the nodes that were asked to apply the restart guard and
// could not, because they do not report their uptime.
func (c *Cluster) Unguarded() []string {
	var names []string
	for i := range c.unguarded {
		if c.unguarded[i].Load() {
			names = append(names, c.nodes[i].String())
		}
	}
	return names
}

func (c *Cluster) markUnguarded(i int) {
	if !c.unguarded[i].Swap(true) && c.warn != nil {
		c.warn(c.nodes[i].String())
	}
}

// Nodes returns the number of nodes.
func (c *Cluster) Nodes() int { return len(c.nodes) }

// Close makes every later acquisition fail with ErrClosed, and wakes the waiters of
// AcquireWait, which then fail with it. Extend and Release still work, so that held locks
// can be let go. It closes nothing of the nodes'. It is safe to call more than once.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.done)
	})
}

// Quorum returns the number of yes-votes an operation needs: N/2+1.
func (c *Cluster) Quorum() int { return c.quorum }

// Lock is one owner's claim on a lock: which keys, under which token, for how long.
type Lock struct {
	Keys Keys
	// Token is the owner's random token (NewToken); AcquireWait sets one per attempt,
	// "<waiter id>.<attempt>". It must follow the format rules in the package doc (Tokens).
	Token string
	TTL   time.Duration
	// NodeTimeout bounds each node's answer. A node slower than this counts as failed.
	NodeTimeout time.Duration
	// DriftFactor scales the clock-drift allowance: validity = TTL - elapsed - (TTL*DriftFactor + 2ms).
	DriftFactor float64
	// Fence asks for a fencing token: each node advances its counter, and for N > 1, unless
	// a quorum of the granting nodes agree on the largest counter, one more round raises it
	// on a quorum before the token is returned. Without it the counter is left alone and
	// Grant.Fence is 0.
	Fence bool
	// Guard is the restart guard: a node whose server has been up for less than this
	// (rounded up to whole seconds) abstains from granting. 0 turns it off.
	Guard time.Duration

	// Waiter is the id under which the lock's waiters queue this owner, and Ticket its
	// place in the queue (smaller first). AcquireWait sets both; with an empty Waiter (a
	// single Acquire, say) the owner never queues and is refused while live waiters queue.
	Waiter string
	Ticket int64
	// Contended says that others are likely to hold or wait for the lock (the owner's last
	// acquisition had to wait, say): AcquireWait's first attempt then runs the acquire
	// script, which queues the owner at once, rather than a plain SET NX (see Setter).
	Contended bool
	// Persist keeps AcquireWait trying through errors that no retry can fix (see
	// Permanent), for a caller that has no way to return them (Mutex.Lock), but not after
	// Cluster.Close; otherwise such an error ends AcquireWait at once.
	Persist bool
	// Failed, if set, is called with the error of each failed attempt of AcquireWait but
	// the last (ctx's end, or a permanent error), in AcquireWait's goroutine, before it
	// waits for the next attempt: for a caller that reports long waits.
	Failed func(err error)

	// attempt is the number of AcquireWait's attempt under way (0 for Acquire): only its
	// first attempt may take the lock with a plain SET (see Setter), unless Contended.
	attempt int
	// acquiring is the acquisition that granted the lock, pending the number of its nodes
	// that had not answered when it returned, and late those nodes (a bit per node, for
	// N <= 64). Release calls each of them only once it answered, so that a straggler's
	// SET cannot land after the release and leave a key behind.
	acquiring *fanout
	pending   int
	late      uint64
}

// Drift is the clock-drift allowance subtracted from every validity: TTL*DriftFactor + 2ms.
func (l *Lock) Drift() time.Duration {
	return time.Duration(float64(l.TTL)*l.DriftFactor) + 2*time.Millisecond
}

func millis(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// reply is one node's answer to one script.
type reply struct {
	node int
	vals []int64
	err  error
}

// yes reports whether the node answered with a first element of 1.
func (r reply) yes() bool { return r.err == nil && len(r.vals) > 0 && r.vals[0] == 1 }

// request is one script call, made on every node of a fan-out.
type request struct {
	s    *Script
	keys []string
	args []string
	// sharded: the release script's args for nodes with sharded pub/sub (see prepare).
	sharded []string
	// identify: the acquire script's args for nodes not identified yet (see identity).
	identify []string
	// setNX: a node that is a Setter is sent SET key value NX PX ttl instead of s, and its
	// answer counts as the acquire script's {1, 0} (set) or {0, 0} (refused), in its two
	// places of set. (keys and args are then needed only if some node is not a Setter.)
	setNX      bool
	key, value string
	ttl        time.Duration
	set        []int64
}

// call runs s on every node at once, each bounded by timeout (see fan).
func (c *Cluster) call(ctx context.Context, timeout time.Duration, s *Script, keys []string, args ...string) *fanout {
	return c.fan(ctx, timeout, request{s: s, keys: keys, args: args})
}

// fan sends req to every node at once, each bounded by timeout, and returns the fan-out,
// whose out channel receives the N replies in the order they arrive, and whose deadline
// is closed at the calls' deadline (see deadline), for collect. out has room for all N,
// so a reader may stop reading as soon as the outcome is decided: the rest finish on their
// own, by their deadline at the latest. The reader calls done once it takes no more
// replies. A single node is called in the caller's goroutine, under ctx: there is nothing
// to run in parallel with it, and its reply is in out on return (deadline is then nil).
func (c *Cluster) fan(ctx context.Context, timeout time.Duration, req request) *fanout {
	return c.start(c.fan0(ctx, timeout, req), 0)
}

// fanAfter is fan for a release of the lock that acquisition a granted, whose late nodes
// (a bit per node) had not answered it: it calls the others at once, and each late node
// once it answered a, or at a's deadline (see Lock.acquiring); it returns when it has
// started every call. It takes over reading a.
func (c *Cluster) fanAfter(ctx context.Context, timeout time.Duration, req request, a *fanout, late uint64) *fanout {
	f := c.start(c.fan0(ctx, timeout, req), late)
	f.dispatchLate(a, late)
	return f
}

// fan0 readies a fan-out of req, without starting its calls.
func (c *Cluster) fan0(ctx context.Context, timeout time.Duration, req request) *fanout {
	f, _ := c.fans.Get().(*fanout)
	if f == nil {
		f = &fanout{c: c, out: make(chan reply, len(c.nodes)), lateNodes: make(chan int, len(c.nodes))}
		f.run, f.runLate = f.call, f.callLate
	}
	f.ctx, f.timeout, f.req = ctx, timeout, req
	f.next.Store(0)
	f.refs.Store(int32(len(c.nodes)) + 1)
	c.prepare(f)
	return f
}

// start starts f's calls, but for those to the late nodes (see fanAfter).
func (c *Cluster) start(f *fanout, late uint64) *fanout {
	f.first = 0 // every node
	if late != 0 {
		f.first = ^late & (1<<len(c.nodes) - 1)
	}
	if len(c.nodes) == 1 {
		var cancel context.CancelFunc
		if f.ctx == context.Background() { // nothing to cancel the call but its deadline
			f.dctx = c.deadline(f.ctx, f.timeout)
		} else {
			f.dctx, cancel = c.deadlineUnder(f.ctx, f.timeout)
		}
		f.call()
		if cancel != nil {
			cancel()
		}
		return f
	}
	f.dctx = c.deadline(f.ctx, f.timeout)
	f.deadline = f.dctx.Done()
	for range len(c.nodes) - bits.OnesCount64(late) {
		go f.run() // f.run, made once: a go statement with a new closure or arguments would allocate
	}
	return f
}

// fanout is one request's calls to every node: each run makes the call to the next node.
// A fanout is recycled once every call has answered and its reader is done with it (see
// done), so that the calls of a busy client allocate no channel of their own.
type fanout struct {
	c         *Cluster
	ctx, dctx context.Context
	timeout   time.Duration
	req       request
	out       chan reply      // the replies; room for all N
	deadline  <-chan struct{} // closed at the calls' deadline; nil for a single node
	set       []int64         // room for the replies to a SET NX (see prepare)
	next      atomic.Int32    // the next node to call
	refs      atomic.Int32    // the calls still to answer, and the reader until it is done
	// For fanAfter: the nodes to call at once (0: all), and the late nodes' indexes, as
	// dispatchLate finds them ready.
	first     uint64
	lateNodes chan int
	run       func() // f.call
	runLate   func() // f.callLate
}

// call calls the next node (of f.first, if set).
func (f *fanout) call() {
	i := int(f.next.Add(1)) - 1
	if f.first != 0 {
		i = nthBit(f.first, i)
	}
	f.send(i)
}

// callLate calls the next late node that dispatchLate found ready.
func (f *fanout) callLate() { f.send(<-f.lateNodes) }

func (f *fanout) send(i int) {
	f.out <- f.c.eval(f.ctx, f.dctx, i, f.timeout, &f.req)
	f.unref()
}

// dispatchLate reads the late nodes' answers to a, and starts the call to each as it
// answers, or to every one left at a's deadline. Then it is done with a.
func (f *fanout) dispatchLate(a *fanout, late uint64) {
	for late != 0 {
		select {
		case r := <-a.out:
			if late&(1<<r.node) == 0 {
				continue // not late (cannot happen: a's reader took every other reply)
			}
			late &^= 1 << r.node
			f.lateNodes <- r.node
			go f.runLate()
		case <-a.deadline: // the rest answer, if ever, after done
			for ; late != 0; late &= late - 1 {
				f.lateNodes <- bits.TrailingZeros64(late)
				go f.runLate()
			}
		}
	}
	a.done()
}

// nthBit returns the index of the k-th (from 0) set bit of mask, which has more than k.
func nthBit(mask uint64, k int) int {
	for range k {
		mask &= mask - 1
	}
	return bits.TrailingZeros64(mask)
}

// done says that f's reader takes no more replies from out. It must be called once, and
// f not used after it.
func (f *fanout) done() { f.unref() }

// unref drops one reference to f; the last one (every call answered, the reader done)
// empties out and recycles f.
func (f *fanout) unref() {
	if f.refs.Add(-1) != 0 {
		return
	}
	for len(f.out) > 0 {
		<-f.out
	}
	f.ctx, f.dctx, f.req, f.deadline = nil, nil, request{}, nil
	f.c.fans.Put(f)
}

// prepare readies f's request for the nodes' calls: for nodes with sharded pub/sub, the
// release script's arguments with SPUBLISH in place of PUBLISH, and room for the replies
// to a SET NX.
func (c *Cluster) prepare(f *fanout) {
	req := &f.req
	if req.s == releaseScript && c.sharded {
		req.sharded = spublish(req.args)
	}
	if req.setNX {
		if f.set == nil {
			f.set = make([]int64, 2*len(c.nodes))
		}
		clear(f.set)
		req.set = f.set
	}
}

// spublish returns a copy of the release script's args (see releaseArgs) with SPUBLISH in
// place of PUBLISH, for a node with sharded pub/sub.
func spublish(args []string) []string {
	sharded := slices.Clone(args)
	sharded[2] = "SPUBLISH"
	return sharded
}

// releaseArgs returns the release script's ARGV (see release.lua): token, channel,
// PUBLISH (which a node with sharded pub/sub is sent as SPUBLISH), waiter, mode and more.
func releaseArgs(token, channel, waiter, mode string, more ...string) []string {
	args := make([]string, 0, 5+len(more))
	return append(append(args, token, channel, "PUBLISH", waiter, mode), more...)
}

// deadline returns a context with a deadline timeout away, and ctx's values but not its
// cancellation, for calls that run on goroutines of their own (the caller waits for ctx
// itself: see collect). Such calls share one deadline per millisecond and timeout, at least
// timeout away and at most a millisecond more: that spares the timer that a context of
// their own would start, a large part of a busy client's work.
func (c *Cluster) deadline(ctx context.Context, timeout time.Duration) context.Context {
	now := time.Now()
	d := c.shared.Load()
	if d == nil || d.timeout != timeout || !now.Before(d.until) {
		d = &sharedDeadline{timeout: timeout, until: now.Add(time.Millisecond)}
		// Its deadline ends it, never its cancel function: other calls may share it.
		d.ctx, d.cancel = context.WithDeadline(context.Background(), d.until.Add(timeout))
		c.shared.Store(d)
	}
	if ctx == context.Background() {
		return d.ctx
	}
	return valuesOf{Context: d.ctx, values: ctx}
}

// valuesOf is a shared deadline (Context) that carries the values of a caller's context.
type valuesOf struct {
	context.Context
	values context.Context
}

func (v valuesOf) Value(key any) any { return v.values.Value(key) }

// deadlineUnder returns ctx with a deadline timeout away, for a call made in the caller's
// goroutine, and the function that cancels it, or nil where there is nothing to cancel.
// Calls under the same ctx one after another (many goroutines under one service context,
// say) share one such context per millisecond and timeout, as the calls of deadline do:
// each context of its own would start a timer and register with ctx, under ctx's lock.
// A ctx seen for the first time gets a context of its own, so that calls under ever new
// contexts (one per request, say) leave no shared context waiting for its deadline. The
// Cluster keeps the context of the last shared deadline until another one replaces it.
func (c *Cluster) deadlineUnder(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	v := reflect.ValueOf(ctx)
	if v.Kind() != reflect.Pointer { // == would panic on some contexts
		return context.WithTimeout(ctx, timeout)
	}
	now := time.Now()
	if d := c.under.Load(); d != nil && d.parent == ctx && d.timeout == timeout && now.Before(d.until) {
		return d.ctx, nil
	}
	// Only the address of a context seen once is kept: no allocation, and no reference. (An
	// address reused by a later context only makes that one share from its first call.)
	if c.lastUnder.Swap(v.Pointer()) != v.Pointer() {
		return context.WithTimeout(ctx, timeout)
	}
	d := &sharedDeadline{parent: ctx, timeout: timeout, until: now.Add(time.Millisecond)}
	// Its deadline or ctx ends it, never its cancel function: other calls may share it.
	d.ctx, d.cancel = context.WithDeadline(ctx, d.until.Add(timeout))
	c.under.Store(d)
	return d.ctx, nil
}

// sharedDeadline is a context that the calls started before until share (see deadline and
// deadlineUnder).
type sharedDeadline struct {
	parent  context.Context // deadlineUnder's caller context
	ctx     context.Context
	cancel  context.CancelFunc // never called: the deadline ends the context
	timeout time.Duration
	until   time.Time
}

// callNode runs s on node i alone, bounded by timeout, for a caller that runs it on a
// goroutine of its own.
func (c *Cluster) callNode(ctx context.Context, i int, timeout time.Duration, s *Script, keys, args []string) reply {
	req := request{s: s, keys: keys, args: args}
	if s == releaseScript && c.publish[i] == "SPUBLISH" {
		req.sharded = spublish(args)
	}
	return c.eval(ctx, c.deadline(ctx, timeout), i, timeout, &req)
}

// eval sends req to node i under dctx, which bounds the call by the node timeout, and
// turns the outcome into a reply: the caller's ctx error if it ended, ErrNodeTimeout if
// the deadline passed, an error for an empty reply.
func (c *Cluster) eval(ctx, dctx context.Context, i int, timeout time.Duration, req *request) reply {
	var vals []int64
	var err error
	if !req.setNX && req.s != acquireScript { // not a vote
		vals, err = c.send(dctx, i, req, false)
	} else if err = c.misconfigured(); err == nil {
		// A vote counts only from a node known to reach a server that no other node
		// reaches: until it is known, the acquisition asks the server to say which it is.
		known := c.id.known[i].Load()
		vals, err = c.send(dctx, i, req, !known)
		if err == nil && !known {
			err = c.identified(i, vals) // if it granted the vote, the lock is released as for a failed node
		}
	}
	switch {
	case ctx.Err() != nil:
		err = ctx.Err()
	case err != nil && dctx.Err() != nil:
		err = timeoutError(timeout, err)
	case err == nil && len(vals) == 0:
		err = fmt.Errorf("redlock: %s script: empty reply", req.s.Name())
	}
	if err != nil {
		vals = nil
	}
	switch {
	case err == nil:
		c.down[i].Store(false)
	case ctx.Err() != nil: // the caller's end says nothing of the node
	case dctx.Err() != nil || inTransit(err):
		c.down[i].Store(true)
	default: // a server's error reply: it answered
		c.down[i].Store(false)
	}
	r := reply{node: i, vals: vals, err: err}
	c.noteGuard(r)
	return r
}

// inTransit reports whether err is a failure to reach the node (a refused or reset
// connection, a network timeout), rather than the server's error reply.
func inTransit(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// suspects returns the nodes (a bit each; N <= 64) whose last call failed in transit: an
// acquisition does not wait for them to decide that it has lost (see tally.lost). It still
// calls them, and a node that answers is no longer suspected.
func (c *Cluster) suspects() uint64 {
	var s uint64
	if len(c.nodes) <= 64 {
		for i := range c.down {
			if c.down[i].Load() {
				s |= 1 << i
			}
		}
	}
	return s
}

// errSuspect is the error of a node that an acquisition did not wait for: its last call
// had failed, and it had not answered yet when the outcome was decided.
var errSuspect = errors.New("redlock: node failed its last call, and was not waited for")

// send sends req to node i: SET NX where it asks for it and the node is a Setter (unless
// the server is to identify itself), or else its script.
func (c *Cluster) send(dctx context.Context, i int, req *request, identify bool) ([]int64, error) {
	if setter, ok := c.nodes[i].(Setter); ok && req.setNX && !identify {
		set, err := setter.SetNX(dctx, req.key, req.value, req.ttl)
		vals := req.set[2*i : 2*i+2 : 2*i+2] // {0, 0}: refused
		if set {
			vals[0] = 1
		}
		return vals, err
	}
	args := req.args
	switch {
	case identify:
		args = req.identify
	case c.publish[i] == "SPUBLISH" && req.sharded != nil:
		args = req.sharded
	}
	return c.nodes[i].Eval(dctx, req.s, req.keys, args...)
}

// tally counts the replies to one fan-out until the outcome is decided.
type tally struct {
	c       *Cluster
	op      string
	key     string
	yes     int
	no      int
	errs    []NodeError
	answers int
	all     bool // wait for every node (or the timeout), not only for the outcome
	// suspects are the nodes (a bit each) that were suspected (see Cluster.suspects) when
	// the fan-out began and have not answered: the outcome is decided without them, and
	// all waits for the others only.
	suspects uint64
}

func (t *tally) add(r reply) {
	t.answers++
	if r.node < 64 {
		t.suspects &^= 1 << r.node
	}
	switch {
	case r.err != nil:
		t.errs = append(t.errs, NodeError{Node: t.c.nodes[r.node].String(), Err: r.err})
	case r.vals[0] == 1:
		t.yes++
	case r.vals[0] < 0 && len(r.vals) > 1:
		t.errs = append(t.errs, NodeError{Node: t.c.nodes[r.node].String(), Err: &restartError{wait: time.Duration(r.vals[1]) * time.Millisecond}})
	default:
		t.no++
	}
}

// won reports a quorum of yes-votes; lost reports that a quorum is out of reach.
func (t *tally) won() bool { return t.yes >= t.c.quorum }
func (t *tally) lost() bool {
	return len(t.c.nodes)-t.no-len(t.errs)-bits.OnesCount64(t.suspects) < t.c.quorum
}

// waiting reports whether some node that is not suspected has not answered.
func (t *tally) waiting() bool { return t.answers+bits.OnesCount64(t.suspects) < len(t.c.nodes) }

// unheard records the suspects that did not answer as not waited for.
func (t *tally) unheard() {
	for s := t.suspects; s != 0; s &= s - 1 {
		t.errs = append(t.errs, NodeError{Node: t.c.nodes[bits.TrailingZeros64(s)].String(), Err: errSuspect})
	}
	t.suspects = 0
}

// refused reports that the no-votes alone put a quorum out of reach.
func (t *tally) refused() bool { return t.no > len(t.c.nodes)-t.c.quorum }

// missing records every node that has not answered as timed out.
func (t *tally) missing(answered []bool, err error) {
	for i, ok := range answered {
		if !ok {
			t.errs = append(t.errs, NodeError{Node: t.c.nodes[i].String(), Err: err})
		}
	}
	t.suspects = 0 // recorded with the rest
}

func (t *tally) err() error {
	return &QuorumError{Op: t.op, Key: t.key, Quorum: t.c.quorum, Nodes: len(t.c.nodes), OK: t.yes, Refused: t.no, Errs: t.errs}
}

// collect reads replies from f into t until the outcome is decided (unless t.all), every
// node answered, the calls' deadline passed, or ctx ended: a node that ignores its context
// cannot hold us longer than its timeout. It calls seen for each reply, and marks in
// answered (one entry per node) which nodes answered.
func (c *Cluster) collect(ctx context.Context, f *fanout, t *tally, answered []bool, seen func(reply)) {
	for t.waiting() && (t.all || !t.won() && !t.lost()) {
		var r reply
		select {
		case r = <-f.out: // a reply already in (always, for a call made in the caller's goroutine)
		default:
			select {
			case r = <-f.out:
			case <-f.deadline:
				select {
				case r = <-f.out: // replies that came by the deadline count
				default:
					t.missing(answered, timeoutError(f.timeout, nil))
					return
				}
			case <-ctx.Done():
				t.missing(answered, ctx.Err())
				return
			}
		}
		answered[r.node] = true
		t.add(r)
		if seen != nil {
			seen(r)
		}
	}
}

// timeoutError is ErrNodeTimeout, with the driver's own error when it says more than that
// the deadline passed. It does not wrap context.DeadlineExceeded: the caller's context is
// still live, and errors.Is(err, context.DeadlineExceeded) must say only that it is not.
func timeoutError(timeout time.Duration, err error) error {
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w after %v", ErrNodeTimeout, timeout)
	}
	return fmt.Errorf("%w after %v (%v)", ErrNodeTimeout, timeout, err)
}

// opError wraps err, for op on key.
func opError(op, key string, err error) error { return &keyError{op, key, err} }

// keyError is err, from op on the lock key key.
type keyError struct {
	op, key string
	err     error
}

func (e *keyError) Error() string {
	return fmt.Sprintf("redlock: %s %q: %s", e.op, e.key, strings.TrimPrefix(e.err.Error(), "redlock: "))
}

func (e *keyError) Unwrap() error { return e.err }

// ctxError wraps ctx's error for op on key, or returns nil if ctx is live.
func ctxError(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return opError(op, key, err)
	}
	return nil
}
