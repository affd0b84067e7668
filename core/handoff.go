package core

import (
	"fmt"
	"strings"
	"time"
)

// Resume returns the Held of a lock that the nodes hold under token, for a holder that takes
// it up from another (a hand-off): l's keys, fence as its token, Start now, and no validity
// (Until is zero) until Extend measures one from its own start. Such a Held counts only the
// nodes that still hold the lock under token: its Extend takes no free key (it cannot tell
// whether a node held it), so a lock that expired in transit is found not held rather than
// taken again. Errors: one that matches ErrInvalid for an empty token or one with a space
// (see the package doc, Tokens), a reader's share or a semaphore's permit (their holdings
// are not recorded under one key).
func Resume(l Lock, token string, fence uint64) (*Held, error) {
	switch {
	case token == "" || strings.ContainsAny(token, " \n"):
		return nil, opError("resume", l.Keys.named(), fmt.Errorf("%w: bad token %q", ErrInvalid, token))
	case l.Read || l.Keys.Permits != nil:
		return nil, opError("resume", l.Keys.named(), fmt.Errorf("%w: a reader's share or a semaphore's permit cannot be taken up", ErrInvalid))
	}
	h := &Held{Grant: Grant{Start: time.Now(), Fence: fence, Attempts: 1}}
	h.claim = claim{Lock: l, token: token, holds: ^uint64(0)}
	return h, nil
}

// Claim returns the Held of the holding that token has of l on the nodes, for a caller that
// ends another owner's holding (breaks it): as Resume's, but valid until until, its waiter
// (if token is a waiter's, "<waiter id>.<attempt>") leaving the queue as it is released, and
// also for a reader's share (l.Read) or a semaphore's permits (l.Keys.Permits: Release lets
// go of every permit that token holds, on each node). Raise (a writer's only) and Release
// it; its Fence is 0. Errors: one that matches ErrInvalid for an empty token or one with a
// space.
func Claim(l Lock, token string, until time.Time) (*Held, error) {
	if token == "" || strings.ContainsAny(token, " \n") {
		return nil, opError("claim", l.Keys.named(), fmt.Errorf("%w: bad token %q", ErrInvalid, token))
	}
	h := &Held{Grant: Grant{Start: time.Now(), Until: until, Attempts: 1}}
	h.claim = claim{Lock: l, token: token, holds: ^uint64(0)}
	if l.Keys.Permits != nil { // no permit is known held: the release looks at each
		h.holds = 0
	}
	if id, ok := WaiterID(token); ok {
		h.waiter = id
	}
	return h, nil
}
