package redlock

import (
	"context"

	"github.com/go-redlock/redlock/core"
)

// Status is what the nodes hold under one name, per node and as a quorum decides it: its
// holder (owner token, its description if any, fencing token, time left), its waiters in turn order, an RWMutex's
// readers, an Election's leader record and a Semaphore's permits. See Client.Status.
type Status = core.Status

// NodeStatus is what one node holds under a name, part of a Status.
type NodeStatus = core.NodeStatus

// NoExpiry is a time left in a Status for a key without an expiry, which is not redlock's.
const NoExpiry = core.NoExpiry

// Status reads what the nodes hold under name: the lock that a Lease, a Mutex, an RWMutex's
// writer or an Election's leader holds, with its holder's token, description (see
// WithDescription), fencing token and time left; the waiters queued for it, in turn order; an RWMutex's readers; an Election's
// leader record; and a Semaphore's number of permits (as the nodes record it), its permits
// in use and its waiters. It reads every node at once, each within the node timeout, takes
// no lock and writes nothing: it runs a read-only script (two on a node that records a
// Semaphore's number of permits). Status.Nodes has each node's state, in the order of New's
// nodes; Holder, Readers, Leader and Semaphore are what a quorum of them agree on, which is
// what holds. WithPrefix and WithNodeTimeout apply; other options are checked, and have no
// effect. Status is safe for concurrent use, with every other call.
//
// Errors: ErrInvalid for a bad name or option, or two nodes that report one server (then
// the Status is nil); ErrClosed after Close; a *QuorumError (ErrNoQuorum) if fewer than a
// quorum of the nodes answered, or ctx's error if ctx ended first, returned with the
// Status: its Known is false, and what a quorum holds is unknown, not absent. A node that
// failed has its error in its NodeStatus; one whose ACL refuses the status script a command
// or key matches ErrInvalid and names it. Every error names the lock.
func (c *Client) Status(ctx context.Context, name string, opts ...Option) (*Status, error) {
	c.made("Status")
	st, _, err := c.status(ctx, "Status", name, opts)
	return st, err
}

// status is Status for the call named call; it also returns the call's settings.
func (c *Client) status(ctx context.Context, call, name string, opts []Option) (*Status, settings, error) {
	if err := checkName(name); err != nil {
		return nil, settings{}, &lockError{call, name, err}
	}
	s, err := c.opts.forCall(call, optRetry|optLogger|optErrorHandler, opts)
	if err != nil {
		return nil, s, &lockError{call, name, err}
	}
	select {
	case <-c.closed:
		return nil, s, &lockError{call, name, ErrClosed}
	default:
	}
	st, err := c.cluster.Status(ctx, s.prefix, name, s.nodeTimeout)
	return st, s, err
}
