package core

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Permits checks that the nodes agree with permits as the number of permits of the
// semaphore whose keys are k (its record is k.Lock + ":permits"), and keeps the record for FenceIdle from now: a node with
// no record takes permits. A semaphore's holders must all count the same permits, and
// each acquisition checks. A node whose server started less than guard ago (rounded up to
// whole seconds; 0: no guard) abstains, as from an acquisition: it may have lost another
// count's record. Every node that is not suspected (see Cluster.suspects) is heard out,
// within timeout, so that a dissent that comes late still counts: two counts that each
// reached a quorum share a node, and the later check hears that node's record.
//
// It returns nil once a quorum agreed and no node dissented; an error that matches
// ErrInvalid, and names the node and its number, if any node records another (a holder
// that counts otherwise must not go on); else a *QuorumError (too few nodes answered, or
// they abstained), or ctx's error.
//
// The record outlives the last acquisition by FenceIdle: holders that disagree are found
// as long as one of them acquired within that time.
func (c *Cluster) Permits(ctx context.Context, k Keys, permits int, timeout, guard time.Duration) error {
	if err := ctxError(ctx, "permits", k.named()); err != nil {
		return err
	}
	guardS := strconv.FormatInt(int64((guard+time.Second-1)/time.Second), 10)
	f := c.call(ctx, nil, "", timeout, permitsScript, []string{k.Lock + ":permits"}, strconv.Itoa(permits), millis(FenceIdle), guardS)
	t := tally{c: c, op: "permits", key: k.named(), all: true, suspects: c.suspects()}
	var other error
	c.collect(ctx, f, &t, make([]bool, len(c.nodes)), func(r reply) {
		if other == nil && r.err == nil && r.vals[0] == 0 && len(r.vals) > 1 {
			other = fmt.Errorf("%w: semaphore %q has %d permits on node %s, not %d: every holder must count the same",
				ErrInvalid, k.named(), r.vals[1], c.nodes[r.node], permits)
		}
	})
	switch {
	case other != nil:
		return other
	case ctx.Err() != nil:
		return ctxError(ctx, "permits", k.named())
	case t.won():
		return nil
	}
	t.unheard()
	return t.err()
}
