package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// gapStats says where the time went when no worker held the lock: the gaps between one
// holding and the next (and before the first), with the time of those in which some node
// call timed out, some acquire was refused because a waiter was ahead (behind-waiter), or
// some node abstained under the restart guard. A gap may be in several classes.
type gapStats struct {
	gaps    []time.Duration
	spans   [][2]time.Duration // each gap's start and end
	total   time.Duration
	byClass map[string]time.Duration
	count   map[string]int
}

// gapsOf measures the gaps of ph between the union of the held leases' intervals.
func gapsOf(ph *phase, held []grant) gapStats {
	gs := gapStats{byClass: map[string]time.Duration{}, count: map[string]int{}}
	calls := slices.Clone(ph.calls)
	slices.SortFunc(calls, func(a, b call) int { return cmpDur(a.start, b.start) })
	reach := ph.from
	var spans [][2]time.Duration
	for _, g := range held { // sorted by got
		if g.got > reach && g.got <= ph.to {
			spans = append(spans, [2]time.Duration{reach, g.got})
		}
		reach = max(reach, g.end)
	}
	if reach < ph.to {
		spans = append(spans, [2]time.Duration{reach, ph.to})
	}
	gs.spans = spans
	for _, s := range spans {
		d := s[1] - s[0]
		gs.gaps = append(gs.gaps, d)
		gs.total += d
		classes := map[string]bool{}
		i, _ := slices.BinarySearchFunc(calls, s[0], func(c call, t time.Duration) int { return cmpDur(c.start, t) })
		for ; i < len(calls) && calls[i].start < s[1]; i++ {
			c := calls[i]
			switch {
			case c.err == "timeout":
				classes["node timeout"] = true
			case c.err != "":
				classes["other node error"] = true
			case c.script == "acquire" && replyKind(c) == "behind-waiter":
				classes["behind-waiter"] = true
			case c.script == "acquire" && replyKind(c) == "abstain":
				classes["abstain"] = true
			}
		}
		if len(classes) == 0 {
			classes["no error"] = true
		}
		for k := range classes {
			gs.byClass[k] += d
			gs.count[k]++
		}
	}
	return gs
}

func (gs gapStats) line(window time.Duration) string {
	var parts []string
	for _, k := range sortedKeys(gs.byClass) {
		parts = append(parts, fmt.Sprintf("%s %d gaps %s", k, gs.count[k], share(gs.byClass[k], window)))
	}
	return fmt.Sprintf("gaps (no valid holder) %d, %s of the window, each p50/p99/max %s; by what the calls in them met: %s",
		len(gs.gaps), share(gs.total, window), pct3(gs.gaps), strings.Join(parts, ", "))
}

func share(d, window time.Duration) string {
	if window <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(d)/float64(window))
}

// dump prints the gaps of at least min (at most maxDumped of them), each with the holdings
// on either side, the fault changes in force or made during it, and every call that was
// under way in it, with the other calls of their attempts: where the time of a long gap
// went, call by call. Times are from the start of the phase.
func (gs gapStats) dump(w io.Writer, ph *phase, held []grant, quorum int, min time.Duration) {
	const maxDumped = 30
	calls := slices.Clone(ph.calls)
	slices.SortFunc(calls, func(a, b call) int { return cmpDur(a.start, b.start) })
	rel := func(t time.Duration) string {
		return fmt.Sprintf("%7.1fms", float64(t-ph.from)/float64(time.Millisecond))
	}
	dumped := 0
	for _, s := range gs.spans {
		if s[1]-s[0] < min {
			continue
		}
		if dumped++; dumped > maxDumped {
			fmt.Fprintf(w, "gap dump: more gaps of %s or more not shown\n", min)
			return
		}
		fmt.Fprintf(w, "gap %s to %s (%s", rel(s[0]), rel(s[1]), s[1]-s[0])
		if len(ph.rtts) > 0 {
			fmt.Fprintf(w, "; the least it could last %s", leastGap(ph.rtts, s[0], s[1], quorum, ph.nodeTimeout))
		}
		fmt.Fprint(w, "):")
		for _, g := range held {
			if g.end == s[0] {
				fmt.Fprintf(w, " worker %d released (token %d);", g.worker, g.token)
			}
			if g.got == s[1] {
				fmt.Fprintf(w, " worker %d got token %d after waiting %s;", g.worker, g.token, g.got-g.asked)
			}
		}
		fmt.Fprintln(w)
		for i, f := range ph.faultLog {
			if f.at < s[1] && (i+1 == len(ph.faultLog) || ph.faultLog[i+1].at >= s[0]) {
				fmt.Fprintf(w, "  %s fault: %s\n", rel(f.at), f.text)
			}
		}
		// The calls under way in the gap, and the other calls of their attempts.
		tokens := map[string]bool{}
		for _, c := range calls {
			if c.start >= s[1] {
				break
			}
			if c.end >= s[0] {
				tokens[c.token] = true
			}
		}
		for _, c := range calls {
			if c.start >= s[1] {
				break
			}
			if c.end < s[0] && !tokens[c.token] {
				continue
			}
			fmt.Fprintf(w, "  %s-%s w%d n%d %-7s %s %s\n", rel(c.start), rel(c.end), c.worker, c.node, c.script, tokenTail(c.token), replyKind(c))
		}
	}
}

// tokenTail shortens an attempt's token to its last 6 characters, enough to tell attempts
// apart in a dump.
func tokenTail(t string) string {
	if len(t) > 6 {
		return t[len(t)-6:]
	}
	return t
}
