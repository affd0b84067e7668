package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
)

// The workloads, one per run: each is the acquisition of its primitive, by every actor.
const (
	wMutex     = "mutex"     // Mutex.LockContext, TryLock
	wLease     = "lease"     // Acquire and TryAcquire, fenced, extended by hand or by itself
	wRWMutex   = "rwmutex"   // readers and writers mixed; LockContext, RLockContext, TryLock, TryRLock
	wSemaphore = "semaphore" // K = 2, or one client that counts 3
	wElection  = "election"  // Campaign, resign, and an observer
	wDo        = "do"        // Client.Do
	wTwoAddrs  = "twoaddrs"  // a Lease over three Nodes of which two reach one server
	wSets      = "sets"      // locks over several names at once, mixed with single-name Leases and Mutexes (sets.go)
	wHold      = "hold"      // holdings of several validities that extend themselves, checked for availability (hold.go)
)

// Workloads returns the workloads, in the order the seeds cycle through them.
func Workloads() []string {
	return []string{wMutex, wLease, wRWMutex, wSemaphore, wElection, wDo, wTwoAddrs, wSets, wHold, wCluster, wCSemaphore, wCrowd}
}

const lockName = "resource"

// clientsOf returns the number of clients in workload w: 3, and 4 in the sets workload, so
// that sets and single names meet on every name.
func clientsOf(w string) int {
	if w == wSets || w == wCluster {
		return 4
	}
	return 3
}

// acquirer returns actor a's acquisition for workload w, over its Client c and, for the
// sets workload, its core.Cluster cl over the same nodes (nil for the others).
func acquirer(w string, a *actor, c *redlock.Client, cl *core.Cluster) func(ctx context.Context, keeps bool) (*held, error) {
	switch w {
	case wMutex:
		return watched(a, mutexAcquirer(a, c.NewMutex(lockName)))
	case wCrowd:
		m, rw := mutexAcquirer(a, c.NewMutex(lockName)), c.NewRWMutex(lockName)
		reader := readerAcquirer(a, rw)
		return func(ctx context.Context, keeps bool) (*held, error) {
			switch a.rng.IntN(3) {
			case 0:
				return m(ctx, keeps)
			case 1:
				if err := rw.LockContext(ctx); err != nil {
					return nil, err
				}
				return &held{h: holding{client: a.id, role: writer, token: rw.Token(), fenced: true}, lost: rw.Lost(), release: rw.UnlockContext}, nil
			}
			return reader(ctx, keeps)
		}
	case wLease:
		return watched(a, leaseAcquirer(a, c, lockName, false))
	case wTwoAddrs:
		return leaseAcquirer(a, c, lockName, true)
	case wSets:
		return setsAcquirer(a, c, cl)
	case wHold:
		return holdAcquirer(a, c)
	case wCluster:
		return clusterAcquirer(a, c)
	case wRWMutex:
		rw := c.NewRWMutex(lockName)
		return func(ctx context.Context, keeps bool) (*held, error) {
			try := !keeps && a.rng.IntN(2) == 0 // one attempt: TryLock, TryRLock
			if a.rng.IntN(2) == 0 {
				if try && !rw.TryLock() {
					return nil, fmt.Errorf("TryLock failed")
				} else if !try {
					if err := rw.LockContext(ctx); err != nil {
						return nil, err
					}
				}
				return &held{h: holding{client: a.id, role: writer, token: rw.Token(), fenced: true}, lost: rw.Lost(), release: rw.UnlockContext}, nil
			}
			if try && !rw.TryRLock() {
				return nil, fmt.Errorf("TryRLock failed")
			} else if !try {
				if err := rw.RLockContext(ctx); err != nil {
					return nil, err
				}
			}
			return &held{h: holding{client: a.id, role: reader}, lost: rw.Lost(), release: rw.RUnlockContext}, nil
		}
	case wSemaphore, wCSemaphore:
		k := 2
		if a.env.mixedK && a.id == 0 {
			k, a.keeps = 3, false
		}
		s := c.NewSemaphore(lockName, k)
		return func(ctx context.Context, keeps bool) (*held, error) {
			l, err := s.Acquire(ctx)
			if err != nil {
				return nil, err
			}
			h := leaseHeld(a.id, permit, l)
			h.h.k, h.h.fenced = k, false // holders of different permits overlap: their tokens need not follow their grants
			return h, nil
		}
	case wElection:
		e := c.NewElection(lockName)
		n := 0
		return func(ctx context.Context, keeps bool) (*held, error) {
			n++
			value := fmt.Sprintf("c%d#%d", a.id, n)
			a.env.rec.note("c%d campaigns %s", a.id, value)
			l, err := e.Campaign(ctx, value)
			if errors.Is(err, redlock.ErrExpired) || errors.Is(err, redlock.ErrLost) || errors.Is(err, redlock.ErrNotHeld) {
				return nil, documented{err} // it led, and lost the lease before its value was recorded
			}
			if err != nil {
				return nil, err
			}
			h := leaseHeld(a.id, leader, l)
			h.h.value = value
			return h, nil
		}
	}
	panic("sim: unknown workload " + w)
}

// watched returns acquire, whose holdings of the run's lock have their lock key and its
// value on the servers noted at the grant, so that a holder checks at each step that a
// quorum of those servers still hold it for it (checkHeld), and, once released, that none
// does (checkReleased).
func watched(a *actor, acquire func(ctx context.Context, keeps bool) (*held, error)) func(ctx context.Context, keeps bool) (*held, error) {
	key := core.NewKeys("redlock:", lockName).Lock
	return func(ctx context.Context, keeps bool) (*held, error) {
		h, err := acquire(ctx, keeps)
		if err != nil {
			return nil, err
		}
		h.key = key
		if h.holders == nil {
			h.holders = a.env.holdersOf(key)
		}
		for _, v := range h.holders {
			h.value = v
		}
		return h, nil
	}
}

