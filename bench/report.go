package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"
)

type rkey struct {
	impl string
	n, g int
}

type throughputResult struct {
	rate float64
	errs int
	// per pair: client and server CPU µs, client write system calls (-1: unknown)
	clientCPU, serverCPU, writes float64
}

type results struct {
	unc  map[rkey]uncontendedResult
	tp   map[rkey]throughputResult
	ho   map[rkey]handoffResult
	fail map[rkey]error
	// idle and hot: PING round trips to one node right after sleeping a holder's hold time,
	// and back to back (the handoff section's floor)
	idle, hot latency
	cost      []costRow
}

const pingKey, pingAllKey = "ping", "ping-all"

func measureAll(ctx context.Context, cfg config, addrs []string, log io.Writer) *results {
	r := &results{unc: map[rkey]uncontendedResult{}, tp: map[rkey]throughputResult{}, ho: map[rkey]handoffResult{}, fail: map[rkey]error{}}
	fail := func(k rkey, test string, err error) {
		r.fail[k] = err
		fmt.Fprintf(log, "raw %s impl=%s n=%d g=%d ERROR %v\n", test, k.impl, k.n, k.g, err)
	}
	rounds := max(cfg.rounds, 1)
	if cfg.tests["uncontended"] {
		for _, n := range cfg.ns {
			type row struct {
				k rkey
				u *uncontendedRun
			}
			var rows []row
			add := func(key string, c client, err error) {
				k := rkey{key, n, 0}
				if err != nil {
					fail(k, "uncontended", err)
					return
				}
				u := &uncontendedRun{ctx: ctx, c: c, l: c.Locker(fmt.Sprintf("unc:%s:%d", key, n))}
				if err := u.warm(); err != nil {
					c.Close()
					fail(k, "uncontended", err)
					return
				}
				rows = append(rows, row{k, u})
			}
			if cfg.ping {
				add(pingKey, newPing(ctx, addrs[:1]), nil)
			}
			if cfg.ping && n > 1 {
				add(pingAllKey, newPing(ctx, addrs[:n]), nil)
			}
			for _, im := range cfg.impls {
				if im.single && n > 1 || im.only != "" && im.only != "uncontended" {
					continue
				}
				c, err := im.new(addrs[:n], false)
				add(im.key, c, err)
			}
			for range rounds {
				for i := 0; i < len(rows); i++ {
					if err := rows[i].u.round(cfg.dur/time.Duration(rounds), cfg.maxCount/rounds); err != nil {
						rows[i].u.c.Close()
						fail(rows[i].k, "uncontended", err)
						rows = slices.Delete(rows, i, i+1)
						i--
					}
				}
			}
			for _, row := range rows {
				row.u.c.Close()
				u := row.u.result()
				r.unc[row.k] = u
				fmt.Fprintf(log, "raw uncontended impl=%s n=%d rounds=%d pairs=%d p50=%v p90=%v p99=%v max=%v allocs/pair=%.1f bytes/pair=%.0f errors=%d\n",
					row.k.impl, n, rounds, len(u.lat), u.lat.pct(.5), u.lat.pct(.9), u.lat.pct(.99), u.lat.pct(1), u.allocs, u.byts, u.errs)
			}
		}
	}
	if cfg.tests["throughput"] {
		for _, n := range cfg.ns {
			type row struct {
				k rkey
				t *throughputRun
			}
			var rows []row
			for _, im := range cfg.impls {
				if im.single && n > 1 || im.only != "" && im.only != "throughput" {
					continue
				}
				k := rkey{im.key, n, 0}
				c, err := im.new(addrs[:n], false)
				if err != nil {
					fail(k, "throughput", err)
					continue
				}
				rows = append(rows, row{k, newThroughputRun(ctx, c, addrs[:n], fmt.Sprintf("tp:%s:%d", im.key, n), cfg.goroutines, cfg.names)})
			}
			for round := range rounds {
				warm := 100 * time.Millisecond
				if round == 0 {
					warm = 300 * time.Millisecond
				}
				for _, row := range rows {
					row.t.round(warm, cfg.dur/time.Duration(rounds))
				}
			}
			for _, row := range rows {
				row.t.c.Close()
				t := row.t
				cl, sv, wr := t.perPair()
				r.tp[row.k] = throughputResult{t.rate(), int(t.errs), cl, sv, wr}
				fmt.Fprintf(log, "raw throughput impl=%s n=%d goroutines=%d names=%d rounds=%d pairs=%d seconds=%.2f pairs/s=%.0f client-cpu-us/pair=%.2f server-cpu-us/pair=%.2f client-writes/pair=%.2f errors=%d",
					row.k.impl, n, cfg.goroutines, cfg.goroutines*cfg.names, rounds, t.pairs, t.elapsed.Seconds(), t.rate(), cl, sv, wr, t.errs)
				if t.lastErr != nil {
					fmt.Fprintf(log, " last-error=%q", t.lastErr.Error())
				}
				fmt.Fprintln(log)
			}
		}
	}
	if cfg.tests["servercost"] {
		const pairs = 100000
		var err error
		if r.cost, err = serverCost(ctx, addrs[0], pairs); err != nil {
			fmt.Fprintf(log, "raw servercost ERROR %v\n", err)
		}
		for _, c := range r.cost {
			fmt.Fprintf(log, "raw servercost pairs=%d server-us/pair=%.2f kind=%q\n", pairs, c.perPair, c.name)
		}
	}
	if cfg.tests["handoff"] {
		var err error
		if r.idle, r.hot, err = idlePing(ctx, addrs[0], cfg.hold, 1000); err != nil {
			fmt.Fprintf(log, "raw idle-ping ERROR %v\n", err)
		} else {
			fmt.Fprintf(log, "raw idle-ping n=1 sleep=%v count=%d p50=%v p90=%v hot-p50=%v hot-p90=%v\n",
				cfg.hold, len(r.idle), r.idle.pct(.5), r.idle.pct(.9), r.hot.pct(.5), r.hot.pct(.9))
		}
		for _, n := range cfg.ns {
			for _, g := range cfg.gs {
				for _, im := range cfg.impls {
					if !im.handoff || im.single && n > 1 || im.only != "" && im.only != "handoff" {
						continue
					}
					k := rkey{im.key, n, g}
					h, err := runHandoff(ctx, im, addrs[:n], fmt.Sprintf("ho:%s:%d:%d", im.key, n, g), g, cfg.hold, cfg.think, cfg.handoffDur, cfg.maxCount)
					if err != nil {
						fail(k, "handoff", err)
						continue
					}
					r.ho[k] = h
					fmt.Fprintf(log, "raw handoff impl=%s n=%d g=%d hold=%v acquisitions=%d elapsed=%v acq/s=%.0f gaps=%d gap-p50=%v gap-p90=%v gap-p99=%v gap-max=%v to-another=%d other-p50=%v other-p99=%v longest-wait=%v censored=%v errors=%d",
						k.impl, n, g, cfg.hold, h.acqs, h.elapsed.Round(time.Millisecond), float64(h.acqs)/h.elapsed.Seconds(), len(h.gaps),
						h.gaps.pct(.5), h.gaps.pct(.9), h.gaps.pct(.99), h.gaps.pct(1), len(h.others), h.others.pct(.5), h.others.pct(.99), h.longest, h.censored, h.errs)
					fmt.Fprintf(log, " from-return: gaps=%d min=%v p50=%v p90=%v p99=%v max=%v negative=%d",
						len(h.returned), h.returned.pct(0), h.returned.pct(.5), h.returned.pct(.9), h.returned.pct(.99), h.returned.pct(1), h.returned.negatives())
					fmt.Fprintf(log, " server-calls/acquisition:%s", perAcq(h.calls, h.acqs))
					if h.lastError != nil {
						fmt.Fprintf(log, " last-error=%q", h.lastError.Error())
					}
					fmt.Fprintln(log)
				}
			}
		}
	}
	return r
}

