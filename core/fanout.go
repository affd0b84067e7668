package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

func millis(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// reply is one node's answer to one script.
type reply struct {
	node   int
	vals   []int64 // read only: replies may share it (see setReplies)
	record string  // the leader script's record
	err    error
}

func (r reply) yes() bool { return r.err == nil && len(r.vals) > 0 && r.vals[0] == 1 }

// nodeErr returns the node's error: its call's, its semaphore's count of permits that
// differs ({-2, n}: ErrInvalid), its abstention ({-1, wait}: ErrRestarted), or nil.
func (r reply) nodeErr() error {
	switch {
	case r.err != nil:
		return r.err
	case r.vals[0] == -2 && len(r.vals) > 1:
		return fmt.Errorf("%w: the node records %d permits: every holder of a semaphore must count the same", ErrInvalid, r.vals[1])
	case r.vals[0] < 0 && len(r.vals) > 1:
		return fmt.Errorf("%w for another %v", ErrRestarted, time.Duration(r.vals[1])*time.Millisecond)
	}
	return nil
}

// request is one script call, made on every node of a fan-out.
type request struct {
	s        *Script
	vote     bool // an acquisition: the node's vote counts once it is identified
	detached bool // the calls run to their answer or deadline even if the caller's ctx ends
	op       string
	failed   func(op string, e NodeError) // Lock.NodeFailed, or nil
	keys     []string
	args     []string
	// more is appended to args for the nodes in moreTo (an extension's fence, for the nodes
	// that never held the lock).
	more    string
	moreTo  uint64
	permits int // a semaphore acquisition's number of permits; 0 for the others
	// spare: the nodes not to call while an earlier call to them is under way (suspects):
	// such a node gets errNotCalled at once.
	spare uint64
}

// fanout is one request's calls to the nodes under one deadline. Replies come on out as
// they arrive; out has room for all N, so a reader may stop reading once the outcome is
// decided.
type fanout struct {
	c       *Cluster
	out     chan reply // nil for a single node called inline: its reply is one
	one     reply
	timeout time.Duration
	req     request
	ctx     context.Context // the caller's
	dctx    context.Context // the calls', which ends at their deadline (see sharedDeadlines.detach)
	skip    uint64          // the nodes fan does not call (see after)
	next    atomic.Int32    // how many calls callNext started
}

// fan sends req to every node but those in skip at once, each call bounded by timeout. The
// calls keep ctx's values but not its end: they run to their answer or deadline, so that
// what they did can still be undone. A single node is called in the caller's goroutine, but
// only where the caller cannot end the call half-way (a detached request, or a ctx that
// never ends) and the node is not a suspect: a backend may run a call under its deadline
// inline too (EndsAtDeadline), and a driver that makes a new connection after a broken one
// may overrun the deadline in its handshake, which the caller then does not wait for.
func (c *Cluster) fan(ctx context.Context, timeout time.Duration, req request, skip uint64) *fanout {
	f := &fanout{c: c, timeout: timeout, req: req, ctx: ctx, dctx: c.deadlines.detach(ctx, timeout), skip: skip}
	if req.detached {
		f.ctx = context.Background()
	}
	if len(c.nodes) == 1 && skip == 0 && f.ctx.Done() == nil && !c.down[0].Load() {
		f.one = f.eval(0)
		return f
	}
	f.out = make(chan reply, len(c.nodes))
	run := f.callNext // a go statement with arguments allocates
	for range len(c.nodes) - bits.OnesCount64(skip) {
		go run()
	}
	return f
}

// callNext calls the next node that fan calls.
func (f *fanout) callNext() {
	k := int(f.next.Add(1)) - 1
	for i := range f.c.nodes {
		if f.skip&(1<<i) == 0 {
			if k == 0 {
				f.call(i)
				return
			}
			k--
		}
	}
}

func (f *fanout) call(i int) { f.out <- f.eval(i) }

// after calls each node that follows wait for once every one of follows (oldest first,
// under one node timeout) has its answer from it or passed its deadline, so that their
// calls land before f's; f must skip those nodes. It empties each late of follows.
func (f *fanout) after(follows []followed) {
	for all := lateOf(follows); all != 0; {
		for k := range follows {
			follows[k].poll()
		}
		left := lateOf(follows)
		for ready := all &^ left; ready != 0; ready &= ready - 1 {
			go f.call(bits.TrailingZeros64(ready))
		}
		for all = left; len(follows) > 0 && follows[0].late == 0; {
			follows = follows[1:]
		}
		if all != 0 {
			follows[0].await()
		}
	}
}

// callNode sends req to node i alone, bounded by timeout.
func (c *Cluster) callNode(ctx context.Context, i int, timeout time.Duration, req request) reply {
	f := fanout{c: c, timeout: timeout, req: req, ctx: ctx, dctx: c.deadlines.detach(ctx, timeout)}
	return f.eval(i)
}

// eval sends f's request to node i and returns its reply, with the error heard gives or
// one for an empty reply. A node's failure or abstention goes to req.failed, unless the
// caller's end or the nodes' misconfiguration explains it.
func (f *fanout) eval(i int) reply {
	c, req := f.c, &f.req
	if req.spare&bit(i) != 0 && c.calls[i].Load() > 0 {
		return reply{node: i, err: errNotCalled}
	}
	c.calls[i].Add(1)
	defer c.calls[i].Add(-1)
	r, misconfigured := c.ask(f.dctx, i, req)
	if r.err = explained(f.heard(i, r.err), c.sharded[i], req.s); r.err == nil && len(r.vals) == 0 {
		r.err = fmt.Errorf("redlock: %s script: empty reply", req.s.Name())
	}
	if r.err != nil {
		r.vals = nil
		c.failedWith(i, r.err)
	}
	if r.yes() && len(r.vals) > 2 && r.vals[2] == 1 { // granted, unguarded
		c.markUnguarded(i)
	}
	if req.vote && r.err == nil {
		c.voted(i, r.vals)
	}
	if req.failed != nil && f.ctx.Err() == nil && !misconfigured {
		if err := r.nodeErr(); err != nil {
			req.failed(req.op, NodeError{Node: c.nodes[i].String(), Err: err})
		}
	}
	return r
}

// ask sends req to node i (the leader script through readRecord). Until the node is
// identified, a vote asks the server to say which it is; no vote is asked for while the
// nodes are misconfigured (that error comes back, with misconfigured true).
func (c *Cluster) ask(dctx context.Context, i int, req *request) (r reply, misconfigured bool) {
	r.node = i
	switch {
	case req.s == leaderScript:
		r.vals, r.record, r.err = c.readRecord(dctx, i, req.keys)
		return r, false
	case !req.vote:
		r.vals, r.err = c.send(dctx, i, req, false)
		return r, false
	}
	if r.err = c.misconfigured(); r.err != nil {
		return r, true
	}
	known := c.id.known[i].Load()
	r.vals, r.err = c.send(dctx, i, req, !known)
	if r.err == nil && !known && (len(r.vals) == 0 || r.vals[0] != -2) { // -2: a semaphore's count disagrees, no vote
		r.err = c.identified(i, req.identity(r.vals))
	}
	return r, false
}

// heard returns the error of f's call to node i: the caller's ctx error if it ended,
// ErrNodeTimeout if the deadline passed, or err. It marks the node suspected (down) if the
// call failed in transit or timed out, and not if it answered, even with an error reply;
// the caller's end says nothing of the node.
func (f *fanout) heard(i int, err error) error {
	switch {
	case f.ctx.Err() != nil:
		return f.ctx.Err()
	case err != nil && (f.pastDeadline() || inTransit(err)):
		f.c.down[i].Store(true)
		if f.pastDeadline() {
			return timeoutError(f.timeout, err)
		}
		return err
	}
	f.c.down[i].Store(false)
	return err
}

// pastDeadline reports whether the calls' deadline has passed: by the clock, not only once
// the deadline context's timer ran, as a driver that set its connection's deadline to the
// call's (go-redis with ContextTimeoutEnabled) may fail the call with its own timeout first.
func (f *fanout) pastDeadline() bool {
	if f.dctx.Err() != nil {
		return true
	}
	deadline, ok := f.dctx.Deadline()
	return ok && !time.Now().Before(deadline)
}

// inTransit reports whether err is a failure to reach the node, not the server's reply.
func inTransit(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// suspects returns the nodes (N <= 64; none above) whose last call failed in transit.
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

// errNotCalled is a suspect's error when an acquisition did not call it (request.spare). It
// says nothing new of the node: it is not reported to Lock.NodeFailed.
var errNotCalled = errors.New("redlock: node failed its last call, and was not called while another call to it is under way")

// errSuspect is a suspect's error when it had not answered by the time the outcome was
// decided.
var errSuspect = errors.New("redlock: node failed its last call, and was not waited for")

// send sends req's script to node i, with "1" in the acquire script's identify argument,
// and SPUBLISH for PUBLISH on a node with sharded pub/sub.
func (c *Cluster) send(dctx context.Context, i int, req *request, identify bool) ([]int64, error) {
	args := req.args
	if (req.s == releaseScript || req.s == proclaimScript) && c.sharded[i] {
		args = slices.Clone(args) // whatever else this node is sent
		args[2] = "SPUBLISH"
	}
	switch {
	case req.moreTo&bit(i) != 0:
		args = append(args[:len(args):len(args)], req.more)
	case identify:
		args = slices.Clone(args)
		args[7] = "1"
	}
	return c.nodes[i].Eval(dctx, req.s, req.keys, args...)
}

// tally counts the replies to one fan-out until the outcome is decided.
type tally struct {
	c        *Cluster
	op       string
	key      string
	yes      int
	no       int
	errs     []NodeError
	answers  int
	all      bool   // wait for every node (or the deadline), not only for the outcome
	refusals bool   // with all: stop once a quorum refused
	suspects uint64 // suspected when the fan-out began and not answered: not waited for
	// gone, for a release within the lease's validity: a reply {0, woken, 1} (nothing of
	// the lease's, no other owner) counts as yes.
	gone bool
	// grants counts a semaphore's grants per permit (nil for a lock); most is the largest.
	grants []int
	most   int
	done   bool // set by collect's seen once it decided the outcome
	// the nodes (of the first 64) that said yes, said no, and failed, for the error
	yesNodes, noNodes, failedNodes uint64
}

// bit is node i's bit in a set of nodes, or 0 past the 64th.
func bit(i int) uint64 {
	if i >= 64 {
		return 0
	}
	return 1 << i
}

// recorded reports whether node i's failure is in t.errs.
func (t *tally) recorded(i int) bool {
	if i < 64 {
		return t.failedNodes&bit(i) != 0
	}
	name := t.c.nodes[i].String()
	for _, e := range t.errs {
		if e.Node == name {
			return true
		}
	}
	return false
}

// names returns the names of the nodes in set.
func (c *Cluster) names(set uint64) []string {
	var names []string
	for ; set != 0; set &= set - 1 {
		names = append(names, c.nodes[bits.TrailingZeros64(set)].String())
	}
	return names
}

func (t *tally) add(r reply) {
	t.answers++
	t.suspects &^= bit(r.node)
	switch err := r.nodeErr(); {
	case err != nil:
		if !t.recorded(r.node) { // missing may have recorded it: a reply after the deadline
			t.fail(r.node, err)
		}
	case r.vals[0] == 1, t.gone && len(r.vals) > 2 && r.vals[2] == 1:
		t.yes++
		t.yesNodes |= bit(r.node)
		if i := permitOf(r.vals); t.grants != nil && i >= 0 && i < len(t.grants) {
			t.grants[i]++
			t.most = max(t.most, t.grants[i])
		}
	default:
		t.no++
		t.noNodes |= bit(r.node)
	}
}

// won reports a quorum of yes-votes (for one permit); lost, that a quorum is out of reach.
func (t *tally) won() bool { return t.yes >= t.c.quorum && (t.grants == nil || t.most >= t.c.quorum) }
func (t *tally) lost() bool {
	if t.grants != nil {
		return t.most+len(t.c.nodes)-t.answers-bits.OnesCount64(t.suspects) < t.c.quorum
	}
	return len(t.c.nodes)-t.no-len(t.errs)-bits.OnesCount64(t.suspects) < t.c.quorum
}

// identity returns the part of an acquisition's reply that identified reads: all but a
// semaphore's free permits and permit taken.
func (r *request) identity(vals []int64) []int64 {
	if n := len(vals) - maskWords(r.permits) - 1; r.permits > 0 && vals[0] >= 0 && n >= 0 {
		return vals[:n]
	}
	return vals
}

// maskWords is how many numbers a semaphore of k permits gives its free permits in (48
// bits each).
func maskWords(k int) int { return (k + 47) / 48 }

// permitsFree counts in free, per permit, the nodes whose reply vals says it is free to the
// caller.
func permitsFree(vals []int64, free []int) {
	m := maskWords(len(free))
	if len(vals) < 4+m || vals[0] < 0 {
		return
	}
	words := vals[len(vals)-1-m : len(vals)-1]
	for i := range free {
		if words[i/48]&(1<<(i%48)) != 0 {
			free[i]++
		}
	}
}

// permitOf returns the permit a semaphore acquisition's reply names, -1 if none.
func permitOf(vals []int64) int {
	if len(vals) < 4 {
		return -1
	}
	return int(vals[len(vals)-1])
}

// waiting reports whether some node that is not suspected has not answered.
func (t *tally) waiting() bool { return t.answers+bits.OnesCount64(t.suspects) < len(t.c.nodes) }

// unheard records the suspects that did not answer as not waited for.
func (t *tally) unheard() {
	for s := t.suspects; s != 0; s &= s - 1 {
		t.fail(bits.TrailingZeros64(s), errSuspect)
	}
	t.suspects = 0
}

func (t *tally) fail(i int, err error) {
	t.errs = append(t.errs, NodeError{Node: t.c.nodes[i].String(), Err: err})
	t.failedNodes |= bit(i)
}

// refused reports that the no-votes (for a semaphore, with the grants of other permits than
// the most granted) put a quorum out of reach.
func (t *tally) refused() bool {
	no := t.no
	if t.grants != nil {
		no += t.yes - t.most
	}
	return no > len(t.c.nodes)-t.c.quorum
}

// couldRefuse reports whether the refusals do not put a quorum out of reach (see refused),
// but would if the nodes not suspected that have not answered refused too.
func (t *tally) couldRefuse() bool {
	unanswered := len(t.c.nodes) - t.answers - bits.OnesCount64(t.suspects)
	return !t.refused() && t.no+unanswered > len(t.c.nodes)-t.c.quorum
}

// missing records every node not answered, and not recorded yet, as failed with err.
func (t *tally) missing(answered []bool, err error) {
	for i, ok := range answered {
		if !ok && !t.recorded(i) {
			t.fail(i, err)
		}
	}
	t.suspects = 0 // recorded with the rest
}

func (t *tally) err() error {
	unheard := (uint64(1)<<len(t.c.nodes) - 1) &^ (t.yesNodes | t.noNodes | t.failedNodes)
	return &QuorumError{Op: t.op, Key: t.key, Quorum: t.c.quorum, Nodes: len(t.c.nodes), OK: t.yes, Refused: t.no, Errs: t.errs,
		Yes: t.c.names(t.yesNodes), No: t.c.names(t.noNodes), Unheard: t.c.names(unheard)}
}

// collect reads replies from f into t until the outcome is decided (with t.all: until every
// node answered, or, with t.refusals, a quorum refused), the calls' deadline passed, or ctx
// ended. It calls seen (if not nil) for each reply, and marks in answered (a flag per node)
// which nodes answered. Where seen decides the outcome, it sets t.done.
func (c *Cluster) collect(ctx context.Context, f *fanout, t *tally, answered []bool, seen func(reply)) {
	for !t.done && t.waiting() && (t.all && !(t.refusals && t.no >= t.c.quorum) || !t.won() && !t.lost()) {
		var r reply
		if f.out == nil {
			r = f.one
		} else {
			select {
			case r = <-f.out:
			case <-f.dctx.Done():
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
