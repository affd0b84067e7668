package redlock

import "github.com/go-redlock/redlock/core"

// Errors, usable with errors.Is.
var (
	// ErrHeld means another owner holds the lock.
	ErrHeld = core.ErrHeld
	// ErrNotHeld means a lease's lock is no longer held: it was released, expired, or taken.
	ErrNotHeld = core.ErrNotHeld
	// ErrNoQuorum means too few nodes answered yes; errors.As with a *QuorumError gives each
	// node's error.
	ErrNoQuorum = core.ErrNoQuorum
	// ErrExpired means a quorum said yes only after the lock's validity had run out.
	ErrExpired = core.ErrExpired
	// ErrNodeTimeout is the error of a node that did not answer within the node timeout.
	ErrNodeTimeout = core.ErrNodeTimeout
	// ErrInvalid wraps every error about bad input: an empty name, a bad TTL, no nodes...
	ErrInvalid = core.ErrInvalid
)

// QuorumError reports an operation that too few nodes confirmed, with each failed node's
// name and error. It matches ErrNoQuorum under errors.Is.
type QuorumError = core.QuorumError

// NodeError is one node's error inside a QuorumError.
type NodeError = core.NodeError

// Node is one independent Redis master as the lock sees it; backends provide them (see
// the backends directory). It is an alias of core.Node.
type Node = core.Node
