package main

import (
	"fmt"
	"slices"
	"time"
)

// verdict is what the checks found in one nemesis's record, and what it measured.
type verdict struct {
	name         string
	acquisitions int
	held         float64 // share of the window in which some worker held a valid lease
	// quorumUp is the share of the window in which a quorum of servers was surely able to
	// vote: a server counts as down while blackholed for all, stopped, dead, and after a
	// restart for the longest the restart guard can make it abstain (see guardEnd). It is
	// a lower bound of the time a quorum could vote, not a ceiling of held: a lease granted
	// before a quorum went down stays valid until its Until.
	quorumUp float64
	// ceiling, where the nemesis delays the servers (latency; else negative), bounds held
	// from above for any lock that needs a quorum's answers: see handOverCeiling.
	ceiling  float64
	p50, p99 time.Duration
	longest  time.Duration // the longest Acquire that succeeded
	extended int
	paused   int

	exclusion  int // two leases valid at once
	tokenOrder int // a lease's token not above the previous lease's
	stale      int // a superseded lease's write accepted

	accepted, rejected int
	staleRejected      int // superseded writes the ledger rejected (fencing at work)
	lateUnsuperseded   int // writes after the validity, accepted before any newer lease wrote
	examples           []string
	gaps               gapStats
	leases             []grant // the leases that were held, by when they were got
}

func (v verdict) violations() int { return v.exclusion + v.tokenOrder + v.stale }

const maxExamples = 5

func (v *verdict) example(format string, args ...any) {
	if len(v.examples) < maxExamples {
		v.examples = append(v.examples, fmt.Sprintf(format, args...))
	}
}

// check runs the checks on ph's record.
//
// A lease is held from the moment Acquire returned it until the earlier of the start of
// its Release and the end of its validity as the library reports it (Lease.Until after the
// last successful extension), which the library measures conservatively from the start of
// the attempt that won, not from when the reply came; a lease returned with its validity
// already over (the process was descheduled after the library's check) was never held.
//
//   - mutual exclusion: no two leases held at once (sweeping the intervals in the order
//     they began);
//   - token order: each lease's fencing token is larger than the previous lease's, in the
//     order the leases began;
//   - stale writes: a lease is superseded once a lease granted after it has written to the
//     ledger; the ledger must reject every later write of the superseded lease. A write
//     made after the writer's validity ended (a paused worker's) but before any newer lease
//     wrote is accepted, and rightly: no newer token exists at the ledger to fence it out,
//     and the ledger's order is still the tokens' order. It is counted apart, as "late".
func check(ph *phase, quorum, nodes int) verdict {
	v := verdict{name: ph.nemesis.name, acquisitions: len(ph.grants)}
	grants := slices.Clone(ph.grants)
	slices.SortFunc(grants, func(a, b grant) int { return cmpDur(a.got, b.got) })
	byID := map[int64]*grant{}
	var waits []time.Duration
	var held []grant
	for i := range grants {
		g := &grants[i]
		byID[g.id] = g
		waits = append(waits, g.got-g.asked)
		v.extended += g.extended
		if g.paused {
			v.paused++
		}
		if g.end > g.got {
			held = append(held, *g)
		}
	}
	v.p50, v.p99, v.longest = percentile(waits, 0.50), percentile(waits, 0.99), percentile(waits, 1)

	// Mutual exclusion and token order, over the leases that were held.
	var last *grant // the lease whose validity ends last so far
	for i := range held {
		g := &held[i]
		if last != nil && g.got < last.end {
			v.exclusion++
			v.example("mutual exclusion: worker %d's lease (token %d, held %s-%s) and worker %d's (token %d, held %s-%s) overlap by %s",
				last.worker, last.token, ms(last.got), ms(last.end), g.worker, g.token, ms(g.got), ms(g.end), min(last.end, g.end)-g.got)
		}
		if i > 0 && g.token <= held[i-1].token {
			v.tokenOrder++
			p := &held[i-1]
			v.example("token order: worker %d's lease at %s got token %d, not above token %d of worker %d's lease at %s",
				g.worker, ms(g.got), g.token, p.token, p.worker, ms(p.got))
		}
		if last == nil || g.end > last.end {
			last = g
		}
	}

	// Stale writes, in the ledger's order.
	var newestWriter *grant // of the leases that wrote so far, the one granted last
	for _, w := range ph.writes {
		g := byID[w.lease]
		if g == nil {
			continue
		}
		if w.accepted {
			v.accepted++
		} else {
			v.rejected++
		}
		superseded := newestWriter != nil && newestWriter.got > g.got
		switch {
		case superseded && w.accepted:
			v.stale++
			v.example("stale write accepted: worker %d wrote with token %d at %s, after worker %d's newer lease (token %d, granted %s) had written",
				g.worker, w.token, ms(w.at), newestWriter.worker, newestWriter.token, ms(newestWriter.got))
		case superseded:
			v.staleRejected++
		case w.accepted && w.at > g.end:
			v.lateUnsuperseded++
		}
		if newestWriter == nil || g.got > newestWriter.got {
			newestWriter = g
		}
	}

	v.held = coverage(held, ph.from, ph.to)
	v.gaps, v.leases = gapsOf(ph, held), held
	v.quorumUp = quorumShare(ph.down, nodes, quorum, ph.from, ph.to)
	v.ceiling = handOverCeiling(ph, v.gaps, quorum)
	return v
}

