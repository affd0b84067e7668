package redlock

import (
	"errors"
	"strings"

	"github.com/go-redlock/redlock/core"
)

// Errors, usable with errors.Is.
var (
	// ErrHeld means another owner holds the lock.
	ErrHeld = core.ErrHeld
	// ErrNotHeld means a lease's lock is no longer held: it was released, expired, or taken.
	ErrNotHeld = core.ErrNotHeld
	// ErrNoQuorum means too few nodes answered yes; errors.As with a *QuorumError gives each
	// node's error.
	ErrNoQuorum = core.ErrNoQuorum
	// ErrExpired means the lock's validity ran out: a quorum said yes only after it had, or a
	// held Lease was not extended in time (Lease.Err).
	ErrExpired = core.ErrExpired
	// ErrNodeTimeout is the error of a node that did not answer within the node timeout.
	ErrNodeTimeout = core.ErrNodeTimeout
	// ErrRestarted is a node's error, inside a QuorumError, when it abstains under the restart
	// guard (see WithRestartGuard).
	ErrRestarted = core.ErrRestarted
	// ErrReleased is Lease.Err after Release.
	ErrReleased = errors.New("redlock: lease released")
	// ErrLost is Lease.Err when the nodes no longer held the lock for the lease: its keys
	// expired or were deleted, or another owner has it.
	ErrLost = errors.New("redlock: lease lost")
	// ErrMaxHold is Lease.Err when the lease reached its maximum hold time (WithMaxHold).
	ErrMaxHold = errors.New("redlock: lease reached its maximum hold time")
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

// notHeld is ErrNotHeld for a lease that ended, with the reason it ended: it matches both.
type notHeld struct{ reason error }

func (e notHeld) Error() string {
	return "redlock: lock is not held: " + strings.TrimPrefix(e.reason.Error(), "redlock: ")
}

func (e notHeld) Is(target error) bool { return target == ErrNotHeld }

func (e notHeld) Unwrap() error { return e.reason }
