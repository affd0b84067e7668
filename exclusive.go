package redlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/go-redlock/redlock/core"
)

// exclusive is the exclusive side of a lock: a Mutex, or an RWMutex's writer side. It has
// one holding at a time, and keeps the holding's place in its Client's local queue from
// the lock until the unlock, also when the holding is lost before: no other goroutine of
// the Client locks it while it is locked here (over several names, in a queue of x's own).
// Its settings serve an RWMutex's readers too.
type exclusive struct {
	client *Client
	name   string
	kind   Kind // KindMutex, or KindRWMutexWrite
	opts   settings
	keys   core.Keys
	groups []core.Keys // a lock over names in several Redis Cluster slots: see slotGroups
	err    error       // a bad name or option, reported by every locking call

	// queue is the name's local queue in the Client, kept for x's lifetime; for a set, a
	// queue of x's own, so that one holding of x at a time goes to Redis, and a lost holding
	// keeps x locked until its Unlock.
	queue *queue

	// self is x's address, recorded at its first use, to tell a copy (see noCopy).
	self atomic.Pointer[exclusive]

	mu    sync.Mutex
	lease *Lease // the current holding; nil when unlocked
}

// init readies x, for op (NewMutex, NewMutexAll, NewRWMutex or NewRWMutexAll), as the exclusive side of
// t's lock, whose holdings are of kind.
func (x *exclusive) init(c *Client, op string, t target, kind Kind, opts []Option) {
	x.client, x.name, x.kind = c, t.name, kind
	not := optNoAutoExtend
	if kind == KindRWMutexWrite {
		not |= optFencing // its writer always carries a token
	}
	x.opts, x.err = c.opts.forCall(op, not, opts)
	x.opts.autoExtend = true
	if err := t.check(); err != nil {
		x.err = err
	}
	if x.err != nil {
		x.err = &lockError{op, t.name, x.err}
	}
	x.keys = t.keys(x.opts.prefix)
	x.groups = c.slotGroups(x.keys, t.name, x.opts.prefix)
	x.queue = c.localQueue(x.keys)
	if x.queue == nil {
		x.queue = &queue{slot: make(chan struct{}, 1), closed: c.closed}
	}
}

// noCopy panics if x is a copy of one that was used (kind names what holds it: "Mutex",
// "RWMutex"): the copy shares the original's holding and its place in the local queue, and
// would release one holding twice or leave the place another goroutine holds. The first
// call of x records its address.
func (x *exclusive) noCopy(kind string) {
	if p := x.self.Load(); p == x || p == nil && x.self.CompareAndSwap(nil, x) || x.self.Load() == x {
		return
	}
	panic("redlock: illegal use of a copied " + kind + " (it must not be copied after first use)")
}

// usable returns the error of every locking call of x, if any: a bad name or option, or a
// zero value of typ (Mutex, RWMutex).
func (x *exclusive) usable(typ string) error {
	if x.client == nil {
		return &lockError{"lock", x.name, fmt.Errorf("%w: zero %s (use Client.New%s)", ErrInvalid, typ, typ)}
	}
	return x.err
}

// newLease returns a Lease, not yet held, of one holding of kind: x's, or a reader's.
func (x *exclusive) newLease(kind Kind) *Lease {
	l := x.client.leaseOf(x.name, kind, x.keys, x.opts)
	l.groups = x.groups
	return l
}

// lock locks x, whose type typ names (Mutex, RWMutex) in errors: if wait, waiting until it is locked or ctx ends, and going on, if persist,
// through errors that no retry can fix until the Client is closed; else in one attempt.
// If the Client was closed meanwhile, it lets go of the lock and of its place, and returns
// an error that matches ErrClosed.
func (x *exclusive) lock(ctx context.Context, typ string, wait, persist bool) error {
	if err := x.usable(typ); err != nil {
		return err
	}
	defer x.client.end(x.client.begin())
	l := x.newLease(x.kind)
	l.lock.Persist = persist
	g, err := x.client.acquire(ctx, "lock", l, x.queue, wait)
	if err != nil {
		return err
	}
	// The holding reports its own loss (Lost's channel, the WithLostHandler function): x
	// only keeps it until the unlock.
	if err := l.start(g); err != nil {
		x.queue.leave()
		return err
	}
	x.mu.Lock()
	x.lease = l
	x.mu.Unlock()
	return nil
}

// unlock unlocks x: it lets go of the holding, then of its place in the local queue, and
// returns the release's error. It panics with unlocked if x is not locked.
func (x *exclusive) unlock(ctx context.Context, unlocked string) error {
	x.mu.Lock()
	l := x.lease
	x.lease = nil
	x.mu.Unlock()
	if l == nil {
		panic(unlocked)
	}
	defer x.queue.leave() // also if the Observer panics
	return l.Release(ctx)
}

// holding returns x's current holding, or nil if x is not locked.
func (x *exclusive) holding() *Lease {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.lease
}

// report sends err, from op, to the WithErrorHandler function, or else to the WithLogger
// logger, if it is not nil.
func (x *exclusive) report(op string, err error) {
	switch {
	case err == nil:
	case x.opts.onError != nil:
		x.opts.onError(err)
	case x.opts.logger != nil:
		x.opts.logger.Warn("redlock: "+op, "name", x.name, "error", err)
	}
}