func thinkText(think time.Duration) string {
	if think <= 0 {
		return " and lock again at once"
	}
	return fmt.Sprintf(", wait %v, lock again", think)
}

// perAcq formats server command counts per acquisition, largest first, and the server's
// mean time per EVALSHA (scripts run cold when the server idles between calls).
func perAcq(calls map[string]int64, acqs int) string {
	keys := make([]string, 0, len(calls))
	var total int64
	for k, v := range calls {
		if strings.HasPrefix(k, usecPrefix) {
			continue
		}
		keys = append(keys, k)
		total += v
	}
	slices.SortFunc(keys, func(a, b string) int { return int(calls[b] - calls[a]) })
	var b strings.Builder
	n := float64(max(acqs, 1))
	fmt.Fprintf(&b, " total=%.1f", float64(total)/n)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%.1f", k, float64(calls[k])/n)
	}
	if c := calls["evalsha"]; c > 0 {
		fmt.Fprintf(&b, " evalsha-us/call=%.1f", float64(calls[usecPrefix+"evalsha"])/float64(c))
	}
	return b.String()
}

// dur formats a duration for the tables: µs below 10ms, ms above.
func dur(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func ratio(a, b float64) string {
	if b == 0 || a == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func (r *results) label(cfg config, key string) string {
	switch key {
	case pingKey:
		return "PING, one node"
	case pingAllKey:
		return "PING, N nodes in parallel"
	}
	for _, im := range impls() {
		if im.key == key {
			return im.name
		}
	}
	return key
}

// floorOf returns the floor row on the same driver as a row.
func floorOf(key string) string {
	if strings.Contains(key, "rueidis") {
		return "floor-rueidis"
	}
	return "floor"
}

// mutexOf returns the key of the redlock Mutex row over the same driver as a row ("" for
// a row that is not redlock's).
func mutexOf(key string) string {
	for _, im := range impls() {
		if im.key == key {
			return im.mutex
		}
	}
	return ""
}

// mutexText says what the "/ Mutex" columns divide by.
const mutexText = "the redlock Mutex row over the same driver at the same N (redlock-goredis for the go-redis rows, redlock-rueidis for the rueidis rows, and the redigo and valkey-go Mutex rows for themselves), where that row ran"

func (r *results) markdown(cfg config, loadStart, loadEnd, foreign string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Load average (1, 5, 15 min): %s at start, %s at end (the end includes this run's own load). "+
		"Other processes used %s while it measured. Loopback, %d redis-server processes (`--save \"\" --appendonly no`).\n\n",
		loadStart, loadEnd, foreign, max(cfgMaxN(cfg), 1))

	p50 := func(key string, n int) time.Duration {
		if u, ok := r.unc[rkey{key, n, 0}]; ok {
			return u.lat.pct(.5)
		}
		return 0
	}
	if cfg.tests["uncontended"] {
		fmt.Fprintf(&b, "### 1 and 4. Uncontended lock+unlock: latency and allocations\n\n")
		fmt.Fprintf(&b, "One goroutine locks and unlocks a free name: up to %d pairs or %v per row, in %d rounds interleaved across the rows, after a warm-up. "+
			"Ratios are p50 over the p50 of each floor at the same N; \"/ Mutex\": a redlock row's p50 over that of %s. Allocations: runtime.MemStats deltas per pair, the drivers' goroutines included.\n\n", cfg.maxCount, cfg.dur, max(cfg.rounds, 1), mutexText)
		fmt.Fprintf(&b, "| row | N | p50 | p99 | / floor go-redis | / floor rueidis | allocs/pair | bytes/pair | / Mutex |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, n := range cfg.ns {
			for _, key := range r.order(cfg, pingKey, pingAllKey) {
				k := rkey{key, n, 0}
				u, ok := r.unc[k]
				if !ok {
					if err := r.fail[k]; err != nil {
						fmt.Fprintf(&b, "| %s | %d | error: %s | | | | | | |\n", r.label(cfg, key), n, oneLine(err))
					}
					continue
				}
				allocs, byts := fmt.Sprintf("%.1f", u.allocs), fmt.Sprintf("%.0f", u.byts)
				if key == pingKey || key == pingAllKey {
					allocs, byts = "—", "—"
				}
				m := float64(u.lat.pct(.5))
				fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", r.label(cfg, key), n, dur(u.lat.pct(.5)), dur(u.lat.pct(.99)),
					ratio(m, float64(p50("floor", n))), ratio(m, float64(p50("floor-rueidis", n))), allocs, byts, ratio(m, float64(p50(mutexOf(key), n))))
			}
		}
		b.WriteString("\n")
	}
	if cfg.tests["handoff"] {
		fmt.Fprintf(&b, "### 2. Contended handoff\n\n")
		fmt.Fprintf(&b, "G goroutines, each with its own client (own connections), take turns on one name for %v: lock, hold %v, unlock%s. "+
			"Gap: from the holder calling Unlock to the next holder's Lock returning, whoever that is (the releaser itself, if it re-locks first); "+
			"\"from return\": the same gap, but from the moment the holder's Unlock call returned (p50 and p99); "+
			"a negative value means the next holder had the lock before the Unlock call returned, so these flatter a lock whose Unlock returns late, "+
			"and the ratio and the targets use the gap from the call. "+
			"\"to another\": the share of acquisitions that went to a different goroutine than the last holder, and the p50 of those gaps. "+
			"Longest wait: the longest time any goroutine spent in Lock (\"≥\": still waiting when the window closed: starved); "+
			"the starvation limit is 4 × G × hold. Ratio: gap p50 over the go-redis floor's uncontended lock+unlock p50 at the same N.\n\n", cfg.handoffDur, cfg.hold, thinkText(cfg.think))
		if len(r.idle) > 0 {
			fmt.Fprintf(&b, "The floor under every gap: a PING to one node right after sleeping %v, as each holder does before its Unlock, took %s p50 (%s p90) in this run; back to back, %s (%s). "+
				"The machine's idle cores wake slowly, and a release is at least such a round trip. "+
				"The hand-over floor row (N=1) adds the least a hand-over needs to it: a release script that gives the lock to the first queued waiter and publishes to it, and the message.\n\n",
				cfg.hold, dur(r.idle.pct(.5)), dur(r.idle.pct(.9)), dur(r.hot.pct(.5)), dur(r.hot.pct(.9)))
		}
		fmt.Fprintf(&b, "| row | N | G | gap p50 | gap p99 | from return p50 | from return p99 | / floor | to another | another p50 | acquisitions/s | longest wait | 4·G·hold |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, n := range cfg.ns {
			for _, g := range cfg.gs {
				for _, key := range r.order(cfg) {
					k := rkey{key, n, g}
					h, ok := r.ho[k]
					if !ok {
						if err := r.fail[k]; err != nil {
							fmt.Fprintf(&b, "| %s | %d | %d | error: %s | | | | | | | | | |\n", r.label(cfg, key), n, g, oneLine(err))
						}
						continue
					}
					longest := dur(h.longest)
					if h.censored {
						longest = "≥ " + longest
					}
					gp50, gp99, share, op50, rp50, rp99 := "—", "—", "—", "—", "—", "—"
					if len(h.gaps) > 0 {
						gp50, gp99 = dur(h.gaps.pct(.5)), dur(h.gaps.pct(.99))
						share = fmt.Sprintf("%.0f%%", 100*float64(len(h.others))/float64(len(h.gaps)))
					}
					if len(h.others) > 0 {
						op50 = dur(h.others.pct(.5))
					}
					if len(h.returned) > 0 {
						rp50, rp99 = dur(h.returned.pct(.5)), dur(h.returned.pct(.99))
					}
					fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %.0f | %s | %s |\n", r.label(cfg, key), n, g, gp50, gp99, rp50, rp99,
						ratio(float64(h.gaps.pct(.5)), float64(p50("floor", n))), share, op50, float64(h.acqs)/h.elapsed.Seconds(), longest, dur(4*time.Duration(g)*cfg.hold))
				}
			}
		}
		b.WriteString("\n")
	}
	if len(r.cost) > 0 {
		fmt.Fprintf(&b, "### Server time per uncontended lock+unlock pair\n\n"+
			"One redis-server, 100000 pairs on fresh names, pipelined; the server's own time in the two commands (INFO commandstats), without reading requests and writing replies.\n\n"+
			"| pair | server µs/pair | / floor |\n|---|--:|--:|\n")
		for _, c := range r.cost {
			fmt.Fprintf(&b, "| %s | %.2f | %s |\n", c.name, c.perPair, ratio(c.perPair, r.cost[0].perPair))
		}
		b.WriteString("\n")
	}
	if cfg.tests["throughput"] {
		fmt.Fprintf(&b, "### 3. Throughput over many names\n\n")
		fmt.Fprintf(&b, "%d goroutines share one client; each locks and unlocks %d names of its own in turn (%d names, no contention), for %v per row in %d interleaved rounds after a warm-up.\n\n",
			cfg.goroutines, cfg.names, cfg.goroutines*cfg.names, cfg.dur, max(cfg.rounds, 1))
		fmt.Fprintf(&b, "CPU per pair: this process's CPU time (getrusage: the library, its driver and the measuring goroutines) and the servers' (INFO cpu: used_cpu_user + used_cpu_sys, summed over the N servers) while the pairs were counted, divided by the pairs; writes: this process's write system calls per pair (syscw in /proc/self/io). The clients and the servers share the machine's %d CPUs, so a row's pairs/s is about the CPUs over the sum of the two CPU columns when they are busy. \"/ Mutex\": a redlock row's pairs/s over that of %s.\n\n", runtime.NumCPU(), mutexText)
		fmt.Fprintf(&b, "| row | N | pairs/s | of floor go-redis | of floor rueidis | client CPU µs/pair | servers' CPU µs/pair | client writes/pair | / Mutex |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, n := range cfg.ns {
			for _, key := range r.order(cfg) {
				k := rkey{key, n, 0}
				t, ok := r.tp[k]
				if !ok {
					continue
				}
				of := func(f string) string {
					if fl := r.tp[rkey{f, n, 0}].rate; fl > 0 {
						return fmt.Sprintf("%.0f%%", 100*t.rate/fl)
					}
					return "—"
				}
				errs := ""
				if t.errs > 0 {
					errs = fmt.Sprintf(" (%d errors)", t.errs)
				}
				cpu := func(v float64) string {
					if v <= 0 {
						return "—"
					}
					return fmt.Sprintf("%.1f", v)
				}
				writes := "—"
				if t.writes >= 0 {
					writes = fmt.Sprintf("%.2f", t.writes)
				}
				fmt.Fprintf(&b, "| %s | %d | %.0f%s | %s | %s | %s | %s | %s | %s |\n", r.label(cfg, key), n, t.rate, errs, of("floor"), of("floor-rueidis"), cpu(t.clientCPU), cpu(t.serverCPU), writes,
					ratio(t.rate, r.tp[rkey{mutexOf(key), n, 0}].rate))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString(r.targets(cfg))
	fmt.Fprintf(&b, "\n### Settings of each row\n\n")
	for _, im := range cfg.impls {
		fmt.Fprintf(&b, "- **%s** (`%s`): %s\n", im.name, im.key, im.notes)
	}
	return b.String()
}

func cfgMaxN(cfg config) int {
	m := 0
	for _, n := range cfg.ns {
		m = max(m, n)
	}
	return m
}

// order returns the row keys to print: extra first, then the selected impls.
func (r *results) order(cfg config, extra ...string) []string {
	keys := append([]string(nil), extra...)
	for _, im := range cfg.impls {
		keys = append(keys, im.key)
	}
	return keys
}

func oneLine(err error) string {
	s := strings.ReplaceAll(err.Error(), "\n", " ")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return strings.ReplaceAll(s, "|", "/")
}

// targets checks issue 6's targets for our rows. The anchors (floor about 17 allocs
// per pair at N=5, redsync over rueidis at 72-83% of the floor's throughput) match the
// rueidis floor, so the verdicts use it (the go-redis floor where it was not run); the
// measured column also gives the ratio to the floor on the row's own driver.
func (r *results) targets(cfg config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Targets (issue 6), our rows\n\nVerdicts against the rueidis floor: the issue's anchors match it (about 17 allocs per pair at N=5; redsync over rueidis at 72-83%% of its throughput), not the go-redis one (110 allocs per pair at N=5). In brackets: the ratio to the floor on the row's own driver (go-redis for redigo and valkey-go). The Semaphore and Election rows have no targets here.\n\n| target | row | measured | verdict |\n|---|---|--:|---|\n")
	line := func(target, row, measured string, ok bool) { verdict(&b, target, row, measured, ok, "**missed**") }
	for _, im := range cfg.impls {
		if !im.ours || im.untargeted {
			continue
		}
		fk := "floor-rueidis"
		if _, ok := r.unc[rkey{fk, 5, 0}]; !ok {
			if _, ok := r.tp[rkey{fk, 5, 0}]; !ok {
				fk = "floor"
			}
		}
		own := floorOf(im.key)
		lease := im.key == "redlock-lease" || im.key == "redlock-lease-rueidis"
		if f, ok := r.unc[rkey{fk, 5, 0}]; ok {
			if u, ok := r.unc[rkey{im.key, 5, 0}]; ok {
				x := float64(u.lat.pct(.5)) / float64(f.lat.pct(.5))
				m := fmt.Sprintf("%.2fx %s", x, fk)
				if o, ok := r.unc[rkey{own, 5, 0}]; ok && own != fk {
					m += fmt.Sprintf(" (%.2fx %s)", float64(u.lat.pct(.5))/float64(o.lat.pct(.5)), own)
				}
				if lease {
					line("uncontended p50 at N=5 ≤ 1.6× floor (fenced Lease)", im.name, m, x <= 1.6)
				} else {
					line("uncontended p50 at N=5 ≤ 1.05× floor", im.name, m, x <= 1.05)
				}
			}
		}
		if lease {
			continue
		}
		if u, ok := r.unc[rkey{im.key, 5, 0}]; ok {
			line("allocs per pair at N=5 ≤ 26", im.name, fmt.Sprintf("%.1f", u.allocs), u.allocs <= 26)
		}
		for _, n := range []int{1, 5} {
			f, t := r.tp[rkey{fk, n, 0}], r.tp[rkey{im.key, n, 0}]
			if f.rate > 0 && t.rate > 0 {
				m := fmt.Sprintf("%.0f%% of %s", 100*t.rate/f.rate, fk)
				if o := r.tp[rkey{own, n, 0}]; o.rate > 0 && own != fk {
					m += fmt.Sprintf(" (%.0f%% of %s)", 100*t.rate/o.rate, own)
				}
				line(fmt.Sprintf("throughput at N=%d ≥ 90%% of floor", n), im.name, m, t.rate >= 0.9*f.rate)
			}
		}
		for _, n := range []int{1, 5} {
			limit := 150 * time.Microsecond
			if n > 1 {
				limit = 300 * time.Microsecond
			}
			for _, g := range cfg.gs {
				if h, ok := r.ho[rkey{im.key, n, g}]; ok && len(h.gaps) > 0 {
					p := h.gaps.pct(.5)
					line(fmt.Sprintf("handoff gap p50 at N=%d < %v (G=%d)", n, dur(limit), g), im.name, dur(p), p < limit)
				}
			}
		}
		for _, n := range cfg.ns {
			if h, ok := r.ho[rkey{im.key, n, 32}]; ok {
				limit := 4 * 32 * cfg.hold
				m := dur(h.longest)
				if h.censored {
					m = "≥ " + m
				}
				line(fmt.Sprintf("longest wait at G=32, N=%d < 4×G×hold = %v", n, dur(limit)), im.name, m, h.longest < limit && !h.censored)
			}
		}
	}
	// The RWMutex's target: an uncontended reader costs about what a Mutex does.
	for _, p := range [][2]string{{"redlock-rlock", "redlock-goredis"}, {"redlock-rlock-rueidis", "redlock-rueidis"}} {
		for _, n := range cfg.ns {
			u, ok1 := r.unc[rkey{p[0], n, 0}]
			m, ok2 := r.unc[rkey{p[1], n, 0}]
			if ok1 && ok2 {
				x := float64(u.lat.pct(.5)) / float64(m.lat.pct(.5))
				line(fmt.Sprintf("uncontended RLock+RUnlock p50 at N=%d ≤ 1.1× the Mutex's", n), r.label(cfg, p[0]), fmt.Sprintf("%.2fx %s", x, p[1]), x <= 1.1)
			}
		}
	}
	b.WriteString(r.floorTargets(cfg))
	return b.String()
}

// verdict writes one row of a targets table: "met", or missed (as the caller spells it).
func verdict(b *strings.Builder, target, row, measured string, ok bool, missed string) {
	v := "met"
	if !ok {
		v = missed
	}
	fmt.Fprintf(b, "| %s | %s | %s | %s |\n", target, row, measured, v)
}

// floorTargets holds the floors that do part of what our Mutex does to the targets they
// bear on: a target that such a floor misses on this machine, no lock that does at least as
// much can meet here.
func (r *results) floorTargets(cfg config) string {
	var b strings.Builder
	line := func(target, row, measured string, ok bool) { verdict(&b, target, row, measured, ok, "missed") }
	const fk = "floor-rueidis"
	for _, n := range []int{1, 5} {
		f, t := r.tp[rkey{fk, n, 0}], r.tp[rkey{"floor-scripts", n, 0}]
		if f.rate > 0 && t.rate > 0 {
			line(fmt.Sprintf("throughput at N=%d ≥ 90%% of floor", n), r.label(cfg, "floor-scripts"), fmt.Sprintf("%.0f%% of %s", 100*t.rate/f.rate, fk), t.rate >= 0.9*f.rate)
		}
	}
	for _, g := range cfg.gs {
		if h, ok := r.ho[rkey{"floor-handoff", 1, g}]; ok && len(h.gaps) > 0 {
			p := h.gaps.pct(.5)
			line(fmt.Sprintf("handoff gap p50 at N=1 < 150 µs (G=%d)", g), r.label(cfg, "floor-handoff"), dur(p), p < 150*time.Microsecond)
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "\nThe same targets for the floors that do part of what our Mutex does (the release script, or a hand-over): where such a floor misses a target on this machine, a lock that does at least as much can hardly meet it here.\n\n| target | floor | measured | verdict |\n|---|---|--:|---|\n" + b.String()
}
