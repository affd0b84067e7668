package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/go-redlock/redlock"
)

// Modes of the workers (-mode).
const (
	modeLease = "lease" // Acquire, hold 1-50 ms, release (runWorker)
	// modeElection: Campaign, lead until leadership is lost (or the window ends), then
	// campaign again (runCandidate).
	modeElection = "election"
	// modeElectionTurns: Campaign, lead as the lease mode holds (1-50 ms, writing twice),
	// resign: the lease mode's workload through Campaign, which isolates what Campaign
	// costs over Acquire from what holding until lost gains.
	modeElectionTurns = "election-turns"
)

var modes = []string{modeLease, modeElection, modeElectionTurns}

// writeEvery bounds the pause between a leader's writes to the ledger (each 1-50 ms, as a
// lease mode holding).
const writeEvery = 50

// runCandidate loops until ctx ends (or maxIterations), as runWorker does but through an
// Election: Campaign (at most acquireTimeout per call) with the worker's value, write to
// the ledger with the leader's token, and then, while leading, write again every 1-50 ms
// while the lease is valid (checking its validity first; a paused worker pauses between
// the check and the write, as in runWorker). In modeElection it leads until the lease ends
// (lost, expired: the library extends it) or the window ends (it then resigns); in
// modeElectionTurns it resigns after one holding of 1-50 ms, as runWorker releases. Each
// leadership is recorded as runWorker records a lease: held from Campaign's return until
// the earlier of the end of leading (the resignation's start, or when the worker saw the
// lease end) and Lease.Until after its last extension, and released as runWorker releases,
// also after a loss. Leaderships lost are counted in the errors as "lost:<reason>".
func runCandidate(ctx context.Context, cfg *workerConfig, c *redlock.Client, worker int, seed uint64, turns bool) []grant {
	rng := rand.New(rand.NewPCG(seed, uint64(worker)))
	el := c.NewElection(cfg.name)
	value := fmt.Sprint("worker-", worker)
	var out []grant
	for i := 0; i < maxIterations && ctx.Err() == nil; i++ {
		actx, cancel := context.WithTimeout(ctx, acquireTimeout)
		asked := cfg.clk.now()
		lease, err := el.Campaign(actx, value)
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
		until := lease.Until()
		lost := false
		for writes := 0; writes < maxIterations; writes++ {
			t := time.NewTimer(time.Duration(1+rng.IntN(writeEvery)) * time.Millisecond)
			select {
			case <-ctx.Done():
			case <-lease.Done():
				lost = true
			case <-t.C:
			}
			t.Stop()
			if lost || ctx.Err() != nil {
				break
			}
			if u := lease.Until(); u.After(until) {
				g.extended++
				until = u
			}
			if cfg.clk.at(lease.Until()) > cfg.clk.now() {
				if cfg.pause[worker].Swap(false) {
					g.paused = true
					time.Sleep(time.Duration(float64(cfg.ttl) * (1.2 + 0.8*rng.Float64())))
				}
				cfg.ledger.write(g.id, g.token, g.paused)
			}
			if turns {
				break
			}
		}
		g.end = min(cfg.clk.now(), cfg.clk.at(lease.Until()))
		// Resign, or after a loss clear what is left of the lease, as runWorker releases
		// every lease (without it a lost leader's keys on a minority, which its failed
		// extensions kept refreshing, block the next leader until their TTL).
		if lost {
			g.lost = libErrKind(lease.Err())
			cfg.errs.add("lost", lease.Err())
		}
		rctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		if err := lease.Release(rctx); err != nil && !lost {
			cfg.errs.add("release", err)
		}
		cancel()
		out = append(out, g)
	}
	return out
}

// warmUpElection loads the election's scripts on every server for each Client (the lock's
// warm-up loads the others): each campaigns once for an election of its own, unopposed,
// and resigns.
func warmUpElection(clients []*redlock.Client, prefix string) error {
	for i, c := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		l, err := c.NewElection(fmt.Sprint(prefix, i)).Campaign(ctx, "warm-up")
		cancel()
		if err != nil {
			return fmt.Errorf("election warm-up of worker %d: %w", i, err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), opTimeout)
		_ = l.Release(ctx)
		cancel()
	}
	return nil
}

// dumpLosses prints, for each lease that ended before its worker let go (a leader that lost
// its leadership), the extension rounds its worker sent in the lease's last TTL: when each
// began, and what each node answered (y extended, n the key gone or another's, t timed out,
// - not called). A round with fewer than a quorum of y is a failed extension; one in which
// a node the partition spares answers n shows a node that does not hold the lease's key.
func dumpLosses(w io.Writer, ph *phase, quorum int) {
	for _, g := range ph.grants {
		if g.lost == "" {
			continue
		}
		fmt.Fprintf(w, "loss: worker %d's lease (token %d, held %s-%s) ended %s\n", g.worker, g.token, ms(g.got), ms(g.end), g.lost)
		for _, f := range ph.faultLog {
			if f.at >= g.end-ph.ttl && f.at <= g.end {
				fmt.Fprintf(w, "  %9s fault: %s\n", ms(f.at), f.text)
			}
		}
		// The extension rounds: the worker's extend calls, grouped by their start (a round's
		// calls start within a millisecond of each other).
		var round []call
		flush := func() {
			if len(round) == 0 {
				return
			}
			marks, yes := make([]byte, nodes), 0
			for i := range marks {
				marks[i] = '-'
			}
			for _, c := range round {
				switch {
				case c.err != "":
					marks[c.node] = 't'
				case c.status == 1:
					marks[c.node] = 'y'
					yes++
				default:
					marks[c.node] = 'n'
				}
			}
			verdict := "extended"
			if yes < quorum {
				verdict = "failed"
			}
			fmt.Fprintf(w, "  %9s extend %s (%d yes: %s)\n", ms(round[0].start), marks, yes, verdict)
			round = round[:0]
		}
		var calls []call
		for _, c := range ph.calls {
			if c.worker == g.worker && c.script == "extend" && c.start >= g.end-ph.ttl && c.start <= g.end {
				calls = append(calls, c)
			}
		}
		slices.SortFunc(calls, func(a, b call) int { return cmpDur(a.start, b.start) })
		for _, c := range calls {
			if len(round) > 0 && c.start-round[0].start > time.Millisecond {
				flush()
			}
			round = append(round, c)
		}
		flush()
	}
}
