package redlock

import (
	"errors"
	"fmt"
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
	// ErrInvalid wraps every error about bad input: an empty or too long name, a bad TTL, no
	// nodes, a node given twice, an option where it does not apply...
	ErrInvalid = core.ErrInvalid
	// ErrClosed means the Client was closed (Client.Close), or a node's driver client was.
	ErrClosed = core.ErrClosed
)

// QuorumError reports an operation that too few nodes confirmed, with each failed node's
// name and error. It matches ErrNoQuorum under errors.Is.
type QuorumError = core.QuorumError

// NodeError is one node's error inside a QuorumError.
type NodeError = core.NodeError

// Node is one independent Redis master as the lock sees it; backends provide them (see
// the backends directory). It is an alias of core.Node.
type Node = core.Node

// notHeld is ErrNotHeld for the lock called name, with the reason it ended: it matches both.
type notHeld struct {
	name   string
	reason error
}

func (e notHeld) Error() string {
	return fmt.Sprintf("redlock: lock %s is not held: %s", quoted(e.name), strings.TrimPrefix(e.reason.Error(), "redlock: "))
}

func (e notHeld) Is(target error) bool { return target == ErrNotHeld }

func (e notHeld) Unwrap() error { return e.reason }

// lockError is err, from op on the lock called name, for errors that do not name it.
type lockError struct {
	op, name string
	err      error
}

func (e *lockError) Error() string {
	return fmt.Sprintf("redlock: %s %s: %s", e.op, quoted(e.name), strings.TrimPrefix(e.err.Error(), "redlock: "))
}

// quoted returns name quoted for an error message, cut short past 64 bytes.
func quoted(name string) string {
	const most = 64
	if len(name) > most {
		return fmt.Sprintf("%q... (%d bytes)", name[:most], len(name))
	}
	return fmt.Sprintf("%q", name)
}

func (e *lockError) Unwrap() error { return e.err }

// errHeldHere is ErrHeld for a lock that another goroutine of the same Client holds or
// waits for.
var errHeldHere = fmt.Errorf("%w (a goroutine of this Client holds or waits for it)", ErrHeld)
