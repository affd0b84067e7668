package redlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-redlock/redlock/core"
)

// A lock over several names on Redis Cluster: one script can take only keys of one slot,
// so a set whose names fall in several slots is taken slot by slot (see AcquireAll). The
// names of each slot form a group, a lock over those names (core.NewSetKeys), and the
// groups are taken one after another in slot order, each as a lock is (waiting in its
// names' queues as one waiter). Every such lock takes its groups in that one order, and
// holds a group only while it waits for a later one, so no two wait for each other: along
// "waits for", the slot waited for never goes down, and within one slot the queue's order
// (ticket, waiter id) goes down.

// errPartLost ends an acquisition slot by slot whose held group was lost (its keys gone, or
// its validity run out without an extension) while it waited for another: it lets go of
// them all and starts again.
var errPartLost = errors.New("redlock: a slot's names were lost, or their validity ran out, while the lock waited for another slot's")

// slotGroups returns the groups of keys, a set's, in slot order, if one of c's nodes is a
// Redis Cluster client and the names fall in several slots; nil otherwise (one script takes
// the whole set). Each group is named name in errors.
func (c *Client) slotGroups(keys core.Keys, name, prefix string) []core.Keys {
	if len(keys.Set) < 2 || !c.onCluster() {
		return nil
	}
	type slotted struct {
		slot uint16
		name string
	}
	ns := make([]slotted, len(keys.Set))
	for i, k := range keys.Set {
		ns[i] = slotted{hashSlot(k.Lock), k.Name}
	}
	slices.SortFunc(ns, func(a, b slotted) int { return cmp.Or(cmp.Compare(a.slot, b.slot), strings.Compare(a.name, b.name)) })
	if ns[0].slot == ns[len(ns)-1].slot {
		return nil
	}
	var groups []core.Keys
	for i := 0; i < len(ns); {
		var names []string
		j := i
		for ; j < len(ns) && ns[j].slot == ns[i].slot; j++ {
			names = append(names, ns[j].name)
		}
		g, _ := core.NewSetKeys(prefix, names) // never empty
		g.Name = name
		groups = append(groups, g)
		i = j
	}
	return groups
}

// onCluster reports whether one of c's nodes is a Redis Cluster client.
func (c *Client) onCluster() bool {
	for _, n := range c.nodes {
		if sp, ok := n.(core.ShardedPubSub); ok && sp.ShardedPubSub() {
			return true
		}
	}
	return false
}

// hashSlot returns the Redis Cluster slot of key: the CRC16 (XMODEM) of its hash tag (the
// text between its first '{' and the first '}' after it, if not empty) or else of the whole
// key, modulo 16384.
func hashSlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

// acquireGroups takes l's groups (see slotGroups), waiting as AcquireWait does if wait,
// else with one attempt each, and returns one grant for them all, whose parts l keeps: its
// Until is the earliest of theirs, and its token, if l is fenced, the largest, to which
// every group's counters are raised. The grant is returned only with more than a third of
// every part's validity left (a part with less is extended first), as its keeper keeps
// them while it waits. If it cannot have a group it lets go of those it holds. If it
// waits, and a held group is lost meanwhile (its keys gone, or its validity run out while
// its extensions failed), or the last extension or the raise fails for a reason a retry
// may fix, it lets go of them all and starts again.
func (c *Client) acquireGroups(ctx context.Context, l *Lease, wait bool, b core.Backoff) (*core.Held, error) {
	for pass := 0; ; pass++ {
		g, err := c.acquireGroupsOnce(ctx, l, wait, b)
		if err == nil || !wait || ctx.Err() != nil || core.Permanent(err) {
			return g, err
		}
		select {
		case <-ctx.Done():
			return nil, &lockError{"acquire", l.name, fmt.Errorf("%w; last attempt: %w", ctx.Err(), err)}
		case <-c.closed:
			return nil, &lockError{"acquire", l.name, fmt.Errorf("%w; last attempt: %w", ErrClosed, err)}
		case <-time.After(b.Delay(pass, 0)):
		}
	}
}

