package redlock

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/go-redlock/redlock/core"
)

// Broken is what Client.Break found holding a name, and let go of.
type Broken struct {
	// Owners are the tokens of the writers that held the lock on some node: a Lease's, a
	// Mutex's, an RWMutex's writer's, an Election's leader's.
	Owners []string
	// Readers are the tokens of an RWMutex's readers that held it on some node.
	Readers []string
	// Permits are the tokens of the holders of a Semaphore's permits on some node.
	Permits []string
	// Fence is what the lock's fence counter was raised to on a quorum before its writers
	// were let go of: above each one's fencing token, so that every later holder's token is
	// above theirs. 0 if no writer held the lock.
	Fence uint64
}

// Break ends whatever holds the lock called name, for an operator whose holder is known to
// be dead and whose TTL is long (Redisson's forceUnlock): it reads the name's status (see
// Status), and for each owner found on any node it raises the lock's fence counter above
// every token the nodes hold on a quorum (writers), then releases it under its own token
// on every node, as its Release would: a writer's lock, each reader's share, each holder's
// Semaphore permits. The queue's first waiter is then woken, as after a release.
// A holder that takes the lock after the read is not touched. WithPrefix, WithNodeTimeout
// and WithTTL (how long the nodes keep a writer's lock if Break fails between raising its
// fence and releasing it) apply; other options are checked, and have no effect. Break is
// safe for concurrent use, with every other call.
//
// What it risks: a holder that is still running is not stopped, and is not told until its
// next extension fails (its Lease's Done closes then); until then it goes on as if it held
// the lock, beside the next holder. Only storage that checks fencing tokens (package fence)
// refuses its late writes, as they carry a token below every later holder's. An RWMutex's
// readers and a Semaphore's permits carry no token a store can check.
//
// Errors: those of Status, and then nothing is broken; a *QuorumError of raising a
// writer's fence (its lock is still released) or of a release; ctx's error. Every error
// names the lock.
func (c *Client) Break(ctx context.Context, name string, opts ...Option) (*Broken, error) {
	c.made("Break")
	st, s, err := c.status(ctx, "Break", name, opts)
	if err != nil {
		return nil, err
	}
	b := brokenOf(st)
	until := time.Now().Add(s.ttl)
	lock := core.Lock{Keys: core.NewKeys(s.prefix, name), TTL: s.ttl, NodeTimeout: s.nodeTimeout}
	var errs []error
	if len(b.Owners) > 0 {
		for _, n := range st.Nodes {
			b.Fence = max(b.Fence, n.Fence+1)
		}
	}
	for _, owner := range b.Owners {
		h, err := core.Claim(lock, owner, until)
		if err == nil {
			err = c.cluster.Raise(ctx, h, b.Fence)
			err = errors.Join(err, c.release(ctx, h))
		}
		errs = append(errs, err)
	}
	reader := lock
	reader.Read = true
	for _, token := range b.Readers {
		errs = append(errs, c.claimRelease(ctx, reader, token, until))
	}
	if sem := st.Semaphore; sem != nil && len(b.Permits) > 0 {
		permits := lock
		permits.Keys = core.NewSemaphoreKeys(s.prefix, name, min(max(sem.Permits, 1), MaxPermits))
		for _, token := range b.Permits {
			errs = append(errs, c.claimRelease(ctx, permits, token, until))
		}
	}
	return b, errors.Join(errs...)
}

// claimRelease releases what token holds of l (see core.Claim).
func (c *Client) claimRelease(ctx context.Context, l core.Lock, token string, until time.Time) error {
	h, err := core.Claim(l, token, until)
	if err != nil {
		return err
	}
	return c.release(ctx, h)
}

// release releases h, broken: ErrNotHeld, too few nodes that held it, means that no quorum
// has it, which is what Break wants.
func (c *Client) release(ctx context.Context, h *core.Held) error {
	if err := c.cluster.Release(ctx, h); err != nil && !errors.Is(err, ErrNotHeld) {
		return err
	}
	return nil
}

// brokenOf returns the owners that st found on any node, each once, sorted.
func brokenOf(st *Status) *Broken {
	b := &Broken{}
	for _, n := range st.Nodes {
		if n.Lock != nil && !n.Lock.Readers {
			b.Owners = append(b.Owners, n.Lock.Owner)
		}
		for _, r := range n.Readers {
			b.Readers = append(b.Readers, r.Token)
		}
		if n.Semaphore != nil {
			for _, p := range n.Semaphore.Held {
				b.Permits = append(b.Permits, p.Owner)
			}
		}
	}
	for _, tokens := range []*[]string{&b.Owners, &b.Readers, &b.Permits} {
		*tokens = slices.Compact(slices.Sorted(slices.Values(*tokens)))
	}
	return b
}
