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
	node int
	vals []int64 // read only: replies may share it (see setReplies)
	err  error
}

// yes reports whether the node answered with a first element of 1.
func (r reply) yes() bool { return r.err == nil && len(r.vals) > 0 && r.vals[0] == 1 }

// nodeErr returns the node's error: its call's, a *restartError if it abstained under the
// restart guard ({-1, wait}), or nil.
func (r reply) nodeErr() error {
	switch {
	case r.err != nil:
		return r.err
	case r.vals[0] == -2 && len(r.vals) > 1:
		return &permitsError{n: r.vals[1]}
	case r.vals[0] < 0 && len(r.vals) > 1:
		return &restartError{wait: time.Duration(r.vals[1]) * time.Millisecond}
	}
	return nil
}

// request is one script call, made on every node of a fan-out.
type request struct {
	s    *Script
	vote bool // an acquisition: the node's vote counts once it is identified (see identity)
	// detached: the calls keep the caller's values but not its end, and run to their answer
	// or their deadline even if it ends (a release: it is never abandoned half-way).
	detached bool
	// op names the operation ("acquire", "extend", "release", "raise") for failed, the
	// lock's Lock.NodeFailed (nil: nothing to report).
	op     string
	failed func(op string, e NodeError)
	keys   []string
	args   []string
	// setNX: a node that is a Setter is sent SET key value NX PX ttl instead of s (see
	// setNX). keys and args are then needed only if some node is not a Setter.
	setNX      bool
	key, value string
	ttl        time.Duration
	// more is appended to args for the nodes in moreTo (a bit each): an extension's fence,
	// for the nodes that never held the lock (see Extend).
	more   string
	moreTo uint64
	// permits is a semaphore acquisition's number of permits, whose replies end with the
	// permits free and the permit taken (see permitsFree); 0 for the others.
	permits int
	// spare: the nodes (a bit each) not to call while an earlier call to them is still under
	// way: suspects that an acquisition does not wait for (see Cluster.acquire). Such a
	// node gets errNotCalled at once.
	spare uint64
}


// fanout is one request's calls to the nodes, each on a goroutine of its own, under one
// deadline: the replies come on out, in the order they arrive. out has room for all N, so
// a reader may stop reading as soon as the outcome is decided: the rest finish on their
// own, by the deadline at the latest.
type fanout struct {
	c        *Cluster
	out      chan reply // nil for a single node, whose reply is in one
	one      reply
	deadline <-chan struct{} // closed at the calls' deadline; nil for a single node
	timeout  time.Duration
	req      request
	ctx      context.Context // the caller's
	dctx     context.Context // the calls' (see sharedDeadlines.detach)
	skip     uint64          // the nodes fan does not call (see after)
	next     atomic.Int32    // how many calls callNext started
}