// documented is an acquisition's error that its contract gives for a wait that keeps
// asking: Campaign's, when the lease it won ended before its value was recorded.
type documented struct{ error }

func (d documented) Unwrap() error { return d.error }

// readerAcquirer returns actor a's acquisition of a read holding of rw: TryRLock, or
// RLockContext.
func readerAcquirer(a *actor, rw *redlock.RWMutex) func(ctx context.Context, keeps bool) (*held, error) {
	return func(ctx context.Context, keeps bool) (*held, error) {
		if !keeps && a.rng.IntN(2) == 0 {
			if !rw.TryRLock() {
				return nil, fmt.Errorf("TryRLock failed")
			}
		} else if err := rw.RLockContext(ctx); err != nil {
			return nil, err
		}
		return &held{h: holding{client: a.id, role: reader}, lost: rw.Lost(), release: rw.RUnlockContext}, nil
	}
}

// mutexAcquirer returns actor a's acquisition of Mutex m: TryLock, or LockContext.
func mutexAcquirer(a *actor, m *redlock.Mutex) func(ctx context.Context, keeps bool) (*held, error) {
	return func(ctx context.Context, keeps bool) (*held, error) {
		if !keeps && a.rng.IntN(2) == 0 {
			if !m.TryLock() {
				return nil, fmt.Errorf("TryLock failed")
			}
		} else if err := m.LockContext(ctx); err != nil {
			return nil, err
		}
		return &held{h: holding{client: a.id, role: writer}, lost: m.Lost(), release: m.UnlockContext}, nil
	}
}

// leaseAcquirer returns actor a's acquisition of a fenced Lease of name over c: TryAcquire,
// or Acquire, extended by hand or by itself. With twoAddrs, it checks that a quorum of
// distinct servers hold each grant (see env.checkServers).
func leaseAcquirer(a *actor, c *redlock.Client, name string, twoAddrs bool) func(ctx context.Context, keeps bool) (*held, error) {
	return func(ctx context.Context, keeps bool) (*held, error) {
		auto := a.rng.IntN(2) == 0
		var l *redlock.Lease
		var err error
		if !keeps && a.rng.IntN(2) == 0 {
			l, err = c.TryAcquire(ctx, name, redlock.WithAutoExtend(auto))
		} else {
			l, err = c.Acquire(ctx, name, redlock.WithAutoExtend(auto))
		}
		if err != nil {
			return nil, err
		}
		if twoAddrs {
			a.env.checkServers(a.id)
		}
		h := leaseHeld(a.id, writer, l)
		if !auto {
			h.extend = l.Extend
			// Three quarters of the manual ones within the fault window hold to the end of their
			// validity (see actor.useToEnd).
			if h.toEnd = !twoAddrs && a.env.plan.in(time.Now()) && a.rng.IntN(4) != 0; h.toEnd {
				h.key = core.NewKeys("redlock:", name).Lock
				h.holders = a.env.holdersOf(h.key)
			}
		}
		return h, nil
	}
}

// leaseHeld returns l as the holding of client in role.
func leaseHeld(client int, r role, l *redlock.Lease) *held {
	return &held{
		h:       holding{client: client, role: r, token: l.Token(), fenced: true},
		until:   l.Until,
		lost:    l.Done(),
		release: l.Release,
	}
}

// runDo is actor a's loop for the Do workload: Do holds the lock while its function runs,
// and the function stops writing when its context ends.
func (a *actor) runDo(ctx context.Context, c *redlock.Client) {
	for a.alive(ctx) {
		a.sleep(time.Duration(a.rng.Int64N(int64(50 * time.Millisecond))))
		if !a.alive(ctx) {
			return
		}
		keeps := a.keeps && a.rng.IntN(4) != 0
		actx, cancel := ctx, context.CancelFunc(func() {})
		if !keeps {
			actx, cancel = context.WithTimeout(ctx, time.Duration(1+a.rng.Int64N(int64(400*time.Millisecond))))
		}
		w := a.env.rec.asking(a.id, keeps)
		answered := false
		err := c.Do(actx, lockName, func(fctx context.Context) error {
			a.env.rec.answered(w, nil)
			answered = true
			// The holding ends when fn's context ends, or when fn returns: while the context is
			// live the lock is valid (Do's contract), and fn stops writing when it ends. When
			// actx's deadline ends it, the lease is still extended until fn returns, but fn no
			// longer hears of its loss: once lost (the client cut off, say), another client
			// rightly holds the lock before fn returns.
			lost := make(chan struct{})
			h := &held{h: holding{client: a.id, role: writer}, lost: lost}
			i := a.env.rec.granted(h.h)
			unwatch := context.AfterFunc(fctx, func() {
				if errors.Is(context.Cause(fctx), redlock.ErrNotHeld) {
					close(lost)
				} else {
					a.env.rec.ended(i, time.Now(), "its context ended")
				}
			})
			defer unwatch()
			stop := make(chan struct{})
			defer close(stop)
			go a.watch(i, h, stop)
			a.use(ctx, i, h, func() bool { return fctx.Err() == nil })
			if !a.alive(ctx) && ctx.Err() == nil {
				<-fctx.Done() // a dead holder's function returns only once its lock is gone
				a.env.rec.ended(i, time.Now(), "lost after its holder died")
				return nil
			}
			a.env.rec.returned(i, time.Now())
			return nil
		})
		cancel()
		if !answered {
			if err == nil {
				err = errors.New("redlock: Do returned without running its function")
			}
			a.env.rec.answered(w, err)
		}
		if err != nil && answered {
			a.env.rec.note("c%d Do: %v", a.id, err)
		}
	}
}
