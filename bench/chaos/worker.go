package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redlock/redlock"
)

// grant is one lease a worker held, on the clock.
type grant struct {
	id     int64
	worker int
	asked  time.Duration // Acquire was called
	got    time.Duration // Acquire returned the lease
	// end is when the worker stopped holding: the earlier of the start of its Release and
	// the end of its validity (Lease.Until, which the library measures from the start of the
	// attempt that won, minus the drift allowance, and moves with each extension).
	end      time.Duration
	token    uint64
	extended int    // successful extensions
	paused   bool   // it paused past its validity (client-pause)
	lost     string // why the lease ended before the worker let go ("" if it did not)
}

// errCounts counts errors by "operation:kind".
type errCounts struct {
	mu sync.Mutex
	m  map[string]int
}

func (e *errCounts) add(op string, err error) {
	e.mu.Lock()
	if e.m == nil {
		e.m = map[string]int{}
	}
	e.m[op+":"+libErrKind(err)]++
	e.mu.Unlock()
}

// libErrKind names a library error's kind.
func libErrKind(err error) string {
	switch {
	case errors.Is(err, redlock.ErrLost):
		return "lost"
	case errors.Is(err, redlock.ErrExpired):
		return "expired"
	case errors.Is(err, redlock.ErrReleased):
		return "released"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, redlock.ErrInvalid):
		return "invalid"
	case errors.Is(err, redlock.ErrClosed):
		return "closed"
	case errors.Is(err, redlock.ErrNoQuorum):
		return "noquorum"
	case errors.Is(err, redlock.ErrHeld):
		return "held"
	case errors.Is(err, redlock.ErrNotHeld):
		return "notheld"
	}
	return "other"
}

// workerConfig is what every worker of a nemesis shares.
type workerConfig struct {
	name   string // the lock's name
	clk    clock
	ledger *ledger
	errs   *errCounts
	ttl    time.Duration
	nextID *atomic.Int64
	// pause, per worker: the nemesis asks the worker to pause at its next holding.
	pause []atomic.Bool
}

// Bounds of one worker's loop, so that it ends even if the clock or the library misbehave.
const (
	maxIterations  = 1_000_000
	acquireTimeout = 5 * time.Second
	opTimeout      = time.Second
	extendShare    = 0.3 // the share of holdings that extend once
)

// runWorker loops until ctx ends (or maxIterations): acquire the lock with a Lease, write
// to the ledger with its token, hold 1-50 ms (sometimes extending once), write again while
// still valid (or, if asked to pause, check the validity, pause 1.2-2 TTLs and then write),
// release. It returns the leases it held.
func runWorker(ctx context.Context, cfg *workerConfig, c *redlock.Client, worker int, seed uint64) []grant {
	rng := rand.New(rand.NewPCG(seed, uint64(worker)))
	var out []grant
	for i := 0; i < maxIterations && ctx.Err() == nil; i++ {
		actx, cancel := context.WithTimeout(ctx, acquireTimeout)
		asked := cfg.clk.now()
		lease, err := c.Acquire(actx, cfg.name)
		got := cfg.clk.now()
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				cfg.errs.add("acquire", err)
				if got-asked < time.Millisecond { // an error at once: do not spin
					time.Sleep(10 * time.Millisecond)
				}
			}
			continue
		}
		g := grant{id: cfg.nextID.Add(1), worker: worker, asked: asked, got: got, token: lease.Token()}
		cfg.ledger.write(g.id, g.token, false)
		time.Sleep(time.Duration(1+rng.IntN(50)) * time.Millisecond)
		if rng.Float64() < extendShare {
			ectx, cancel := context.WithTimeout(context.Background(), opTimeout)
			if err := lease.Extend(ectx); err != nil {
				cfg.errs.add("extend", err)
			} else {
				g.extended++
			}
			cancel()
		}
		// Check the validity, then write; a paused worker pauses in between.
		if cfg.clk.at(lease.Until()) > cfg.clk.now() {
			if cfg.pause[worker].Swap(false) {
				g.paused = true
				time.Sleep(time.Duration(float64(cfg.ttl) * (1.2 + 0.8*rng.Float64())))
			}
			cfg.ledger.write(g.id, g.token, g.paused)
		}
		g.end = min(cfg.clk.now(), cfg.clk.at(lease.Until()))
		rctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		if err := lease.Release(rctx); err != nil {
			cfg.errs.add("release", err)
		}
		cancel()
		out = append(out, g)
	}
	return out
}
