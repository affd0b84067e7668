package redlock

import (
	"context"
	"fmt"

	"github.com/go-redlock/redlock/core"
)

// A lock over several names at once (AcquireAll, TryAcquireAll, DoAll, NewMutexAll) holds
// every one of its names, as a lock of that name alone would hold it, on a quorum of nodes,
// within one validity; or none of them. Its holder is an owner of each name like any other:
// a Mutex, an RWMutex (readers and writer), a Lease of one of its names, and other sets
// that share a name with it, all exclude it. See AcquireAll.

// target is what a call locks: the lock called name, or one lock over every one of names
// at once.
type target struct {
	// name is how errors and events name the lock: the name as given, or for a set the
	// names as given, as fmt.Sprint prints them ("[from to]").
	name  string
	names []string // a set's names as given (duplicates too); nil for one name
	set   bool     // a lock over several names (names may then be empty: an error)
}

// one is the lock called name.
func one(name string) target { return target{name: name} }

// all is the lock over every one of names at once.
func all(names []string) target { return target{name: fmt.Sprint(names), names: names, set: true} }

// check returns an error that matches ErrInvalid if t names no lock: a bad name, or a set
// with no names or a bad one.
func (t target) check() error {
	if !t.set {
		return checkName(t.name)
	}
	if len(t.names) == 0 {
		return fmt.Errorf("%w: no lock names", ErrInvalid)
	}
	for i, name := range t.names {
		if err := checkName(name); err != nil {
			return fmt.Errorf("%w (names[%d])", err, i)
		}
	}
	return nil
}

// keys returns t's keys under prefix; a set's, named as t names it. t need not be valid:
// a set with no names gets a Keys that names it and locks nothing (its calls fail first).
func (t target) keys(prefix string) core.Keys {
	if !t.set {
		return core.NewKeys(prefix, t.name)
	}
	k, err := core.NewSetKeys(prefix, t.names)
	if err != nil { // no names: check reports it
		return core.Keys{Name: t.name}
	}
	k.Name = t.name // core names the set by its sorted names: errors name it as given
	return k
}

// AcquireAll takes one lock over every one of names at once, waiting while another owner
// holds any of them and retrying through node failures, until it succeeds or ctx ends; it
// returns the Lease. Options are those of Acquire, with the Client's settings as defaults
// (the Lease does not extend itself unless WithAutoExtend(true)). It is all or nothing: the Lease holds every name on a quorum of
// nodes, within one validity, and an attempt that cannot take every name frees at once
// what it took. A name given twice counts once. The lock's name, in the Lease and in
// errors, is the names as given, as fmt.Sprint prints them ("[from to]").
//
// Each name is held as a lock of that name alone would be (the same keys), so every other
// owner of any of the names excludes the Lease and is excluded by it: a Mutex, an RWMutex's
// writer or readers, a Lease of one of them, and other sets that
// share a name. The waiter queues in every name's queue as one waiter, in the order it
// started waiting, so a waiter for {a, b} and one for {b, a} never block each other for
// good, and holders of one of its names that started waiting after it do not go before it.
// Holding one lock while waiting for
// another can still deadlock, as with any two mutexes: take every name you need in one
// call instead.
//
// The Lease's Token is larger than every token any of the names had, and each name's next
// token is larger than it. Extend, auto-extension (WithAutoExtend), Done and Err work as
// for one name: the loss of any name (its keys gone from the nodes, say) is the loss of
// the Lease, with ErrLost. Release lets go of every name.
//
// Unlike Acquire, AcquireAll does not queue in the Client's local queue: each call waits
// in Redis as its own waiter, and goroutines of one Client take turns there as processes
// do; Redis sees every holder and waiter of each name and decides.
//
// On Redis Cluster one script can only take names whose keys share a slot (all of them do
// under a WithPrefix with a hash tag, "app{locks}:"). Where a node is a cluster client
// (core.ShardedPubSub) and the names fall in several slots, AcquireAll takes them slot by
// slot, in slot order, the names of each slot at once, as a lock over those names: it
// keeps the slots it holds extended while it waits for the next (as WithAutoExtend would:
// a failed extension is tried again a node timeout later), and lets go of them all if it
// cannot have one, or if a held slot is lost or its validity runs out meanwhile (then it
// starts again, if it waits). It returns only with more than a third of every slot's
// validity left, extending first a slot that has less. The Lease then holds every name,
// its token is raised on every name to the largest of the slots' tokens, and it is lost if
// any slot's names are. Waiting
// stays deadlock-free (every such lock takes the slots in one order), but the lock holds
// its first slots' names while it waits for the others, which the waiters for those names
// wait for meanwhile, and it is fair slot by slot only.
//
// Errors: those of Acquire; ErrInvalid for no names (nil or empty), a bad name, or a bad
// option. Every error names the lock as given.
// AcquireAll is safe for concurrent use.
func (c *Client) AcquireAll(ctx context.Context, names []string, opts ...Option) (*Lease, error) {
	c.made("AcquireAll")
	l, err := c.newLease("AcquireAll", all(names), optErrorHandler, opts)
	if err != nil {
		return nil, err
	}
	return c.acquireLease(ctx, l, true)
}

