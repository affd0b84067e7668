package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redlock/redlock"
)

// phaseConfig is what every nemesis runs with.
type phaseConfig struct {
	lock        lockSettings
	mode        string // modeLease, modeElection or modeElectionTurns
	workers     int
	duration    time.Duration
	ttl         time.Duration
	nodeTimeout time.Duration
	guard       time.Duration
	seed        uint64
}

// phase is the record of one nemesis's run, for the checks and the report.
type phase struct {
	nemesis      nemesis
	from, to     time.Duration // the window the workers ran in
	ttl          time.Duration
	nodeTimeout  time.Duration
	grants       []grant
	writes       []write
	calls        []call
	droppedCalls int
	errs         map[string]int
	faults       map[string]int
	down         []downSpan
	faultLog     []faultNote
	rtts         []rttSet
	// lateRequests: requests the proxies delivered a node timeout or more after the client
	// sent them; orphanRequests: those of them whose connection the client had closed.
	lateRequests, orphanRequests int64
}

// runPhase runs nem for cfg.duration against servers, with a fresh set of proxies and
// Clients, and returns its record. Before it starts, every server is running, continued
// and past its restart guard, so no nemesis inherits another's faults.
func runPhase(clk clock, cfg phaseConfig, servers []*server, nem nemesis, index int) (*phase, error) {
	if err := readyServers(servers, cfg.guard); err != nil {
		return nil, err
	}
	proxies := make([][]*proxy, cfg.workers)
	defer func() {
		for _, ps := range proxies {
			for _, p := range ps {
				p.close()
			}
		}
	}()
	for w := range proxies {
		for _, s := range servers {
			p, err := newProxy(s.addr(), cfg.nodeTimeout)
			if err != nil {
				return nil, err
			}
			proxies[w] = append(proxies[w], p)
		}
	}
	tr := &tracer{clk: clk}
	clients := make([]*redlock.Client, cfg.workers)
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for w := range clients {
		addrs := make([]string, len(servers))
		for i, p := range proxies[w] {
			addrs[i] = p.addr()
		}
		c, closeClient, err := newClient(cfg.lock, addrs, tr, w)
		if err != nil {
			return nil, fmt.Errorf("worker %d: %w", w, err)
		}
		clients[w], closers = c, append(closers, closeClient)
	}
	if err := warmUp(clients, fmt.Sprintf("chaos:%d:warm:", index), max(3*cfg.nodeTimeout, 300*time.Millisecond)); err != nil {
		return nil, err
	}
	if cfg.mode != modeLease {
		if err := warmUpElection(clients, fmt.Sprintf("chaos:%d:warm-election:", index)); err != nil {
			return nil, err
		}
	}
	tr.reset() // the warm-up's calls are not the phase's

	wcfg := &workerConfig{
		name:   fmt.Sprintf("chaos:%d:%s", index, nem.name),
		clk:    clk,
		ledger: newLedger(clk),
		errs:   &errCounts{},
		ttl:    cfg.ttl,
		nextID: new(atomic.Int64),
		pause:  make([]atomic.Bool, cfg.workers),
	}
	e := &env{servers: servers, proxies: proxies, pause: wcfg.pause, ttl: cfg.ttl, guard: cfg.guard, clk: clk,
		rng: newRand(cfg.seed, uint64(index))}

	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration)
	defer cancel()
	ph := &phase{nemesis: nem, ttl: cfg.ttl, nodeTimeout: cfg.nodeTimeout, from: clk.now()}
	nemDone := make(chan struct{})
	go func() { defer close(nemDone); nem.run(ctx, e) }()
	results := make([][]grant, cfg.workers)
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seed := cfg.seed + uint64(index)<<8
			if cfg.mode == modeLease {
				results[w] = runWorker(ctx, wcfg, clients[w], w, seed)
			} else {
				results[w] = runCandidate(ctx, wcfg, clients[w], w, seed, cfg.mode == modeElectionTurns)
			}
		}()
	}
	<-ctx.Done()
	ph.to = clk.now()
	<-nemDone
	wg.Wait()

	for _, r := range results {
		ph.grants = append(ph.grants, r...)
	}
	ph.writes = wcfg.ledger.record()
	ph.calls, ph.droppedCalls = tr.record()
	ph.errs = wcfg.errs.m
	ph.faults, ph.down, ph.faultLog, ph.rtts = e.faults, e.down, e.log, e.rtts
	for _, ps := range proxies {
		for _, p := range ps {
			ph.lateRequests += p.late.Load()
			ph.orphanRequests += p.orphans.Load()
		}
	}
	return ph, nil
}

// readyServers starts every server that is not running, continues every stopped one, and
// waits until each is past its restart guard (see guardEnd), so that none abstains when the
// next nemesis starts.
func readyServers(servers []*server, guard time.Duration) error {
	var errs []error
	latest := time.Time{}
	for _, s := range servers {
		s.signal(false)
		if !s.running() {
			if err := s.start(); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if t, ok := s.upSince(); ok && t.After(latest) {
			latest = t
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if guard > 0 {
		time.Sleep(time.Until(latest.Add(guardEnd(guard) + 100*time.Millisecond)))
	}
	for _, s := range servers {
		if _, err := rawCommand(s.addr(), "PING"); err != nil && !strings.Contains(err.Error(), "NOAUTH") {
			return fmt.Errorf("server %s: %w", s.addr(), err)
		}
	}
	return nil
}

// guardEnd is how long after its start a server abstains under the restart guard: the
// acquire script votes only once uptime_in_seconds > guard, and that whole-second count
// can lag the time passed by up to a second.
func guardEnd(guard time.Duration) time.Duration {
	if guard <= 0 {
		return 0
	}
	return (guard + time.Second - 1).Truncate(time.Second) + time.Second // the library rounds the guard up to whole seconds
}