// coverage returns the share of [from, to] covered by the union of the leases' intervals.
func coverage(held []grant, from, to time.Duration) float64 {
	if to <= from {
		return 0
	}
	var total, reach time.Duration
	reach = from
	for _, g := range held { // sorted by got
		lo, hi := max(g.got, reach), min(g.end, to)
		if hi > lo {
			total += hi - lo
			reach = hi
		}
	}
	return float64(total) / float64(to-from)
}

// quorumShare returns the share of [from, to] in which at least quorum of the nodes were
// not in a down span.
func quorumShare(down []downSpan, nodes, quorum int, from, to time.Duration) float64 {
	if to <= from {
		return 0
	}
	type edge struct {
		at     time.Duration
		server int
		delta  int
	}
	var edges []edge
	for _, d := range down {
		if d.to <= from || d.from >= to {
			continue
		}
		edges = append(edges, edge{max(d.from, from), d.server, +1}, edge{min(d.to, to), d.server, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmpDur(a.at, b.at) })
	depth := make([]int, nodes) // overlapping spans per server
	downNow, prev := 0, from
	var lost time.Duration
	for _, e := range edges {
		if e.at > prev {
			if nodes-downNow < quorum {
				lost += e.at - prev
			}
			prev = e.at
		}
		before := depth[e.server] > 0
		depth[e.server] += e.delta
		switch after := depth[e.server] > 0; {
		case after && !before:
			downNow++
		case before && !after:
			downNow--
		}
	}
	if nodes-downNow < quorum && to > prev {
		lost += to - prev
	}
	return 1 - float64(lost)/float64(to-from)
}

// percentile returns the q-quantile (nearest rank) of ds, 0 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func cmpDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ms formats d on the clock in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

// handOverCeiling bounds from above the share of the window any lock could have held under
// ph's server delays (ph.rtts) and node timeout, with the holdings ph's workers made: each
// gap between holdings cut to the least it could have lasted (see leastGap). The bound is
// the held time over itself plus the gaps so cut. It returns -1 when the nemesis did not
// delay the servers.
func handOverCeiling(ph *phase, gs gapStats, quorum int) float64 {
	if len(ph.rtts) == 0 || ph.to <= ph.from {
		return -1
	}
	var gaps, least time.Duration
	for _, s := range gs.spans {
		gaps += s[1] - s[0]
		least += leastGap(ph.rtts, s[0], s[1], quorum, ph.nodeTimeout)
	}
	held := ph.to - ph.from - gaps
	if held+least <= 0 {
		return 0
	}
	return float64(held) / float64(held+least)
}

// leastGap returns the least that a gap from start to end could have lasted under the
// delays the proxies added (rtts, one step each, in order), for a lock that needs a
// quorum's replies, each within timeout (the node timeout): a holder learns that it holds
// only from a quorum's replies, and no server can grant before the release (or the expiry)
// of the lock reached it, so the gap lasts at least the quorum-th smallest round trip of
// a step in force during it, counted from the later of the gap's start and the step's. A
// step whose quorum-th smallest round trip is the node timeout or more lets no lock be
// taken at all. The first step counts from the phase's start (the nemesis sets it as the
// workers start). The servers' own time and the network's are left out, which makes the
// bound lower. It returns end - start if no step in force allowed a hand-over.
func leastGap(rtts []rttSet, start, end time.Duration, quorum int, timeout time.Duration) time.Duration {
	least := end - start
	for k, r := range rtts {
		from, to := r.at, end
		if k == 0 {
			from = min(from, start)
		}
		if k+1 < len(rtts) {
			to = rtts[k+1].at
		}
		if to <= start || from >= end {
			continue // not in force during the gap
		}
		rtt := slices.Clone(r.rtt)
		slices.Sort(rtt)
		if q := rtt[quorum-1]; q < timeout {
			least = min(least, max(from, start)-start+q)
		}
	}
	return least
}