// acquireGroupsOnce is one pass of acquireGroups.
func (c *Client) acquireGroupsOnce(ctx context.Context, l *Lease, wait bool, b core.Backoff) (*core.Held, error) {
	kctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	k := c.keep(kctx, cancel, l.lock.TTL-l.lock.Drift(), l.lock.NodeTimeout)
	for _, keys := range l.groups {
		lk := l.lock
		lk.Keys = keys
		var g *core.Held
		var err error
		if wait {
			g, err = c.cluster.AcquireWait(kctx, &lk, b)
		} else {
			g, err = c.cluster.Acquire(kctx, &lk)
		}
		if err != nil {
			parts := k.stop()
			c.releaseParts(parts)
			if cause := context.Cause(kctx); errors.Is(cause, errPartLost) && ctx.Err() == nil {
				return nil, &lockError{"acquire", l.name, cause}
			}
			return nil, err
		}
		k.add(g)
	}
	parts := k.stop()
	if cause := context.Cause(kctx); errors.Is(cause, errPartLost) {
		c.releaseParts(parts)
		if err := ctx.Err(); err != nil {
			return nil, &lockError{"acquire", l.name, fmt.Errorf("%w; last attempt: %w", err, cause)}
		}
		return nil, &lockError{"acquire", l.name, cause}
	}
	if err := k.refresh(ctx, parts); err != nil {
		c.releaseParts(parts)
		return nil, &lockError{"acquire", l.name, err}
	}
	grant := core.Grant{Start: parts[0].Start, Until: parts[0].Until, Attempts: parts[len(parts)-1].Attempts}
	for _, p := range parts {
		grant.Until, grant.Fence = minTime(grant.Until, p.Until), max(grant.Fence, p.Fence)
	}
	if l.lock.Fence {
		for _, p := range parts {
			if p.Fence == grant.Fence {
				continue
			}
			if err := c.cluster.Raise(ctx, p, grant.Fence); err != nil {
				c.releaseParts(parts)
				return nil, err
			}
		}
	}
	l.parts = parts
	return &core.Held{Grant: grant}, nil
}

// releaseParts lets go of parts, each on its own.
func (c *Client) releaseParts(parts []*core.Held) {
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Go(func() { _ = c.cluster.Release(context.Background(), p) })
	}
	wg.Wait()
}

// keeper extends the groups that an acquisition slot by slot holds while it waits for the
// next, as a Lease extends itself: each when a third of its validity is left, and again a
// node timeout after a failed extension, each call bounded by the group's validity. If one
// is lost (an extension finds it no longer held, or its validity runs out first), it ends
// the acquisition's context with errPartLost.
type keeper struct {
	c        *Client
	validity time.Duration // of each group's grant and extension
	retry    time.Duration // the wait after a failed extension: the node timeout
	mu       sync.Mutex
	parts    []*core.Held
	due      []time.Time   // per part: when its next extension is due
	added    chan struct{} // wakes the keeper for a part added
	quit     chan struct{}
	done     chan struct{}
}

// keep starts a keeper for an acquisition whose context is ctx (cancel ends it), of
// groups whose validity is validity, over nodes whose timeout is retry.
func (c *Client) keep(ctx context.Context, cancel context.CancelCauseFunc, validity, retry time.Duration) *keeper {
	k := &keeper{c: c, validity: validity, retry: retry, added: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(k.done)
		timer := time.NewTimer(validity)
		defer timer.Stop()
		for {
			if err := k.extendDue(ctx); err != nil {
				cancel(err)
				return
			}
			timer.Reset(time.Until(k.next()))
			select {
			case <-k.quit:
				return
			case <-ctx.Done():
				return
			case <-k.added:
			case <-timer.C:
			}
		}
	}()
	return k
}

// add gives k one more group to keep.
func (k *keeper) add(p *core.Held) {
	k.mu.Lock()
	k.parts = append(k.parts, p)
	k.due = append(k.due, p.Until.Add(-k.validity/3))
	k.mu.Unlock()
	select {
	case k.added <- struct{}{}:
	default:
	}
}

// next is when k's next extension is due, or the earliest validity ends (the run after it
// finds that part lost); a validity from now if k keeps nothing yet.
func (k *keeper) next() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	next := time.Now().Add(k.validity)
	for i, p := range k.parts {
		next = minTime(next, minTime(k.due[i], p.Until))
	}
	return next
}

