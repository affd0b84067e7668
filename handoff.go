package redlock

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-redlock/redlock/core"
)

// ErrHandedOff is Lease.Err after HandOff: the lock went on, held, to whoever takes up the
// handle.
var ErrHandedOff = errors.New("redlock: lease handed off")

// handlePrefix starts every handle, and names its version.
const handlePrefix = "redlock.v1."

// handle is what a handle holds: the lock's names and key prefix, and the holder's token
// on the nodes and fencing token.
type handle struct {
	Names  []string `json:"n"`
	Set    bool     `json:"s,omitempty"` // a lock over several names
	Prefix string   `json:"p"`
	Token  string   `json:"t"`
	Fence  uint64   `json:"f,omitempty"`
}

// HandOff ends l in this process without releasing its lock, and returns a handle: text
// that names the lock and holds its owner's token (with its description, if any: see
// WithDescription) and its fencing token. The handle is the
// ownership: whoever passes it to Client.TakeOver, in any process whose Client uses the same
// nodes, holds the lock from then on under the same token, and extends and releases it; keep
// it as secret as the lock matters. Until the handle is taken up nobody extends the lock,
// so take it up within the lease's validity (Until); a handle never taken up lets the lock
// expire by its TTL. After HandOff, l's Done is closed, Err is ErrHandedOff, and Extend and
// Release reach no node. A lease of a Semaphore or an Election, or one over names in
// several Redis Cluster slots, cannot be handed off.
//
// Errors: one that matches ErrNotHeld (and the reason) if l had ended; one that matches
// ErrInvalid for a lease that cannot be handed off.
func (l *Lease) HandOff() (string, error) {
	if l.cluster == nil {
		return "", ErrNotHeld
	}
	l.op.lock()
	defer l.op.unlock()
	if !l.movable || l.groups != nil {
		return "", &lockError{"HandOff", l.name, fmt.Errorf("%w: only a lease of Acquire, TryAcquire or their All forms, in one slot, can be handed off", ErrInvalid)}
	}
	l.mu.Lock()
	l.expireIfDue()
	if l.err != nil {
		defer l.mu.Unlock()
		return "", l.notHeld(l.err)
	}
	h := handle{Prefix: l.opts.prefix, Token: l.held.Token(), Fence: l.held.Fence, Set: l.lock.Keys.Set != nil}
	h.Names = []string{l.lock.Keys.Name}
	for i, k := range l.lock.Keys.Set {
		if i == 0 {
			h.Names = h.Names[:0]
		}
		h.Names = append(h.Names, k.Name)
	}
	l.released = true // no Release reaches the nodes: the lock is the handle's now
	l.end(ErrHandedOff)
	l.mu.Unlock()
	l.leave()
	b, err := json.Marshal(h)
	if err != nil { // strings and a number: it cannot fail
		return "", &lockError{"HandOff", l.name, err}
	}
	return handlePrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// TakeOver takes up a lock handed off by Lease.HandOff, in this or another process, and
// returns its Lease: the same lock, token and fencing token, extended at once by this call
// (its validity, Until, is measured from this call's start, as an Extend's is). Options are
// as for Acquire (TTL, auto-extension, maximum hold time, counted from this call...), but
// WithDescription, which is refused: the token, and with it the holder's description, is
// the handle's, as is the key prefix. The Client must use the nodes the lock was taken on. The
// lease does not take the name's place in this Client's local queue: other goroutines of
// the Client wait for it on the nodes, as another process's would.
//
// Errors: one that matches ErrInvalid for a text that is not a handle, or a bad option; one
// that matches ErrNotHeld if the nodes no longer hold the lock under the handle's token (it
// expired, was released or was taken up already and released); a *QuorumError if too few
// nodes answered (the handle stays good: call again while the lock's validity lasts); ctx's
// error; ErrClosed after Close. Every error names the lock.
func (c *Client) TakeOver(ctx context.Context, text string, opts ...Option) (*Lease, error) {
	c.made("TakeOver")
	h, err := parseHandle(text)
	if err != nil {
		return nil, &lockError{"TakeOver", "(handle)", err}
	}
	t := one(h.Names[0])
	if h.Set {
		t = all(h.Names)
	}
	l, err := c.newLease("TakeOver", t, optRetry|optLogger|optErrorHandler|optDescription, append(slices.Clip(opts), WithPrefix(h.Prefix)))
	if err != nil {
		return nil, err
	}
	if l.groups != nil {
		return nil, &lockError{"TakeOver", t.name, fmt.Errorf("%w: this Client sees the names in several Redis Cluster slots, which a handle never spans: use the nodes the lock was taken on", ErrInvalid)}
	}
	defer c.end(c.begin())
	held, err := core.Resume(l.lock, h.Token, h.Fence)
	if err != nil {
		return nil, &lockError{"TakeOver", t.name, err}
	}
	a := observeAcquire(ctx, &l.opts, l.name, l.kind, false)
	if _, err = c.cluster.Extend(ctx, held); err != nil {
		a.once(l, nil, err)
		return nil, err
	}
	a.once(l, held, nil)
	if err := l.start(held); err != nil {
		return nil, err
	}
	return l, nil
}

// parseHandle reads a handle made by HandOff.
func parseHandle(text string) (handle, error) {
	var h handle
	rest, ok := strings.CutPrefix(strings.TrimSpace(text), handlePrefix)
	if !ok {
		return h, fmt.Errorf("%w: not a lease's handle (it starts with %q)", ErrInvalid, handlePrefix)
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err == nil {
		err = json.Unmarshal(b, &h)
	}
	switch {
	case err != nil:
		return h, fmt.Errorf("%w: a damaged handle: %v", ErrInvalid, err)
	case len(h.Names) == 0 || h.Token == "" || !h.Set && len(h.Names) != 1:
		return h, fmt.Errorf("%w: a damaged handle: no lock or no token", ErrInvalid)
	}
	return h, nil
}
