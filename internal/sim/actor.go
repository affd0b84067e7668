package sim

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/go-redlock/redlock"
)

// held is a holding as an actor sees it.
type held struct {
	h       holding                         // what the record says of it
	until   func() time.Time                // the end of its validity; nil if the API does not say
	lost    <-chan struct{}                 // closed when the library says it is lost
	extend  func(ctx context.Context) error // nil: it extends itself
	eager   bool                            // extend at every step, not only once less than half the TTL is left
	release func(ctx context.Context) error
	// toEnd: it holds, unextended, to the end of its validity, and checks then that the
	// servers still hold key (see env.checkValid): holders are the servers that held it for
	// the holder at its grant, and their value.
	toEnd   bool
	key     string
	holders map[int]string
	// The hold workload's checks (hold.go): keeps, its holder must keep it while every node
	// answers in time; auto, a Lease that extends itself; value, its lock key's value, which
	// no server may hold once it is released (with key); since, when it was granted.
	keeps bool
	auto  bool
	value string
	since time.Time
}

// actor is one client's workload: it waits for the lock, holds it for a few steps,
// writing to the fenced resource at each, and lets it go, until the run's end or its
// death.
type actor struct {
	id      int
	rng     *rand.Rand
	env     *env
	keeps   bool          // its waits count for liveness (it is refused nothing for good)
	after   time.Duration // when it starts, after the run's start (the crowd workload)
	acquire func(ctx context.Context, keeps bool) (*held, error)
}

// run is the actor's loop, until ctx ends or the actor dies.
func (a *actor) run(ctx context.Context) {
	a.sleep(time.Until(a.env.rec.start.Add(a.after)))
	for a.alive(ctx) {
		gap := 50 * time.Millisecond
		if a.env.spaced && a.rng.IntN(2) == 0 {
			gap = 3 * a.env.ttl
		}
		a.sleep(time.Duration(a.rng.Int64N(int64(gap))))
		if !a.alive(ctx) {
			return
		}
		keeps := a.keeps && a.rng.IntN(4) != 0
		actx, cancel := ctx, context.CancelFunc(func() {})
		if !keeps { // a wait with a deadline of its own: it may give up and leave the queue
			actx, cancel = context.WithTimeout(ctx, time.Duration(1+a.rng.Int64N(int64(400*time.Millisecond))))
		}
		w := a.env.rec.asking(a.id, keeps)
		h, err := a.acquire(actx, keeps)
		cancel()
		a.env.rec.answered(w, err)
		if err != nil {
			a.env.rec.note("c%d not granted: %v", a.id, err)
			if errors.Is(err, redlock.ErrInvalid) && a.env.stopOnInvalid {
				return // twoaddrs: the configuration is refused, as it must be
			}
			continue
		}
		a.hold(ctx, h)
	}
}

// alive reports whether the actor should go on: ctx is live and it has not died.
func (a *actor) alive(ctx context.Context) bool {
	return ctx.Err() == nil && !a.env.plan.dead(a.id, time.Now())
}

// sleep sleeps d, or less if the actor dies meanwhile.
func (a *actor) sleep(d time.Duration) {
	if death := a.env.plan.deaths[a.id]; !death.IsZero() && time.Now().Add(d).After(death) {
		d = max(0, time.Until(death))
	}
	time.Sleep(d)
}

// hold records h, holds it for a few steps and releases it; if the actor dies meanwhile it
// stops at once and never releases.
func (a *actor) hold(ctx context.Context, h *held) {
	i := a.env.rec.granted(h.h)
	h.since = time.Now()
	stop := make(chan struct{})
	go a.watch(i, h, stop)
	if h.toEnd {
		a.useToEnd(ctx, i, h)
	} else {
		a.use(ctx, i, h, func() bool { return true })
		a.releaseAtExtension(ctx, h)
	}
	if !a.alive(ctx) && ctx.Err() == nil { // died holding: no release, the watcher ends the record
		return
	}
	a.checkKept(h)
	a.env.rec.ended(i, a.validNow(h), "released")
	close(stop)
	if err := h.release(context.WithoutCancel(ctx)); err != nil {
		a.env.rec.note("c%d release: %v", a.id, err)
	} else {
		a.checkReleased(h)
	}
}

