package sim

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-redlock/redlock"
)

// livenessBound is how long after the faults healed (see scheduleNotes) a waiter that keeps
// asking may wait at most: a TTL for a lock left by a holder that died or lost its
// release, and for each client ahead of it a holding (at most 3 steps), the gap before its
// next wait (50 ms) and two node timeouts for the hand-over or the lapse of a place. (Over
// 168 seeds of 100 ms steps and a TTL of 1 s the longest such wait was 0.95 s, against
// 2.65 s.)
func livenessBound(t timing, clients int) time.Duration {
	return t.ttl + time.Duration(clients)*(3*t.step+50*time.Millisecond+2*nodeTimeout)
}

// scheduleNotes adds the plan's scheduled faults to the trace, and returns when the last
// of them healed: the fault window's end, the end of the last cut, or the time the last
// restarted server's restart guard lets it vote again, or the end of the last pause.
func scheduleNotes(rec *recorder, p *plan, guard time.Duration, to time.Time) time.Time {
	healed := to
	for _, c := range p.cuts {
		dir := "both ways"
		switch {
		case !c.toClient:
			dir = "requests lost"
		case !c.toServer:
			dir = "replies lost"
		}
		who := func(i int, s string) string {
			if i < 0 {
				return "all"
			}
			return fmt.Sprintf("%s%d", s, i)
		}
		rec.noteAt(c.from, "cut %s<->%s (%s) for %v", who(c.client, "c"), who(c.server, "s"), dir, c.to.Sub(c.from))
		rec.noteAt(c.to, "heal %s<->%s", who(c.client, "c"), who(c.server, "s"))
		healed = maxTime(healed, c.to)
	}
	for _, c := range p.crashes {
		rec.noteAt(c.at, "crash s%d (data lost)", c.server)
		rec.noteAt(c.at.Add(c.downFor), "restart s%d (empty, uptime 0, new run_id)", c.server)
		healed = maxTime(healed, c.at.Add(c.downFor+guard+time.Second))
	}
	if p.pause > 0 {
		healed = maxTime(healed, to.Add(p.pause))
	}
	for i, d := range p.deaths {
		if !d.IsZero() {
			rec.noteAt(d, "c%d dies", i)
		}
	}
	return healed
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// violation is a broken invariant, and when it broke.
type violation struct {
	at   time.Time
	text string
}

// check returns the violations of the run's record: the runs' invariants.
func check(rec *recorder, e *env, hs []holding, healed, end time.Time, bound time.Duration) []violation {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []violation
	if !e.stopOnInvalid { // twoaddrs grants nothing
		out = append(out, idle(rec, e.plan, e.ttl, hs, e.permits, e.crowd)...)
	}
	out = append(out, exclusion(rec, hs)...)
	out = append(out, permits(rec, hs)...)
	out = append(out, fencing(rec, hs)...)
	out = append(out, liveness(rec, e.plan, healed, end, bound, e.stopOnInvalid || e.mixedK)...)
	out = append(out, observed(rec)...)
	if e.leaders {
		out = append(out, leaders(rec, hs)...)
	}
	if e.fifo {
		out = append(out, fifo(rec, e.plan)...)
	}
	return out
}

// fifoSlack is how long after a grant an earlier waiter may still wait without breaking the
// order: readers handed the lock together, and a Semaphore's waiters handed permits at once,
// hear of it each after its own delay, within the node timeout.
const fifoSlack = 2 * nodeTimeout

// fifo: waiters take turns in the order they started waiting, across processes (README,
// Mutex and Semaphore): no wait is granted while another that began more than a node
// timeout before it (its first attempt has landed, and it is queued) waits on for more than
// fifoSlack. Checked where every node answers within the node timeout (plan.reliable): a
// waiter cut off from a node, or a node that lost its queue, rightly loses its place there.
// The one documented exception, a reader of a Client overtaking a second writer of that
// Client (docs/design.md, Local queue), does not arise: each client has one actor, which
// waits for one thing at a time.
func fifo(rec *recorder, p *plan) []violation {
	if !p.reliable() {
		return nil
	}
	var out []violation
	for _, late := range rec.waits {
		if !late.got {
			continue
		}
		for _, early := range rec.waits {
			if early.client == late.client || !early.from.Add(nodeTimeout).Before(late.from) || !early.from.Before(late.to) {
				continue
			}
			if early.to.IsZero() || early.to.After(late.to.Add(fifoSlack)) {
				until := "the run's end"
				if !early.to.IsZero() {
					until = rec.since(early.to)
				}
				out = append(out, violation{late.to, fmt.Sprintf("c%d, waiting since %s, was granted at %s while c%d, waiting since %s, waited on until %s: waiters take turns in the order they started waiting",
					late.client, rec.since(late.from), rec.since(late.to), early.client, rec.since(early.from), until)})
				break
			}
		}
	}
	return out
}

// exclusion: no writer or leader overlaps another holding of a name it holds (a holding
// of several names holds each of them).
func exclusion(rec *recorder, hs []holding) []violation {
	var out []violation
	for i, a := range hs {
		for _, b := range hs[i+1:] {
			if a.role == permit || b.role == permit || (a.role == reader && b.role == reader) || !a.shares(&b) {
				continue
			}
			if a.from.Before(b.to) && b.from.Before(a.to) {
				out = append(out, violation{maxTime(a.from, b.from), fmt.Sprintf("c%d's %s%s [%s, %s] overlaps c%d's %s%s [%s, %s]",
					a.client, a.role, of(&a), rec.since(a.from), rec.since(a.to),
					b.client, b.role, of(&b), rec.since(b.from), rec.since(b.to))})
			}
		}
	}
	return out
}

// of describes the names h holds, for a violation: "" for the run's one lock.
func of(h *holding) string {
	if h.names == nil {
		return ""
	}
	return " of " + strings.Join(h.names, ",")
}

// permits: never more holders of a Semaphore's permits than any of them counts.
func permits(rec *recorder, hs []holding) []violation {
	var out []violation
	for _, a := range hs {
		if a.role != permit {
			continue
		}
		n, k := 0, a.k
		for _, b := range hs {
			if b.role == permit && !b.from.After(a.from) && b.to.After(a.from) {
				n, k = n+1, min(k, b.k)
			}
		}
		if n > k {
			out = append(out, violation{a.from, fmt.Sprintf("%d permit holders when c%d is granted, and one of them counts %d", n, a.client, k)})
		}
	}
	return out
}

// fencing: per name, tokens increase strictly from one fenced holding of it to the next
// (a holding of several names has one token, which counts for each), and the name's
// resource never accepted a write of a holding after one of a holding granted later.
func fencing(rec *recorder, hs []holding) []violation {
	var out []violation
	prev := map[string]*holding{}
	for i := range hs {
		h := &hs[i]
		if !h.fenced || h.role == permit {
			continue
		}
		for _, name := range h.on() {
			if p := prev[name]; p != nil && h.token <= p.token {
				out = append(out, violation{h.from, fmt.Sprintf("c%d granted token %d%s after c%d's %d%s%s", h.client, h.token, of(h), p.client, p.token, of(p), named(name))})
			}
			prev[name] = h
		}
	}
	newest := map[string]int{}
	for _, w := range rec.writes {
		if !w.accepted {
			continue
		}
		n, seen := newest[w.name]
		if seen && hs[w.holding].from.Before(hs[n].from) {
			out = append(out, violation{w.at, fmt.Sprintf("the resource%s accepted c%d's write (token %d) after c%d's (token %d), granted later",
				named(w.name), hs[w.holding].client, w.token, hs[n].client, hs[n].token)})
		}
		if !seen || hs[w.holding].from.After(hs[n].from) {
			newest[w.name] = w.holding
		}
	}
	return out
}

// named names a name for a violation: "" for the run's one lock.
func named(name string) string {
	if name == lockName {
		return ""
	}
	return " (name " + name + ")"
}

// longestWait returns the longest time after the faults healed that a wait which keeps
// asking took to be granted (or was still waiting at end).
func longestWait(rec *recorder, p *plan, healed, end time.Time) time.Duration {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var longest time.Duration
	for _, w := range rec.waits {
		if !w.keeps || !p.deaths[w.client].IsZero() {
			continue
		}
		to := w.to
		if to.IsZero() {
			to = end
		}
		longest = max(longest, to.Sub(maxTime(w.from, healed)))
	}
	return longest
}

// liveness: once the faults healed, a wait that keeps asking is granted within bound; and
// such a wait, which has no deadline of its own, never ends without a grant before the
// run's end: it asks until granted (a wait that gave up would otherwise pass, its client
// asking again with a new wait, whose time is counted afresh), or ends with an error its
// contract gives (documented: Campaign's lease ended before its value was recorded).
// invalidOK: a refusal of the configuration (ErrInvalid) is expected (twoaddrs; a
// Semaphore whose clients count different Ks).
func liveness(rec *recorder, p *plan, healed, end time.Time, bound time.Duration, invalidOK bool) []violation {
	var out []violation
	for _, w := range rec.waits {
		if !w.keeps || !p.deaths[w.client].IsZero() {
			continue
		}
		if !w.got && !w.to.IsZero() && w.to.Before(end) && !(invalidOK && w.invalid) && !w.documented {
			out = append(out, violation{w.to, fmt.Sprintf("c%d's wait that keeps asking, from %s, ended at %s before the run's end without a grant: %s",
				w.client, rec.since(w.from), rec.since(w.to), w.err)})
		}
		from := maxTime(w.from, healed)
		to := w.to
		if to.IsZero() {
			to = end
		}
		if to.Sub(from) > bound && (w.got || !to.Before(end)) {
			out = append(out, violation{from.Add(bound), fmt.Sprintf("c%d waited from %s to %s (granted: %v), over the bound of %v after the faults healed at %s",
				w.client, rec.since(w.from), rec.since(to), w.got, bound, rec.since(healed))})
		}
	}
	return out
}

// idleBound returns how long a wait that keeps asking may wait while the lock is free,
// under faults of kind k, and whether that is checked at all: 50 ms where the faults lose
// and hold up nothing (clocks within the drift allowance; the longest such wait over 168
// seeds was 4 ms), and 7 node timeouts where they hold messages up within the node
// timeout (delays, and a script run again up to a node timeout later; the longest
// over 84 seeds of each was 181 and 377 ms); each plus 4% of the TTL: a lease that ran out
// unextended (a permit's, say) leaves its keys on the servers for the drift allowance and
// what a slow clock adds (at a TTL of 2.3 s, 86 ms: seed 44). A lock left behind by no
// holder stands for a TTL.
func idleBound(k Kind, ttl time.Duration) (time.Duration, bool) {
	switch k {
	case None, Clock:
		return 50*time.Millisecond + ttl/25, true
	case Delay, Twice:
		return 7*nodeTimeout + ttl/25, true
	}
	return 0, false
}

// idle: a wait that keeps asking never waits longer than idleBound while the lock is free.
// Behind a crowd of lapsed waiters (more than a script forgets in one call: 64), a call that
// runs out of its scan reads as one behind a live waiter, and a release hands nothing (as
// design.md says): the waiter takes the lock at a later attempt, one refresh interval (2.5
// node timeouts) per 64 lapsed waiters, so the bound has two more of those.
func idle(rec *recorder, p *plan, ttl time.Duration, hs []holding, permits int, crowd bool) []violation {
	bound, ok := idleBound(p.kind, ttl)
	if crowd {
		bound += 2 * nodeTimeout * 5 / 2 * (crowdReaders + 63) / 64
	}
	if !ok {
		return nil
	}
	if d, at := longestIdle(rec, p, hs, permits); d > bound {
		return []violation{{at.Add(bound), fmt.Sprintf("a waiter waited %v from %s while the lock was free, over the bound of %v under %s faults", d, rec.since(at), bound, p.kind)}}
	}
	return nil
}

// longestIdle returns the longest time in which a wait that keeps asking waited while the
// lock was free (no holding; for permits, fewer than a holding per permit), and when it
// began.
// Called with rec.mu held.
func longestIdle(rec *recorder, p *plan, hs []holding, permits int) (time.Duration, time.Time) {
	var longest time.Duration
	var at time.Time
	for _, w := range rec.waits {
		if !w.keeps || !p.deaths[w.client].IsZero() || w.to.IsZero() {
			continue
		}
		// The instants at which the number of holdings changes, inside the wait.
		type edge struct {
			at time.Time
			d  int
		}
		var edges []edge
		busy := 0
		for _, h := range hs {
			to := h.busyUntil()
			if h.client == w.client || !h.from.Before(w.to) || !to.After(w.from) {
				continue
			}
			if h.from.After(w.from) {
				edges = append(edges, edge{h.from, 1})
			} else {
				busy++
			}
			if to.Before(w.to) {
				edges = append(edges, edge{to, -1})
			}
		}
		slices.SortStableFunc(edges, func(a, b edge) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return b.d - a.d // a grant at the instant of a release: never idle
		})
		need := 1
		if permits > 0 {
			need = permits
		}
		idleFrom := w.from
		if busy >= need {
			idleFrom = time.Time{}
		}
		for _, e := range append(edges, edge{w.to, 0}) {
			if !idleFrom.IsZero() && e.at.Sub(idleFrom) > longest {
				longest, at = e.at.Sub(idleFrom), idleFrom
			}
			busy += e.d
			switch {
			case busy >= need:
				idleFrom = time.Time{}
			case idleFrom.IsZero():
				idleFrom = e.at
			}
		}
	}
	return longest, at
}