// extendDue extends each part whose extension is due, and returns errPartLost if one is
// lost. After a failure that a retry may fix, the part's next extension is due a node
// timeout later.
func (k *keeper) extendDue(ctx context.Context) error {
	k.mu.Lock()
	parts, due := slices.Clone(k.parts), slices.Clone(k.due)
	k.mu.Unlock()
	for i, p := range parts {
		now := time.Now()
		switch {
		case !now.Before(p.Until):
			return errPartLost
		case now.Before(due[i]):
			continue
		}
		err := k.extend(ctx, p)
		switch {
		case ctx.Err() != nil:
			return nil // the acquisition ended: it says why
		case errors.Is(err, ErrNotHeld) || errors.Is(err, ErrExpired):
			return errPartLost
		case err != nil:
			due[i] = time.Now().Add(k.retry)
		default:
			due[i] = p.Until.Add(-k.validity / 3)
		}
		k.mu.Lock()
		k.due[i] = due[i]
		k.mu.Unlock()
	}
	return nil
}

// extend extends p once, within its validity.
func (k *keeper) extend(ctx context.Context, p *core.Held) error {
	ctx, cancel := context.WithDeadline(ctx, p.Until)
	defer cancel()
	_, err := k.c.cluster.Extend(ctx, p)
	return err
}

// refresh extends each of parts, once k stopped, that has no more than a third of its
// validity left, as k would have, so that a grant over parts is returned only with more
// than that left of every part's validity. It returns errPartLost if an extension finds a
// part no longer held, and otherwise an error matching ErrExpired (and the extension's
// error, if one failed) if a part is left with no more.
func (k *keeper) refresh(ctx context.Context, parts []*core.Held) error {
	for _, p := range parts {
		if time.Until(p.Until) > k.validity/3 {
			continue
		}
		switch err := k.extend(ctx, p); {
		case errors.Is(err, ErrNotHeld):
			return errPartLost
		case err != nil:
			return fmt.Errorf("%w: the extension of a slot's names before the grant failed: %w", ErrExpired, err)
		}
		if time.Until(p.Until) <= k.validity/3 {
			return fmt.Errorf("%w: a slot's names have a third of their validity left or less", ErrExpired)
		}
	}
	return nil
}

// stop stops k, once its extension under way (if any) returned, and returns its groups.
func (k *keeper) stop() []*core.Held {
	close(k.quit)
	<-k.done
	return k.parts
}

// extendParts extends every part of l and returns the earliest of their ends: Extend for a
// lock slot by slot. If any part is no longer held, the error matches ErrNotHeld; if some
// failed otherwise, their errors joined (the lock stays valid until its previous Until).
func (l *Lease) extendParts(ctx context.Context) (time.Time, error) {
	errs := make([]error, len(l.parts))
	var wg sync.WaitGroup
	for i, p := range l.parts {
		wg.Go(func() { _, errs[i] = l.cluster.Extend(ctx, p) })
	}
	wg.Wait()
	for _, err := range errs {
		if errors.Is(err, ErrNotHeld) {
			return time.Time{}, err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return time.Time{}, err
	}
	until := l.parts[0].Until
	for _, p := range l.parts[1:] {
		until = minTime(until, p.Until)
	}
	return until, nil
}

// releaseNodes lets go of l's lock on the nodes: of each part, for a lock slot by slot,
// and returns the errors joined. Of the parts it keeps only those whose release failed,
// for a Release called again: the names of the others may have another owner by then.
func (l *Lease) releaseNodes(ctx context.Context) error {
	if l.parts == nil {
		return l.cluster.Release(ctx, l.held)
	}
	errs := make([]error, len(l.parts))
	var wg sync.WaitGroup
	for i, p := range l.parts {
		wg.Go(func() { errs[i] = l.cluster.Release(ctx, p) })
	}
	wg.Wait()
	left := make([]*core.Held, 0, len(l.parts)) // never nil: l.held is no lock of its own
	for i, p := range l.parts {
		if errs[i] != nil {
			left = append(left, p)
		}
	}
	l.parts = left
	return errors.Join(errs...)
}

// extendNodes extends l's lock on the nodes (each part, for a lock slot by slot).
func (l *Lease) extendNodes(ctx context.Context) (time.Time, error) {
	if l.parts == nil {
		return l.cluster.Extend(ctx, l.held)
	}
	return l.extendParts(ctx)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
