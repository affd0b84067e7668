package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// evidence is what the traced calls say about where availability went in one nemesis.
type evidence struct {
	// replies: the acquire script's replies by kind (yes, held, behind-waiter, abstain,
	// and each error kind), with their latencies.
	replies map[string][]time.Duration
	// other scripts' outcomes: "extend:ok", "extend:timeout", "raise:reset"...
	others map[string][]time.Duration

	attempts, won int
	handed        int // attempts refused by a quorum and then handed the lock by a release
	// failed attempts by how they failed: refused (a quorum refused: held, or a waiter
	// ahead), split (some yes, no quorum, the rest refused), noquorum (errors or abstentions
	// kept a quorum out of reach)
	failed map[string]int
	// decide: for failed attempts that got keys, from the attempt's start to the start of
	// the first release of those keys (when core gave up on the attempt)
	decide []time.Duration
	// partial: per key a failed attempt got, from the yes reply to the start of its release
	partial   []time.Duration
	unrelease int // partial keys with no release in the record (left to expire by TTL)
	// blockedByPartial: refusals (held) that came while another worker's failed attempt held
	// that node's key, i.e. partial keys blocking a competitor
	blockedByPartial, refusalsHeld int
	dropped                        int
}

// gather reads ph's calls into evidence; quorum decides which attempts won.
func gather(ph *phase, quorum int) evidence {
	ev := evidence{replies: map[string][]time.Duration{}, others: map[string][]time.Duration{}, failed: map[string]int{}, dropped: ph.droppedCalls}
	type attempt struct {
		worker                  int
		start                   time.Duration
		yes, refused, errs, abs int
		yesAt                   map[int]time.Duration // node -> reply time
	}
	attempts := map[string]*attempt{}
	releases := map[string]map[int]time.Duration{} // token -> node -> first abandon release start
	holders := map[string]bool{}                   // tokens that a holder's release (or a leaving waiter) sent
	for _, c := range ph.calls {
		d := c.end - c.start
		switch c.script {
		case "acquire":
			k := replyKind(c)
			ev.replies[k] = append(ev.replies[k], d)
			a := attempts[c.token]
			if a == nil {
				a = &attempt{worker: c.worker, start: c.start, yesAt: map[int]time.Duration{}}
				attempts[c.token] = a
			}
			a.start = min(a.start, c.start)
			switch k {
			case "yes":
				a.yes++
				a.yesAt[c.node] = c.end
			case "held", "behind-waiter":
				a.refused++
			case "abstain":
				a.abs++
			default:
				a.errs++
			}
		case "release":
			if c.abandon {
				if releases[c.token] == nil {
					releases[c.token] = map[int]time.Duration{}
				}
				if t, ok := releases[c.token][c.node]; !ok || c.start < t {
					releases[c.token][c.node] = c.start
				}
			} else {
				holders[c.token] = true
			}
			fallthrough
		default:
			k := c.script + ":" + orOK(c.err)
			ev.others[k] = append(ev.others[k], d)
		}
	}

	// Partial keys: per node, the spans a failed attempt held its key.
	type span struct {
		worker   int
		from, to time.Duration
	}
	partialByNode := map[int][]span{}
	for token, a := range attempts {
		ev.attempts++
		if a.yes >= quorum {
			ev.won++
			continue
		}
		if holders[token] {
			ev.handed++
			continue
		}
		switch {
		case a.yes == 0 && a.refused > 0 && a.errs+a.abs == 0:
			ev.failed["refused"]++
		case a.errs+a.abs == 0:
			ev.failed["split"]++
		default:
			ev.failed["noquorum"]++
		}
		if a.yes == 0 {
			continue
		}
		rel := releases[token]
		first := time.Duration(-1)
		for node, at := range a.yesAt {
			to, ok := rel[node]
			if !ok {
				ev.unrelease++
				to = at + ph.ttl
			} else {
				ev.partial = append(ev.partial, to-at)
				if first < 0 || to < first {
					first = to
				}
			}
			partialByNode[node] = append(partialByNode[node], span{a.worker, at, to})
		}
		if first >= 0 {
			ev.decide = append(ev.decide, first-a.start)
		}
	}
	for _, c := range ph.calls {
		if c.script != "acquire" || replyKind(c) != "held" {
			continue
		}
		ev.refusalsHeld++
		for _, s := range partialByNode[c.node] {
			if s.worker != c.worker && s.from <= c.end && c.end <= s.to {
				ev.blockedByPartial++
				break
			}
		}
	}
	return ev
}

// replyKind names an acquire reply: yes, held (another owner holds it), behind-waiter (free,
// but a live waiter queued first), abstain (restart guard), or the error's kind.
func replyKind(c call) string {
	switch {
	case c.err != "":
		return "err:" + c.err
	case c.status == 1:
		return "yes"
	case c.status == 0 && c.value == 0 && c.script == "acquire":
		return "behind-waiter"
	case c.status == 0:
		return "held"
	case c.status < 0:
		return "abstain"
	}
	return fmt.Sprintf("status:%d", c.status)
}

func orOK(err string) string {
	if err == "" {
		return "ok"
	}
	return err
}

// lines formats the evidence as indented text lines.
func (ev evidence) lines() []string {
	var out []string
	out = append(out, "acquire replies (count, latency p50/p99/max): "+durs(ev.replies))
	out = append(out, "other calls: "+durs(ev.others))
	var failed []string
	for _, k := range sortedKeys(ev.failed) {
		failed = append(failed, fmt.Sprintf("%s %d", k, ev.failed[k]))
	}
	out = append(out, fmt.Sprintf("attempts %d, won by a quorum of yes %d, refused and then handed over %d, failed: %s", ev.attempts, ev.won, ev.handed, strings.Join(failed, ", ")))
	out = append(out, fmt.Sprintf("failed attempts with partial keys: %d; attempt start to first release of its keys p50/p99/max %s; each partial key held p50/p99/max %s; %d partial keys never released (left to their TTL)",
		len(ev.decide), pct3(ev.decide), pct3(ev.partial), ev.unrelease))
	out = append(out, fmt.Sprintf("'held' refusals %d, of which %d came while another worker's failed attempt held that node's key", ev.refusalsHeld, ev.blockedByPartial))
	if ev.dropped > 0 {
		out = append(out, fmt.Sprintf("(%d calls beyond the trace's bound were not recorded)", ev.dropped))
	}
	return out
}

func durs(m map[string][]time.Duration) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d (%s)", k, len(m[k]), pct3(m[k])))
	}
	return strings.Join(parts, "; ")
}

func pct3(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s/%s/%s", short(percentile(ds, 0.5)), short(percentile(ds, 0.99)), short(percentile(ds, 1)))
}

// short formats d in ms with one decimal below 10 ms.
func short(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return slices.Clip(keys)
}
