package core

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// MaxValueLen is the longest value a leader may proclaim, in bytes.
const MaxValueLen = 4096

// LeaderChannel returns the channel on which Proclaim publishes "<token> <value>".
func (k Keys) LeaderChannel() string { return k.Channel + ":leader" }

// Proclaim records value as the value of h's holder (an election's leader), where h holds
// the lock, for FenceIdle, and publishes "<token> <value>" on LeaderChannel where the node
// held another record or none. It needs a quorum, and returns as Release does.
//
// Errors: one that matches ErrInvalid for a value over MaxValueLen; ErrNotHeld (too few
// nodes still hold h); a *QuorumError (too few nodes answered).
func (c *Cluster) Proclaim(ctx context.Context, h *Held, value string) error {
	_, err := c.proclaim(ctx, h, value, false)
	return err
}

// ProclaimEverywhere is Proclaim heard out: it waits for every node (each within h's node
// timeout), and also returns how many failed or did not answer, each of which may hold h
// without its record. It suits a leader that records its value again, after an extension
// say, where no caller waits. Errors: Proclaim's.
func (c *Cluster) ProclaimEverywhere(ctx context.Context, h *Held, value string) (missed int, err error) {
	return c.proclaim(ctx, h, value, true)
}

// proclaim is Proclaim, or with everywhere ProclaimEverywhere.
func (c *Cluster) proclaim(ctx context.Context, h *Held, value string, everywhere bool) (int, error) {
	l := &h.claim
	if len(value) > MaxValueLen {
		return 0, opError("proclaim", l.Keys.named(), fmt.Errorf("%w: a value of %d bytes: at most %d", ErrInvalid, len(value), MaxValueLen))
	}
	ctx = context.WithoutCancel(ctx)
	start := time.Now()
	f := c.fan(ctx, l.NodeTimeout, request{s: proclaimScript, keys: []string{l.Keys.Lock, l.Keys.Leader},
		args: []string{l.token, l.Keys.LeaderChannel(), "PUBLISH", value, millis(FenceIdle)}}, 0)
	t := tally{c: c, op: "proclaim", key: l.Keys.named(), all: everywhere}
	if !everywhere {
		if err := c.settle(ctx, f, &t, start); err != nil && !t.won() {
			return 0, err
		}
		return 0, nil
	}
	c.collect(ctx, f, &t, make([]bool, len(c.nodes)), nil)
	missed := len(c.nodes) - t.yes - t.no
	switch {
	case t.won():
		return missed, nil
	case t.refused():
		return missed, opError(t.op, t.key, ErrNotHeld)
	}
	return missed, t.err()
}

// WatchLeader subscribes to k.LeaderChannel on every node that is a Subscriber, each within
// timeout, and returns once every node answered, or a quorum confirmed and the rest had
// twice as long as that took, or ctx ended. The returned channel is ready after each record
// of a leader's value that a node reports. stop, to be called once, unsubscribes once the
// subscriptions still under way answered.
func (c *Cluster) WatchLeader(ctx context.Context, k Keys, timeout time.Duration) (records <-chan struct{}, stop func()) {
	w := c.watch(ctx, k.LeaderChannel(), timeout)
	out, done, forwarded := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(forwarded)
		for {
			select {
			case <-w.msgs:
				select {
				case out <- struct{}{}:
				default:
				}
			case <-done:
				return
			}
		}
	}()
	return out, func() {
		close(done)
		<-forwarded
		w.stop()
	}
}

// Leader returns the value that the leader of the election whose keys are k proclaimed,
// and its token, if a quorum of the nodes hold that record and its token holds the lock on
// each; ok is false if none does. It returns once the outcome is decided.
//
// Errors: a *QuorumError when too few nodes answered for either outcome, or ctx's error.
func (c *Cluster) Leader(ctx context.Context, k Keys, timeout time.Duration) (token, value string, ok bool, err error) {
	if err := ctxError(ctx, "leader", k.named()); err != nil {
		return "", "", false, err
	}
	f := c.fan(ctx, timeout, request{s: leaderScript, keys: []string{k.Lock, k.Leader}, op: "leader"}, 0)
	t := tally{c: c, op: "leader", key: k.named(), all: true}
	counts := map[string]int{} // per record: the nodes that hold it, its token holding the lock
	var top string             // the record most nodes hold
	// none: no quorum can hold top, counting the nodes that failed or are not heard yet
	none := func() bool { return len(c.nodes)-(t.yes+t.no-counts[top]) < c.quorum }
	c.collect(ctx, f, &t, make([]bool, len(c.nodes)), func(r reply) {
		if r.yes() {
			if counts[r.record]++; counts[r.record] > counts[top] {
				top = r.record
			}
		}
		t.done = counts[top] >= c.quorum || none()
	})
	switch {
	case counts[top] >= c.quorum:
		token, value, _ = strings.Cut(top, " ")
		return token, value, true, nil
	case none():
		return "", "", false, nil
	case t.answers < len(c.nodes) && ctx.Err() != nil:
		return "", "", false, ctxError(ctx, "leader", k.named())
	}
	return "", "", false, t.err()
}

// The vals of a leader script's reply with a record and without (read only).
var recordFound, recordMissing = []int64{1}, []int64{0}

// readRecord runs the leader script on node i: {1} and the record, or {0} without one.
func (c *Cluster) readRecord(dctx context.Context, i int, keys []string) ([]int64, string, error) {
	vals, err := c.nodes[i].EvalStrings(dctx, leaderScript, keys)
	switch {
	case err != nil:
		return nil, "", err
	case len(vals) == 1 && vals[0] == "0":
		return recordMissing, "", nil
	case len(vals) == 2 && vals[0] == "1":
		return recordFound, vals[1], nil
	}
	return nil, "", fmt.Errorf("redlock: leader script replied %d values, want {0} or {1, record}", len(vals))
}