// fan sends req to every node but those in skip (a bit per node; see after) at once, each
// call bounded by timeout. The calls run under a context that keeps ctx's values but not
// its cancellation: a caller that stops waiting (its ctx ended) leaves its calls to run to
// their answer or their deadline, so that what they did can still be undone (see abandon).
//
// A single node is called in the caller's goroutine, and its reply is in f.one when fan
// returns, with no channel (see receive): a goroutine and a channel would cost it a round
// of scheduling. That is done only where the caller cannot end the call half-way (a
// detached request, or a ctx that never ends): a call that the caller's end cut short may
// still land on the server, so what follows it (an abandoned attempt's release) must
// wait for its answer, as it does for the calls of a fan-out of many nodes.
func (c *Cluster) fan(ctx context.Context, timeout time.Duration, req request, skip uint64) *fanout {
	f := &fanout{c: c, timeout: timeout, req: req, ctx: ctx, skip: skip}
	if req.detached {
		f.ctx = context.Background() // nothing the caller does ends these calls
	}
	if len(c.nodes) == 1 && skip == 0 && f.ctx.Done() == nil {
		f.one = c.eval(f.ctx, c.deadlines.detach(ctx, timeout), 0, timeout, &f.req)
		return f
	}
	f.out = make(chan reply, len(c.nodes))
	f.dctx = c.deadlines.detach(ctx, timeout)
	f.deadline = f.dctx.Done()
	run := f.callNext // one function for all the calls: a go statement with arguments allocates
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

// call calls node i, and puts its reply on out.
func (f *fanout) call(i int) {
	f.out <- f.c.eval(f.ctx, f.dctx, i, f.timeout, &f.req)
}

// after calls each node that follows wait for (see followed) once every fan-out of follows
// that waits for it has its answer from it, or its deadline passed: so that those calls,
// which could set the lock's key, land before f's. f must skip those nodes (see fan).
// follows are oldest first, and made under one node timeout, so that their deadlines come
// in that order too: after waits on the oldest that still waits, and reads the others'
// replies each time it wakes, so a node is called at the latest at the deadline of the
// last fan-out that waits for it. It empties each late of follows.
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


// releaseArgs returns the release script's ARGV (see release.lua): token, channel,
// PUBLISH (which a node with sharded pub/sub is sent as SPUBLISH), waiter, mode and more.
func releaseArgs(token, channel, waiter, mode string, more ...string) []string {
	args := make([]string, 0, 5+len(more))
	return append(append(args, token, channel, "PUBLISH", waiter, mode), more...)
}

// callNode sends req to node i alone, bounded by timeout, for a caller that runs it on a
// goroutine of its own.
func (c *Cluster) callNode(ctx context.Context, i int, timeout time.Duration, req request) reply {
	return c.eval(ctx, c.deadlines.detach(ctx, timeout), i, timeout, &req)
}

// eval sends req to node i under dctx, which bounds the call by the node timeout, and
// turns the outcome into a reply: the caller's ctx error if it ended, ErrNodeTimeout if
// the deadline passed, an error for an empty reply. A node's failure or abstention goes
// to req.failed, unless the caller's end or the nodes' misconfiguration explains it.
func (c *Cluster) eval(ctx, dctx context.Context, i int, timeout time.Duration, req *request) reply {
	if req.spare&bit(i) != 0 && c.calls[i].Load() > 0 {
		return reply{node: i, err: errNotCalled}
	}
	c.calls[i].Add(1)
	defer c.calls[i].Add(-1)
	vals, misconfigured, err := c.ask(dctx, i, req)
	if err = c.heard(ctx, dctx, i, timeout, err); err == nil && len(vals) == 0 {
		err = fmt.Errorf("redlock: %s script: empty reply", req.s.Name())
	}
	if err != nil {
		vals = nil
	}
	r := reply{node: i, vals: vals, err: err}
	c.noteGuard(r)
	if req.failed != nil && ctx.Err() == nil && !misconfigured {
		if err := r.nodeErr(); err != nil {
			req.failed(req.op, NodeError{Node: c.nodes[i].String(), Err: err})
		}
	}
	return r
}

// ask sends req to node i. A vote counts only from a node known to reach a server that no
// other node reaches: until it is known, the acquisition asks the server to say which it
// is (a vote it granted is released as a failed node's). No vote is asked for while the
// nodes are misconfigured: that error comes back, with misconfigured true.
func (c *Cluster) ask(dctx context.Context, i int, req *request) (vals []int64, misconfigured bool, err error) {
	if !req.vote {
		vals, err = c.send(dctx, i, req, false)
		return vals, false, err
	}
	if err := c.misconfigured(); err != nil {
		return nil, true, err
	}
	known := c.id.known[i].Load()
	vals, err = c.send(dctx, i, req, !known)
	if err == nil && !known && (len(vals) == 0 || vals[0] != -2) { // -2: a semaphore's count disagrees, no vote
		err = c.identified(i, req.identity(vals))
	}
	return vals, false, err
}

// heard returns the error of node i's call under dctx, which bounds it by timeout: the
// caller's ctx error if it ended, ErrNodeTimeout if the deadline passed, or err. It marks
// the node suspected (down) if the call failed in transit or timed out, and not if it
// answered, even with an error reply; the caller's end says nothing of the node.
func (c *Cluster) heard(ctx, dctx context.Context, i int, timeout time.Duration, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil && (dctx.Err() != nil || inTransit(err)):
		c.down[i].Store(true)
		if dctx.Err() != nil {
			return timeoutError(timeout, err)
		}
		return err
	}
	c.down[i].Store(false) // it answered, maybe with a server's error reply
	return err
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

// errNotCalled is the error of a suspect that an acquisition did not call, because an
// earlier call to it was still under way (see request.spare): one call at a time finds out
// whether a node that failed is back. It says nothing new of the node: it is not reported
// to Lock.NodeFailed, and the node stays suspected.
var errNotCalled = errors.New("redlock: node failed its last call, and was not called while another call to it is under way")

// errSuspect is the error of a node that an acquisition did not wait for: its last call
// had failed, and it had not answered yet when the outcome was decided.
var errSuspect = errors.New("redlock: node failed its last call, and was not waited for")

// send sends req to node i: SET NX where it asks for it and the node is a Setter (unless
// the server is to identify itself), or else its script: with "1" appended to the acquire
// script's args to have the server identify itself (see identity), and with SPUBLISH in
// place of PUBLISH in the release script's args (see releaseArgs) for a node with sharded
// pub/sub.
func (c *Cluster) send(dctx context.Context, i int, req *request, identify bool) ([]int64, error) {
	if setter, ok := c.nodes[i].(Setter); ok && req.setNX && !identify {
		return setNX(dctx, setter, req)
	}
	args := req.args
	switch {
	case req.moreTo&bit(i) != 0:
		args = append(args[:len(args):len(args)], req.more)
	case identify && len(args) > 7: // a semaphore's: ARGV[8] is there
		args = slices.Clone(args)
		args[7] = "1"
	case identify:
		args = append(args[:len(args):len(args)], "1")
	case (req.s == releaseScript || req.s == runlockScript || req.s == proclaimScript) && c.sharded[i]:
		args = slices.Clone(args)
		args[2] = "SPUBLISH"
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
	// refusals, with all, stops the wait once a quorum refused.
	refusals bool
	// suspects are the nodes (a bit each) that were suspected (see Cluster.suspects) when
	// the fan-out began and have not answered: the outcome is decided without them, and
	// all waits for the others only.
	suspects uint64
	// gone, for a release within the lease's validity, counts a node that found nothing of
	// the lease's and no other owner (a reply {0, woken, 1}: see release.lua) as
	// one that let go: its key can only have gone by this release, run twice, or with the
	// server's data.
	gone bool
	// retake, for an extension, is when the lease's validity ends: a node that took the lock
	// where it was free ({2}: see extend.lua) counts as one that extended it only if its
	// answer came before then.
	retake time.Time
	// grants counts a semaphore acquisition's grants per permit (nil for a lock), and most
	// is the largest count: a quorum must grant one permit.
	grants []int
	most   int
	// yesNodes, noNodes and failedNodes are the nodes (a bit each, for N <= 64) that said
	// yes, said no and failed (or were recorded as not answering), for the error.
	yesNodes, noNodes, failedNodes uint64
}

// bit is node i's bit in a set of nodes, or 0 past the 64th.
func bit(i int) uint64 {
	if i >= 64 {
		return 0
	}
	return 1 << i
}

// unheardNodes returns the nodes (of the first 64) that t has no answer of, nor an error.
func (t *tally) unheardNodes() uint64 {
	all := uint64(1)<<min(len(t.c.nodes), 64) - 1
	if len(t.c.nodes) >= 64 {
		all = ^uint64(0)
	}
	return all &^ (t.yesNodes | t.noNodes | t.failedNodes)
}

// recorded reports whether node i's failure is recorded in t.errs.
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
	case r.vals[0] == 1, t.gone && len(r.vals) > 2 && r.vals[2] == 1, r.vals[0] == 2 && time.Now().Before(t.retake):
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

// won reports a quorum of yes-votes; lost reports that a quorum is out of reach.
func (t *tally) won() bool { return t.yes >= t.c.quorum && (t.grants == nil || t.most >= t.c.quorum) }
func (t *tally) lost() bool {
	if t.grants != nil { // the permit most granted, and every node yet to answer
		return t.most+len(t.c.nodes)-t.answers-bits.OnesCount64(t.suspects) < t.c.quorum
	}
	return len(t.c.nodes)-t.no-len(t.errs)-bits.OnesCount64(t.suspects) < t.c.quorum
}

// identity returns the part of an acquisition's reply vals that identity reads: all of it
// but a semaphore's free permits and permit taken.
func (r *request) identity(vals []int64) []int64 {
	if n := len(vals) - maskWords(r.permits) - 1; r.permits > 0 && vals[0] >= 0 && n >= 0 {
		return vals[:n]
	}
	return vals
}

// maskWords is how many numbers a semaphore of k permits says its free permits in: 48 bits
// each (see vote in queue.lua).
func maskWords(k int) int { return (k + 47) / 48 }

// permitsFree counts in free, per permit, the nodes whose reply vals (a grant or refusal
// of a semaphore of len(free) permits) says it is free to the caller.
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

// permitOf returns the permit that a semaphore acquisition's reply vals names: its last
// value (see acquire.lua), -1 if none.
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

// fail records node i's failure with err.
func (t *tally) fail(i int, err error) {
	t.errs = append(t.errs, NodeError{Node: t.c.nodes[i].String(), Err: err})
	t.failedNodes |= bit(i)
}

// refused reports that the no-votes alone put a quorum out of reach.
func (t *tally) refused() bool {
	no := t.no
	if t.grants != nil { // a semaphore's: a grant of another permit than the most granted
		no += t.yes - t.most
	}
	return no > len(t.c.nodes)-t.c.quorum
}

// missing records every node that has not answered, and is not recorded yet, as failed
// with err (a timeout, or the caller's end).
func (t *tally) missing(answered []bool, err error) {
	for i, ok := range answered {
		if !ok && !t.recorded(i) {
			t.fail(i, err)
		}

	}
	t.suspects = 0 // recorded with the rest
}

func (t *tally) err() error {
	return &QuorumError{Op: t.op, Key: t.key, Quorum: t.c.quorum, Nodes: len(t.c.nodes), OK: t.yes, Refused: t.no, Errs: t.errs,
		Yes: t.c.names(t.yesNodes), No: t.c.names(t.noNodes), Unheard: t.c.names(t.unheardNodes())}
}

// collect reads replies from f into t until the outcome is decided (with t.all: until a
// quorum refused, if t.refusals), every node answered, the calls' deadline passed, or ctx
// ended: a node that ignores its context cannot hold us longer than its timeout. It calls seen for each reply, and marks in
// answered (one entry per node) which nodes answered.
func (c *Cluster) collect(ctx context.Context, f *fanout, t *tally, answered []bool, seen func(reply)) {
	for t.waiting() && (t.all && !(t.refusals && t.no >= t.c.quorum) || !t.won() && !t.lost()) {
		var r reply
		if f.out == nil { // a single node, which fan called: its one reply
			r = f.one
		} else {
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
