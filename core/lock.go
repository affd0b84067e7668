package core

import (
	"strconv"
	"time"
)

// Lock is a request for a lock: which keys, for how long, and how to wait for it. Core only
// reads it: one Lock may serve any number of acquisitions, at once too.
type Lock struct {
	Keys Keys
	TTL  time.Duration
	// NodeTimeout bounds each node's answer. A node slower than this counts as failed.
	NodeTimeout time.Duration
	// DriftFactor scales the clock-drift allowance: validity = TTL - elapsed - (TTL*DriftFactor + 2ms).
	DriftFactor float64
	// Read asks for a reader's share of the lock: readers hold it together, a writer (a Lock
	// without Read) alone (see the package doc, Readers). Fence must be false.
	Read bool
	// Fence asks for a fencing token (Grant.Fence): each node advances its counter, and for
	// N > 1 the token stands on a quorum before it is returned, which may take one more round.
	// Without it the counter is left alone and Grant.Fence is 0.
	Fence bool
	// Guard is the restart guard: a node whose server has been up for less than this
	// (rounded up to whole seconds) abstains from granting. 0 turns it off.
	Guard time.Duration
	// Description, if not "", describes the holder (its host, process id or job) to
	// whoever reads the nodes, as Cluster.Status does: every token of the holding starts
	// with "<Description>@" (see the package doc, Tokens). It costs no call and no key: each
	// call carries len(Description)+1 more bytes in its token, and a waiter's calls as many
	// again in its waiter id. CheckDescription says what it may hold; Acquire and
	// AcquireWait refuse another with an error that matches ErrInvalid.
	Description string
	// Persist keeps AcquireWait trying through errors that no retry can fix (see Permanent),
	// but not after Cluster.Close; otherwise such an error ends AcquireWait at once.
	Persist bool
	// Failed, if set, is called with the error of each failed attempt of AcquireWait but
	// the last, in AcquireWait's goroutine, before it waits for the next attempt.
	Failed func(err error)
	// NodeFailed, if set, is called for each call to a node about this lock that failed or
	// abstained under the restart guard (e.Err matches ErrRestarted), as the call ends:
	// also where the operation reached its quorum or had returned, and for calls core makes
	// in the background. op is "acquire", "extend", "release" or "raise". A call ended by
	// the caller's context is not reported, nor a suspect an acquisition did not call. It
	// runs in the goroutine that made the call: it must be safe for concurrent use and
	// return quickly.
	NodeFailed func(op string, e NodeError)
}

// Drift is the clock-drift allowance subtracted from every validity: TTL*DriftFactor + 2ms.
func (l *Lock) Drift() time.Duration {
	return time.Duration(float64(l.TTL)*l.DriftFactor) + 2*time.Millisecond
}

// checkDescription returns CheckDescription's error for l's Description, naming the lock.
func (l *Lock) checkDescription() error {
	if l.Description == "" {
		return nil
	}
	if err := CheckDescription(l.Description); err != nil {
		return opError("acquire", l.Keys.named(), err)
	}
	return nil
}

// mode returns the scripts' argument for l's kind of holding: "w" a writer's lock, "r" a
// reader's share, or a semaphore's number of permits.
func (l *Lock) mode() string {
	switch {
	case l.Keys.Permits != nil:
		return strconv.Itoa(len(l.Keys.Permits))
	case l.Read:
		return "r"
	}
	return "w"
}

// extendMode returns the extend script's mode for l: "w" a writer's lock, "r" a reader's
// share, "p" a semaphore's permit.
func (l *Lock) extendMode() string {
	switch {
	case l.Keys.Permits != nil:
		return "p"
	case l.Read:
		return "r"
	}
	return "w"
}

// refresh is the longest a waiter goes between the starts of two attempts.
func (l *Lock) refresh() time.Duration { return max(50*time.Millisecond, l.NodeTimeout*5/2) }

// placeKept is how long a node keeps a waiter's place after its last call landed there: a
// refresh interval and a node timeout, with another node timeout (at least 50ms) as margin
// (see docs/design.md, How long a place lasts).
func (l *Lock) placeKept() time.Duration {
	return l.refresh() + l.NodeTimeout + max(l.NodeTimeout, 50*time.Millisecond)
}

// Held is a lock that a quorum granted, returned by Acquire and AcquireWait. Use it through
// its pointer (go vet reports a copy). Extend and Release must not run at once on one Held.
type Held struct {
	Grant
	claim
	_ noCopy
}

// Token returns the token under which the nodes hold the lock (see the package doc, Tokens).
func (h *Held) Token() string { return h.token }

// claim is one owner's claim on a lock, as an acquisition makes it.
type claim struct {
	Lock
	token   string // see the package doc, Tokens
	waiter  string // the waiter's id; "" for Acquire, which never queues
	ticket  int64  // the waiter's place in the queue (smaller first)
	attempt int    // AcquireWait's attempt under way, from 1; 0 for Acquire
	hint    int    // a semaphore's permit to ask for, plus one (0: any)
	// acquiring is the acquisition that granted the lock, pending the number of its nodes
	// that had not answered, and late those nodes (N <= 64): Release follows them.
	acquiring *fanout
	pending   int
	late      uint64
	extending []followed // the extensions and raises with calls not answered (see follow)
	holds     uint64     // the nodes known to have held the lock for this owner (N <= 64)
	trail     trail      // AcquireWait's calls still under way, which its leave follows
}

// noCopy makes go vet's copylocks check report a copy of the struct that holds it.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}
