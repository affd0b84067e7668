package core

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors, usable with errors.Is. The root package re-exports them.
var (
	// ErrHeld means another owner holds the lock on enough nodes that no quorum is possible.
	ErrHeld = errors.New("redlock: lock is held by another owner")
	// ErrNotHeld means the lock is no longer ours: it expired, was released, or was taken.
	ErrNotHeld = errors.New("redlock: lock is not held")
	// ErrNoQuorum means too few nodes answered yes for a quorum; a *QuorumError carries
	// each node's error.
	ErrNoQuorum = errors.New("redlock: no quorum")
	// ErrExpired means the lock's validity ran out: before a quorum granted it, or while it
	// was held.
	ErrExpired = errors.New("redlock: lock validity ran out")
	// ErrRestarted is a node's error when it abstains under the restart guard: its server
	// started less than the guard ago and may have forgotten locks it granted before.
	ErrRestarted = errors.New("redlock: node restarted recently and abstains (restart guard)")
	// ErrNodeTimeout is a node's error when it did not answer within the per-node timeout.
	ErrNodeTimeout = errors.New("redlock: node timed out")
	// ErrInvalid wraps every error about bad input: no nodes, a nil node, a bad option...
	ErrInvalid = errors.New("redlock: invalid argument")
	// ErrClosed means the lock's client was closed (see Cluster.Close), or a node's driver
	// client was: a backend returns an error that matches it from a closed client.
	ErrClosed = errors.New("redlock: client is closed")
)

// Permanent reports whether err is one that no retry can fix: bad input or configuration
// (ErrInvalid), a closed client (ErrClosed), or a *QuorumError in which so many nodes
// failed for good that no quorum is possible. A node fails for good with ErrInvalid,
// ErrClosed, or a server error that no retry changes: CROSSSLOT (keys in different
// slots), NOPERM, NOAUTH, WRONGPASS or "unauthenticated" (access), WRONGTYPE, a script that
// fails to compile or run, or an unknown command; and, which a Cluster gives as ErrInvalid
// saying what to change, MOVED from a Node that is not a cluster client, and a command, key
// or channel that the server's ACL refuses a script. Timeouts, refused
// connections, LOADING, BUSY, READONLY, TRYAGAIN, CLUSTERDOWN, a cluster client's MOVED and
// the like may pass, and are not permanent.
func Permanent(err error) bool {
	if err == nil {
		return false
	}
	var q *QuorumError
	if errors.As(err, &q) {
		failed := 0
		for _, ne := range q.Errs {
			if permanentNode(ne.Err) {
				failed++
			}
		}
		return failed > q.Nodes-q.Quorum
	}
	return permanentNode(err)
}

// noUptime starts the acquire script's error where the restart guard is asked for and the
// server refuses to report its uptime (see acquire.lua).
const noUptime = "NOUPTIME "

// explained returns a node's error err, made clear where its reply says why, as an error
// that matches ErrInvalid with the server's reply and the way out: a server that refuses
// the restart guard its uptime, one that asks for a password the driver client did not
// give, and a Redis Cluster node reached by a plain client (cluster false: the Node is not
// a cluster client), which answers MOVED for the slots it does not serve.
//
// A server whose ACL refuses the script s (nil: none) a command, key or channel gives an
// error that matches ErrInvalid naming what it refuses: Valkey's and Redis 7.2's replies
// name the command; for Redis 7.0's, which do not, it is read from the line of s that the
// reply names.
func explained(err error, cluster bool, s *Script) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if refused := aclRefused(msg, s); refused != "" && !strings.HasPrefix(msg, noUptime) {
		return fmt.Errorf("%w: the server's ACL refuses this user %s, which the %s script needs (%v): grant it "+
			"(the README's Restricted servers lists what each feature needs)", ErrInvalid, refused, s.Name(), err)
	}
	switch {
	case strings.HasPrefix(msg, "NOAUTH") || strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, unauthenticated):
		return fmt.Errorf("%w: the server asks for authentication (requirepass or an ACL user) and the driver client "+
			"gave no password or a wrong one: set the password (and user) in its options (%v)", ErrInvalid, err)
	case !cluster && strings.HasPrefix(msg, "MOVED "):
		return fmt.Errorf("%w: the node is a Redis Cluster node reached by a plain client (%v): "+
			"give the whole cluster as one Node, over a cluster client", ErrInvalid, err)
	}
	if why, ok := strings.CutPrefix(msg, noUptime); ok {
		return fmt.Errorf("%w: the restart guard needs the server's uptime from INFO, which the server refuses (%s): "+
			"grant INFO (ACL SETUSER <user> +info), or turn the guard off with WithRestartGuard(0) (Lock.Guard 0), "+
			"which lets a second owner in while the first holds after a server restarts without its data", ErrInvalid, why)
	}
	return err
}

// aclRefused returns what a server's reply msg to the script s says that its ACL refuses the
// script ("the command TIME", say), or "" if it says no such thing.
func aclRefused(msg string, s *Script) string {
	switch {
	case s == nil || !strings.HasPrefix(msg, "NOPERM") && !strings.Contains(msg, "The user executing the script can't") &&
		!strings.Contains(msg, "ACL failure in script"):
		return ""
	case strings.Contains(msg, "channel"):
		return "the channel it publishes on (&<prefix>*)"
	case strings.Contains(msg, "key"):
		return "keys under the prefix (~<prefix>*)"
	}
	if m := namedCommand.FindStringSubmatch(msg); m != nil {
		return "the command " + strings.ToUpper(m[1])
	}
	if m := scriptLine.FindStringSubmatch(msg); m != nil {
		if n, _ := strconv.Atoi(m[1]); n >= 1 {
			if lines := strings.Split(s.Source(), "\n"); n <= len(lines) {
				return commandsOn(lines[n-1])
			}
		}
	}
	return "a command"
}

