package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
)

// The hold workload: holdings that last several validities and extend themselves (Mutexes,
// Leases with WithAutoExtend, an RWMutex's writers and readers; and a seventh of the
// acquisitions as in the lease workload, which mostly find the lock free), each held for 1
// to 3 steps of one to one and a half TTLs, so that availability is checked, not only reported. Where
// every node answers within the node timeout (the faults of plan.reliable), the library
// promises:
//
//   - a holder keeps its lock: a holding that the library reports lost is a violation;
//   - a Lease that extends itself has, once it has held for a node timeout, at least a third
//     of its validity left less a node timeout (it extends itself when a third is left, and
//     an extension returns within the node timeout);
//   - a release leaves no key behind: two node timeouts after Release returned (a node that
//     had not answered an extension is released once it answers, within a node timeout, and
//     that release lands within another), no server holds the holder's lock key.

// holdAcquirer returns actor a's acquisition for the hold workload, over its Client c.
func holdAcquirer(a *actor, c *redlock.Client) func(ctx context.Context, keeps bool) (*held, error) {
	m := mutexAcquirer(a, c.NewMutex(lockName))
	rw := c.NewRWMutex(lockName)
	reader := readerAcquirer(a, rw)
	key := core.NewKeys("redlock:", lockName).Lock
	lease := leaseAcquirer(a, c, lockName, false)
	return func(ctx context.Context, keeps bool) (*held, error) {
		var h *held
		var err error
		switch a.rng.IntN(7) {
		case 6: // as in the lease workload: many of these find the lock free, so that a grant's
			// own validity, not one handed over, is checked at its end (useToEnd)
			if h, err = lease(ctx, keeps); err != nil {
				return nil, err
			}
			h.auto = h.extend == nil
			h.keeps = h.auto
			return h, nil
		case 0, 1:
			h, err = m(ctx, keeps)
		case 2, 3:
			var l *redlock.Lease
			if !keeps && a.rng.IntN(2) == 0 {
				l, err = c.TryAcquire(ctx, lockName, redlock.WithAutoExtend(true))
			} else {
				l, err = c.Acquire(ctx, lockName, redlock.WithAutoExtend(true))
			}
			if err == nil {
				h = leaseHeld(a.id, writer, l)
				h.auto = true
			}
		case 4:
			if err = rw.LockContext(ctx); err == nil {
				h = &held{h: holding{client: a.id, role: writer, token: rw.Token(), fenced: true}, lost: rw.Lost(), release: rw.UnlockContext}
			}
		default:
			h, err = reader(ctx, keeps)
		}
		if err != nil {
			return nil, err
		}
		h.keeps = true
		if h.h.role == writer {
			h.key, h.holders = key, a.env.holdersOf(key)
			for _, v := range h.holders {
				h.value = v
			}
		}
		return h, nil
	}
}

// reliable reports whether every node answers every call within the node timeout under the
// plan's faults: none, delays within it, and clocks within the drift allowance.
func (p *plan) reliable() bool {
	return p.kind == None || p.kind == Delay || p.kind == Clock
}

// report records violation v of the run, found while it runs.
func (e *env) report(format string, args ...any) {
	select {
	case e.bad <- violation{time.Now(), fmt.Sprintf(format, args...)}:
	default:
	}
}

// checkKept records a violation if h, which its holder keeps (held.keeps), was lost while
// every node answered within the node timeout.
func (a *actor) checkKept(h *held) {
	if h.keeps && a.env.plan.reliable() && a.lostNow(h) {
		a.env.report("c%d's %s, granted at %s, was lost at %s although every node answered within the node timeout",
			a.id, h.h.role, a.env.rec.since(h.since), a.env.rec.since(time.Now()))
	}
}

// checkExtended records a violation if h, a Lease that extends itself, held for more than a
// node timeout, has less than a third of its validity left less a node timeout, while every
// node answers within the node timeout: its extension is late.
func (a *actor) checkExtended(h *held) {
	if !h.auto || h.until == nil || !a.env.plan.reliable() || time.Since(h.since) <= nodeTimeout {
		return
	}
	validity := a.env.validity()
	if left := time.Until(h.until()); left < validity/3-nodeTimeout {
		a.env.report("c%d's lease, which extends itself, has %v of its validity left at %s, less than a third of it (%v) less a node timeout",
			a.id, left, a.env.rec.since(time.Now()), validity/3)
	}
}

// checkHeld records a violation if fewer than a quorum of the servers that held h's lock key
// for it at its grant (h.holders) still do, while h is valid and every node answers within
// the node timeout: only a script that takes another's key (an extension that ignores the
// owner, say) can take it from a holder that extends in time.
func (a *actor) checkHeld(h *held) {
	if h.key == "" || h.value == "" || !a.env.plan.reliable() || a.lostNow(h) || (h.until != nil && !time.Now().Before(h.until())) {
		return
	}
	held, lost := 0, []string{}
	for i := range h.holders {
		if m := a.env.servers[i].sync(); m != nil {
			if v, err := m.Get(h.key); err == nil && v == h.value {
				held++
				continue
			}
		}
		lost = append(lost, a.env.servers[i].name)
	}
	if held < a.env.quorum {
		slices.Sort(lost)
		a.env.report("c%d's %s, granted at %s, is held for it at %s on %d of the servers that held it then (a quorum is %d): gone from %v",
			a.id, h.h.role, a.env.rec.since(h.since), a.env.rec.since(time.Now()), held, a.env.quorum, lost)
	}
}

// validity returns the validity of the run's locks: the TTL less the drift allowance.
func (e *env) validity() time.Duration {
	return e.ttl - time.Duration(float64(e.ttl)*0.01) - 2*time.Millisecond
}

// releaseAtExtension, for half the Leases that extend themselves, waits until the lease's
// next extension is due (a third of its validity left) and returns as soon as it moved the
// lease's Until (looking every millisecond, for up to two node timeouts), so that the
// release that follows meets the extension's calls to slower nodes still under way, which
// it must follow: a release that overtook one would leave the key that the late extension
// takes again.
func (a *actor) releaseAtExtension(ctx context.Context, h *held) {
	if !h.auto || a.rng.IntN(2) == 0 || !a.alive(ctx) || a.lostNow(h) {
		return
	}
	until := h.until()
	a.sleep(time.Until(until.Add(-a.env.validity() / 3)))
	for range 2 * nodeTimeout / time.Millisecond {
		if !a.alive(ctx) || a.lostNow(h) || !h.until().Equal(until) {
			return
		}
		a.sleep(time.Millisecond)
	}
}

// checkReleased checks, two node timeouts after h's release returned (now), that no server
// holds h's lock key for it any more; it returns at once, and the check runs on its own.
func (a *actor) checkReleased(h *held) {
	if h.key == "" || h.value == "" || !a.env.plan.reliable() {
		return
	}
	released := time.Now()
	a.env.checks.Go(func() {
		time.Sleep(2*nodeTimeout + 5*time.Millisecond)
		for _, s := range a.env.servers {
			if m := s.sync(); m != nil {
				if v, err := m.Get(h.key); err == nil && v == h.value {
					a.env.report("%s still holds c%d's lock key at %s, released at %s (for %v more)",
						s.name, a.id, a.env.rec.since(time.Now()), a.env.rec.since(released), m.TTL(h.key))
					return
				}
			}
		}
	})
}