// observed: an observer sees only values that a candidate campaigned with before.
func observed(rec *recorder) []violation {
	var out []violation
	for _, o := range rec.observed {
		if o.text == "" {
			continue
		}
		if !slices.ContainsFunc(rec.events, func(e event) bool {
			return e.text == fmt.Sprintf("c%s campaigns %s", clientOf(o.text), o.text) && !e.at.After(o.at)
		}) {
			out = append(out, violation{o.at, fmt.Sprintf("the observer saw %q, which no candidate had campaigned with", o.text)})
		}
	}
	return out
}

// leaders: while a leader validly leads (its holding, less two node timeouts at each end
// for the reads under way as it began or ended) and its lock stands on a quorum of the
// servers (a crash at N = 1 takes the lock and the record at once; the leader learns of it
// at its next extension), Leader returns its value, or an error
// other than ErrNoLeader (too few nodes answered), and Observe never sends "" (README:
// Leader returns the leader's value; design.md: the record stands where the lock stands).
func leaders(rec *recorder, hs []holding) []violation {
	var out []violation
	during := func(from, to time.Time) *holding {
		for i := range hs {
			if h := &hs[i]; h.role == leader && !from.Before(h.from.Add(2*nodeTimeout)) && !to.After(h.to.Add(-2*nodeTimeout)) {
				return h
			}
		}
		return nil
	}
	for _, r := range rec.reads {
		if !r.standing || (r.err != nil && !errors.Is(r.err, redlock.ErrNoLeader)) {
			continue
		}
		if h := during(r.from, r.to); h != nil && (r.err != nil || r.value != h.value) {
			said := fmt.Sprintf("%q", r.value)
			if r.err != nil {
				said = r.err.Error()
			}
			out = append(out, violation{r.to, fmt.Sprintf("Leader, called at %s, said %s at %s, while c%d led with %q (granted at %s)",
				rec.since(r.from), said, rec.since(r.to), h.client, h.value, rec.since(h.from))})
		}
	}
	for _, i := range rec.standing {
		if o := rec.observed[i]; o.text == "" && during(o.at, o.at) != nil {
			h := during(o.at, o.at)
			out = append(out, violation{o.at, fmt.Sprintf("the observer saw no leader at %s, while c%d led with %q (granted at %s)",
				rec.since(o.at), h.client, h.value, rec.since(h.from))})
		}
	}
	return out
}

// clientOf returns the client number in an Election value "c<client>#<n>".
func clientOf(value string) string {
	var c, n int
	if _, err := fmt.Sscanf(value, "c%d#%d", &c, &n); err != nil {
		return "?"
	}
	return fmt.Sprint(c)
}

// heldShare returns the share of [from, to) in which some holding was held.
func heldShare(rec *recorder, from, to time.Time) float64 {
	rec.mu.Lock()
	hs := slices.Clone(rec.holdings)
	rec.mu.Unlock()
	slices.SortFunc(hs, func(a, b holding) int { return cmp.Compare(a.from.UnixNano(), b.from.UnixNano()) })
	var held time.Duration
	cursor := from
	for _, h := range hs {
		end := h.to
		if end.IsZero() || end.After(to) {
			end = to
		}
		start := maxTime(h.from, cursor)
		if end.After(start) {
			held += end.Sub(start)
			cursor = end
		}
	}
	return float64(held) / float64(to.Sub(from))
}