// commandsOn names the commands that a line of a script calls: "the command GET", or "one
// of the commands EXISTS, SET" where it calls several.
func commandsOn(line string) string {
	var names []string
	for _, c := range calledCommand.FindAllStringSubmatch(line, -1) {
		name := c[1]
		if name == "" {
			name = "PUBLISH (SPUBLISH on a Redis Cluster)"
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	switch len(names) {
	case 0:
		return "a command"
	case 1:
		return "the command " + names[0]
	}
	return "one of the commands " + strings.Join(names, ", ")
}

var (
	namedCommand  = regexp.MustCompile(`permissions to run the '([^']+)' command`)
	scriptLine    = regexp.MustCompile(`@user_script:(\d+)`)
	calledCommand = regexp.MustCompile(`redis\.p?call\((?:'([A-Z]+)'|publish)`)
)

// unauthenticated starts a server's reply to a command too long for a client that has not
// logged in (a server with requirepass closes the connection with it).
const unauthenticated = "ERR Protocol error: unauthenticated"

// permanentReplies are the starts of server error replies that no retry changes.
var permanentReplies = []string{
	"CROSSSLOT", "NOPERM", "NOAUTH", "WRONGPASS", "WRONGTYPE",
	"ERR Error running script", "ERR Error compiling script", "ERR user_script",
	"ERR unknown command", "ERR wrong number of arguments", unauthenticated,
}

// permanentNode reports whether one node's error is one that no retry can fix.
func permanentNode(err error) bool {
	if errors.Is(err, ErrInvalid) || errors.Is(err, ErrClosed) {
		return true
	}
	if errors.Is(err, ErrNodeTimeout) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	msg := err.Error()
	for _, p := range permanentReplies {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// NodeError is the error one node gave.
type NodeError struct {
	Node string // the node's String()
	Err  error
}

// Error returns "<node>: <its error>".
func (e NodeError) Error() string { return e.Node + ": " + e.Err.Error() }

// Unwrap returns the node's error.
func (e NodeError) Unwrap() error { return e.Err }

// QuorumError reports an operation that too few nodes confirmed, with each failed node's
// error. errors.Is(err, ErrNoQuorum) is true for it, and errors.Is also looks into the
// node errors (errors.Is(err, ErrNodeTimeout), say). Nodes that answered "not ours" are
// counted in Refused, not listed in Errs, so a QuorumError never matches ErrHeld.
type QuorumError struct {
	Op      string      // "acquire", "extend", "release", "raise", "proclaim" or "leader"
	Key     string      // the lock's name (Keys.Name), or its lock key if it has none
	Quorum  int         // the yes-votes needed
	Nodes   int         // the number of nodes
	OK      int         // the yes-votes received
	Refused int         // the nodes that answered no
	Errs    []NodeError // the nodes that failed, in the order they failed
	Yes     []string    // the nodes that said yes (of the first 64), in their order
	No      []string    // the nodes that said no (of the first 64), in their order
	Unheard []string    // the nodes not heard when the outcome was decided (of the first 64)
}

// Error says the operation, the lock, the votes and the quorum, then each node's outcome.
func (e *QuorumError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "redlock: %s %q: no quorum: %d of %d nodes said yes, %d needed", e.Op, e.Key, e.OK, e.Nodes, e.Quorum)
	if e.Refused > 0 {
		fmt.Fprintf(&b, ", %d said no", e.Refused)
	}
	for _, n := range e.Yes {
		fmt.Fprintf(&b, "; %s: yes", n)
	}
	for _, n := range e.No {
		fmt.Fprintf(&b, "; %s: no", n)
	}
	for _, n := range e.Unheard {
		fmt.Fprintf(&b, "; %s: not heard before the outcome was decided", n)
	}
	for _, ne := range e.Errs {
		b.WriteString("; ")
		b.WriteString(ne.Error())
	}
	return b.String()
}

// Is reports whether target is ErrNoQuorum.
func (e *QuorumError) Is(target error) bool { return target == ErrNoQuorum }

// Unwrap returns the node errors.
func (e *QuorumError) Unwrap() []error {
	errs := make([]error, len(e.Errs))
	for i, ne := range e.Errs {
		errs[i] = ne
	}
	return errs
}

// heldError is ErrHeld with the longest time the nodes said the holder can keep the lock
// (0 if none said).
type heldError struct {
	key  string
	wait time.Duration
}

func (e *heldError) Error() string {
	if e.wait <= 0 {
		return fmt.Sprintf("redlock: lock %q is held by another owner", e.key)
	}
	return fmt.Sprintf("redlock: lock %q is held by another owner (for at most %v)", e.key, e.wait)
}

func (e *heldError) Is(target error) bool { return target == ErrHeld }

// timeoutError is ErrNodeTimeout, with the driver's error if it says more than that the
// deadline passed. It does not wrap context.DeadlineExceeded: the caller's context is live.
func timeoutError(timeout time.Duration, err error) error {
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w after %v", ErrNodeTimeout, timeout)
	}
	return fmt.Errorf("%w after %v (%v)", ErrNodeTimeout, timeout, err)
}

func opError(op, key string, err error) error { return &keyError{op, key, err} }

// keyError is err, from op on the lock named key.
type keyError struct {
	op, key string
	err     error
}

func (e *keyError) Error() string {
	return fmt.Sprintf("redlock: %s %q: %s", e.op, e.key, strings.TrimPrefix(e.err.Error(), "redlock: "))
}

func (e *keyError) Unwrap() error { return e.err }

// ctxError wraps ctx's error for op on key, or returns nil if ctx is live.
func ctxError(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return opError(op, key, err)
	}
	return nil
}