// use holds h for a few steps, writing to the resource at each while it is still valid,
// and extending it when it does not extend itself; live says whether the holder may go on
// (Do's function stops when its context ends).
func (a *actor) use(ctx context.Context, i int, h *held, live func() bool) {
	ttl := a.env.ttl
	step := a.env.step
	if a.env.plan.longHolds {
		step = max(step, 400*time.Millisecond)
	}
	for range 1 + a.rng.IntN(3) {
		a.sleep(10*time.Millisecond + time.Duration(a.rng.Int64N(int64(step-10*time.Millisecond))))
		if !a.alive(ctx) || !live() || a.lostNow(h) || (h.until != nil && !time.Now().Before(h.until())) {
			return
		}
		a.checkExtended(h)
		a.checkHeld(h)
		// The validity was checked: a pause here (a GC, say) may outlast it.
		if p := a.env.plan.pause; p > 0 && a.env.plan.in(time.Now()) && a.rng.IntN(3) == 0 {
			d := time.Duration(a.rng.Int64N(int64(p)))
			a.env.rec.note("c%d pauses %v", a.id, d)
			a.sleep(d)
			if !a.alive(ctx) {
				return
			}
		}
		if h.h.fenced {
			a.env.rec.write(i, h.h.token)
		}
		if h.extend != nil && h.until != nil && (h.eager || time.Until(h.until()) < ttl/2) {
			if err := h.extend(ctx); err != nil {
				a.env.rec.note("c%d extend: %v", a.id, err)
			}
		}
	}
}

// useToEnd holds h, which has an Until and a key, to the last instants of its validity
// without extending it, writing once, and checks then that a quorum of servers still hold
// its key: the validity that the library grants must be shorter than the keys' life on
// the servers' clocks (the drift allowance), which a holder that lets go sooner never shows.
// The check is at an instant drawn within the last millisecond before Until (never at Until,
// where the lease's own timer marks it lost, and the check would be skipped). Half the time
// the holder first extends it once, so that an extension's validity is checked too (a grant
// handed over by a release counts its validity from its attempt's start, long before the
// key was set: only an uncontended grant's is as tight as an extension's).
func (a *actor) useToEnd(ctx context.Context, i int, h *held) {
	if h.h.fenced {
		a.env.rec.write(i, h.h.token)
	}
	if h.extend != nil && a.rng.IntN(2) == 0 {
		if err := h.extend(ctx); err != nil {
			a.env.rec.note("c%d extend: %v", a.id, err)
			return
		}
	}
	before := time.Duration(1 + a.rng.Int64N(int64(time.Millisecond))) // in (0, 1 ms]
	a.sleep(time.Until(h.until().Add(-before)))
	if !a.alive(ctx) || a.lostNow(h) || !time.Now().Before(h.until()) {
		return
	}
	a.env.checkValid(a.id, h.key, h.holders, h.until())
}

// lostNow reports whether the library has said that h is lost.
func (a *actor) lostNow(h *held) bool {
	select {
	case <-h.lost:
		return true
	default:
		return false
	}
}

// validNow returns now, or the end of h's validity if that came first.
func (a *actor) validNow(h *held) time.Time {
	now := time.Now()
	if h.until != nil && h.until().Before(now) {
		return h.until()
	}
	return now
}

// watch ends holding i when the library says that it is lost, unless stop closes first.
func (a *actor) watch(i int, h *held, stop <-chan struct{}) {
	select {
	case <-h.lost:
		a.env.rec.ended(i, a.validNow(h), "lost")
		// Its keys, which no release deleted, may stand a TTL from its grant: a lock handed
		// over counts its validity from its attempt's start, before the key was set.
		a.env.rec.busy(i, h.since.Add(a.env.ttl))
	case <-stop:
	}
}
