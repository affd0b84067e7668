package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// targets are issue 17's targets for the held share, by nemesis.
var targets = map[string]float64{
	"none": 0.95, "conn-reset": 0.95,
	"latency": 0.80, "partition": 0.80, "sigstop": 0.80, "asym-partition": 0.80,
}

// header prints the run's settings and the machine.
func header(w io.Writer, args []string, seed uint64) {
	fmt.Fprintf(w, "# chaos run %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "command: chaos %s (seed %d)\n", strings.Join(args, " "), seed)
	fmt.Fprintf(w, "machine: nproc %d, kernel %s, %s, %s, %s/%s\n\n", runtime.NumCPU(), cmdLine("uname", "-r"),
		cmdLine(serverBinary(), "--version"), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func cmdLine(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return name + ": " + err.Error()
	}
	return strings.TrimSpace(string(out))
}

// printPhase prints one nemesis's table, its faults and errors, and, if trace, the
// evidence from the traced calls.
func printPhase(w io.Writer, ph *phase, v verdict, ev *evidence) {
	fmt.Fprintf(w, "## %s: %s\n\n", v.name, ph.nemesis.help)
	fmt.Fprintln(w, "| acquisitions | held | quorum up | Lock p50 | Lock p99 | longest Lock | extended | paused | writes accepted/rejected | superseded writes rejected | late writes accepted | violations (exclusion/token/stale) |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	fmt.Fprintf(w, "| %d | %.1f%% | %.1f%% | %s | %s | %s | %d | %d | %d/%d | %d | %d | %d (%d/%d/%d) |\n\n",
		v.acquisitions, 100*v.held, 100*v.quorumUp, short(v.p50), short(v.p99), short(v.longest), v.extended, v.paused,
		v.accepted, v.rejected, v.staleRejected, v.lateUnsuperseded, v.violations(), v.exclusion, v.tokenOrder, v.stale)
	if v.ceiling >= 0 {
		fmt.Fprintf(w, "held ceiling: %.1f%%, the most any lock needing a quorum's replies within the node timeout could hold with these holdings: each hand-over takes at least the quorum-th smallest round trip the proxies added, and none is possible while that is the node timeout or more\n", 100*v.ceiling)
	}
	fmt.Fprintf(w, "faults: %s; requests delivered a node timeout or more late: %d (%d after the client had closed the connection)\n",
		counts(ph.faults), ph.lateRequests, ph.orphanRequests)
	fmt.Fprintf(w, "errors: %s\n", counts(ph.errs))
	for _, e := range v.examples {
		fmt.Fprintf(w, "VIOLATION: %s\n", e)
	}
	if ev != nil {
		fmt.Fprintf(w, "trace: %s\n", v.gaps.line(ph.to-ph.from))
		for _, l := range ev.lines() {
			fmt.Fprintf(w, "trace: %s\n", l)
		}
	}
	fmt.Fprintln(w)
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// printSummary prints every nemesis's row and its target.
func printSummary(w io.Writer, vs []verdict) {
	fmt.Fprintln(w, "## summary")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| nemesis | acquisitions | held | target | quorum up | held ceiling | Lock p50 | Lock p99 | violations |")
	fmt.Fprintln(w, "|---|---:|---:|---|---:|---:|---:|---:|---:|")
	for _, v := range vs {
		target := "-"
		if t, ok := targets[v.name]; ok {
			mark := "met"
			if v.held < t {
				mark = fmt.Sprintf("missed by %.2f pt", 100*(t-v.held))
			}
			target = fmt.Sprintf(">= %.0f%% (%s)", 100*t, mark)
		}
		ceiling := "-"
		if v.ceiling >= 0 {
			ceiling = fmt.Sprintf("%.1f%%", 100*v.ceiling)
		}
		fmt.Fprintf(w, "| %s | %d | %.1f%% | %s | %.1f%% | %s | %s | %s | %d |\n",
			v.name, v.acquisitions, 100*v.held, target, 100*v.quorumUp, ceiling, short(v.p50), short(v.p99), v.violations())
	}
	fmt.Fprintln(w)
}

// stderr is where progress goes, so stdout holds only the report.
var stderr io.Writer = os.Stderr
