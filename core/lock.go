package core

import "time"

// Lock is a request for a lock: which keys, for how long, and how to wait for it. Core
// only reads it: one Lock may serve any number of acquisitions, one after another or at
// once. An acquisition returns a *Held, which Extend and Release take.
type Lock struct {
	Keys Keys
	TTL  time.Duration
	// NodeTimeout bounds each node's answer. A node slower than this counts as failed.
	NodeTimeout time.Duration
	// DriftFactor scales the clock-drift allowance: validity = TTL - elapsed - (TTL*DriftFactor + 2ms).
	DriftFactor float64
	// Read asks for a reader's share of the lock: readers hold it together, a writer (a Lock
	// without Read) alone. A reader's holding is its own entry on each node, with its own
	// expiry; while any reader holds the lock on a node, its lock key holds a marker that a
	// writer finds there as a holder. Any two quorums share a node, on which one script
	// decides between a writer and the readers, so a writer and a reader never both hold.
	// A writer waiting in the queue blocks the readers that come after it. A reader takes
	// no fencing token: Fence must be false.
	Read bool
	// Fence asks for a fencing token: each node advances its counter, and for N > 1, unless
	// a quorum of the granting nodes agree on the largest counter, one more round raises it
	// on a quorum before the token is returned. Without it the counter is left alone and
	// Grant.Fence is 0.
	Fence bool
	// Guard is the restart guard: a node whose server has been up for less than this
	// (rounded up to whole seconds) abstains from granting. 0 turns it off.
	Guard time.Duration
	// Contended says that others are likely to hold or wait for the lock (the owner's last
	// acquisition had to wait, say): AcquireWait's first attempt then runs the acquire
	// script, which queues the owner at once, rather than a plain SET NX (see Setter).
	Contended bool
	// Persist keeps AcquireWait trying through errors that no retry can fix (see
	// Permanent), for a caller that has no way to return them (Mutex.Lock), but not after
	// Cluster.Close; otherwise such an error ends AcquireWait at once.
	Persist bool
	// Failed, if set, is called with the error of each failed attempt of AcquireWait but
	// the last (ctx's end, or a permanent error), in AcquireWait's goroutine, before it
	// waits for the next attempt: for a caller that reports long waits.
	Failed func(err error)
	// NodeFailed, if set, is called for each call to a node about this lock that failed
	// or abstained under the restart guard (e.Err matches ErrRestarted), as the call ends:
	// in an operation that reached its quorum too, for a node that the operation did not
	// wait for (then after the operation returned), and for the requests core sends in the
	// background (releases of a failed attempt, a waiter leaving the queue). op is
	// "acquire", "extend", "release" or "raise". A call that ended because the caller's
	// context did is not reported, nor a node that an acquisition did not call (one whose
	// last call failed while an earlier call to it is still under way). It runs in the
	// goroutine that made the call, so it must be safe for concurrent use and return
	// quickly.
	NodeFailed func(op string, e NodeError)
}

// Drift is the clock-drift allowance subtracted from every validity: TTL*DriftFactor + 2ms.
func (l *Lock) Drift() time.Duration {
	return time.Duration(float64(l.TTL)*l.DriftFactor) + 2*time.Millisecond
}

// scripts returns the scripts of l's kind of holding: a reader's or a writer's.
func (l *Lock) scripts() lockScripts {
	if l.Read {
		return readerScripts
	}
	return writerScripts
}

// refresh is how often a waiter calls again to keep its place in the queue: it starts each
// attempt at most this long after the start of the one before (see acquireWait).
func (l *Lock) refresh() time.Duration { return max(50*time.Millisecond, l.NodeTimeout*5/2) }

// placeKept is how long a node keeps a waiter's place after its last call landed there: a
// refresh interval, a node timeout, and a margin of another node timeout (at least 50ms).
// A live waiter starts its attempts at most a refresh interval apart, and each call lands
// within a node timeout of being sent (a call that lands later, given up on, keeps the
// place all the same), so two of its calls land at most a refresh interval and a node
// timeout apart; the margin is for a process or server late to run them (the one longer
// gap, after the waiter first finds the lock held and subscribes, is at most three node
// timeouts and a node timeout: within it too). A waiter that stops calling (it crashed, or
// can no longer reach the node) blocks the free lock there no longer than this. A live
// waiter whose place lapsed anyway loses no turn for good: its next call queues it again
// under its ticket, in the same order; until then the lock can go to one behind it.
func (l *Lock) placeKept() time.Duration {
	return l.refresh() + l.NodeTimeout + max(l.NodeTimeout, 50*time.Millisecond)
}

// Held is a lock that a quorum granted, returned by Acquire and AcquireWait: the Grant, and
// what Extend and Release need to find the lock on the nodes. Use it through its pointer
// (go vet reports a copy). Extend and Release must not run at once on one Held.
type Held struct {
	Grant
	claim
	_ noCopy
}

// Token returns the token under which the nodes hold the lock (see the package doc, Tokens).
func (h *Held) Token() string { return h.token }

// claim is one owner's claim on a lock, as an acquisition makes it: the request, and the
// owner's token, waiter id and ticket.
type claim struct {
	Lock
	// token is the owner's random token (NewToken); AcquireWait sets one per attempt,
	// "<waiter id>.<attempt>". It follows the format rules in the package doc (Tokens).
	token string
	// waiter is the id under which the lock's waiters queue this owner, and ticket its
	// place in the queue (smaller first). AcquireWait sets both; with no waiter id (a
	// single Acquire) the owner never queues and is refused while live waiters queue.
	waiter string
	ticket int64
	// attempt is the number of AcquireWait's attempt under way (0 for Acquire): only its
	// first attempt may take the lock with a plain SET (see Setter), unless Contended.
	attempt int
	// hint is the semaphore's permit to ask for, plus one (0: any): the one that the most
	// nodes granted a failed attempt.
	hint int
	// acquiring is the acquisition that granted the lock, pending the number of its nodes
	// that had not answered when it returned, and late those nodes (a bit per node, for
	// N <= 64). Release calls each of them only once it answered, so that a straggler's
	// SET cannot land after the release and leave a key behind.
	acquiring *fanout
	pending   int
	late      uint64
	// extending are the extensions (and raises) of the lock, oldest first, whose calls to
	// some nodes had not answered when they returned (see follow): such a call may take a
	// free key (see Extend), so Release calls those nodes only once every such call to
	// them answered.
	extending []followed
	// holds are the nodes (a bit each, N <= 64) known to have held the lock for this owner:
	// they granted it, handed it over, or extended it (see Extend).
	holds uint64
	// trail is what AcquireWait's failed attempts still have under way on the nodes, which
	// its leave must follow (unused by Acquire).
	trail trail
}

// noCopy makes go vet's copylocks check report a copy of the struct that holds it.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}
