package core

import "context"

// AcquireAs is Acquire under a token, waiter id and ticket of the test's choosing (a
// waiter's attempt, say), for tests of the scripts' rules. It returns the Held even when
// the acquisition failed, for a later release in that name.
func (c *Cluster) AcquireAs(ctx context.Context, l *Lock, token, waiter string, ticket int64) (*Held, error) {
	h := HeldAs(l, token, waiter, ticket)
	g, _, err := c.acquire(ctx, &h.claim)
	h.Grant = g
	return h, err
}

// HeldAs returns l held under token by waiter with ticket, for a release in that name.
func HeldAs(l *Lock, token, waiter string, ticket int64) *Held {
	return &Held{claim: claim{Lock: *l, token: token, waiter: waiter, ticket: ticket}}
}

// claimOf returns a claim of l under a new token, for tests of core's internals.
func claimOf(l *Lock) *claim { return &claim{Lock: *l, token: NewToken()} }

// Quorum returns the number of yes-votes an operation needs: N/2+1.
func (c *Cluster) Quorum() int { return c.quorum }