// TryAcquireAll makes one attempt to take one lock over every one of names at once (see
// AcquireAll), and returns its Lease. If any name is held, or waited for, it takes none of
// them. Options are those of TryAcquire (WithRetry and WithLogger are refused).
//
// Errors: those of TryAcquire (ErrHeld if another owner holds any of the names, or waiters
// are queued for one, including another goroutine of this Client: Redis, not a local
// queue, finds it); ErrInvalid for no names, a bad name, or a bad option. Every error
// names the lock as given. TryAcquireAll is safe for concurrent use.
func (c *Client) TryAcquireAll(ctx context.Context, names []string, opts ...Option) (*Lease, error) {
	c.made("TryAcquireAll")
	l, err := c.newLease("TryAcquireAll", all(names), optRetry|optLogger|optErrorHandler, opts)
	if err != nil {
		return nil, err
	}
	return c.acquireLease(ctx, l, false)
}

// DoAll acquires one lock over every one of names at once (waiting, as AcquireAll does),
// runs fn while holding it, and releases it, also when fn panics. It is Do over several
// names: the Lease extends itself while fn runs, and fn's context is cancelled, with the
// lease's error as its cause, when the lease ends, which the loss of any one name does.
// Options are those of Do.
//
// DoAll returns AcquireAll's error if the lock was never held (ErrInvalid for no names, a
// bad name, a nil fn, or WithErrorHandler or WithAutoExtend(false)); otherwise as Do does.
// Every error names the lock as given. DoAll is safe for concurrent use.
func (c *Client) DoAll(ctx context.Context, names []string, fn func(ctx context.Context) error, opts ...Option) error {
	c.made("DoAll")
	return c.do(ctx, "DoAll", all(names), fn, opts)
}

// NewMutexAll returns a Mutex over every one of names at once: Lock takes every name or
// none, as AcquireAll does, and holds them until Unlock; Lost closes if any name is lost.
// Options are as for NewMutex. A name given twice counts once; no names (nil or empty) or
// a bad name is reported as NewMutex reports a bad name (an error matching ErrInvalid from LockContext, false from
// TryLock, a panic from Lock), naming the lock by the names as given ("[from to]"). The
// Mutex keeps its own copy of the names. Its methods are safe for concurrent use, as a
// Mutex's are.
//
// Unlike a Mutex of one name, it takes no place in the Client's local queue: the Lock and
// TryLock calls of one such Mutex take turns in a queue of its own (so a holding that was
// lost keeps it locked until Unlock, and TryLock fails at once while it is locked), and the
// first of them waits in Redis as its own waiter (see AcquireAll), as other Mutexes and
// calls over any of the names do.
func (c *Client) NewMutexAll(names []string, opts ...Option) *Mutex {
	c.made("NewMutexAll")
	m := &Mutex{}
	m.x.init(c, "NewMutexAll", all(names), KindMutex, opts)
	return m
}

// NewRWMutexAll returns an RWMutex over every one of names at once. Lock takes every name
// for writing, or none, as NewMutexAll's Lock does; RLock takes a reader's share of every
// name, or of none: it holds them with the readers of each name, and excludes every writer
// of any of them. A reader set waits in each name's queue as one waiter, in the order it
// started waiting, as a writer set does, so crossed sets never block each other for good,
// and it takes every share at once, woken by a release, when each of its names is free or
// read and no writer waits ahead of it. Lost closes if any name of a holding is lost. Options,
// names and errors are as for NewMutexAll. Its methods are safe for concurrent use, as an
// RWMutex's are.
//
// Neither side takes a place in the Client's local queue: each RLock waits in Redis as its
// own waiter, and the writer's side takes turns in a queue of the RWMutex's own, as
// NewMutexAll's Lock does. On Redis Cluster, names in several slots are taken slot by slot,
// as AcquireAll takes them, by readers and writers alike.
func (c *Client) NewRWMutexAll(names []string, opts ...Option) *RWMutex {
	c.made("NewRWMutexAll")
	rw := &RWMutex{}
	rw.w.init(c, "NewRWMutexAll", all(names), KindRWMutexWrite, opts)
	return rw
}
