package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// loadavg returns /proc/loadavg's first three fields, or "" where there is none.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func load1() float64 {
	f := strings.Fields(loadavg())
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// waitForLoad waits until the 1-minute load average is below limit, or for at most max.
func waitForLoad(limit float64, max time.Duration) {
	deadline := time.Now().Add(max)
	for {
		l := load1()
		if l < limit {
			fmt.Fprintf(os.Stderr, "load average %s: below %.2f, measuring\n", loadavg(), limit)
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "load average %s: still not below %.2f after %v, measuring anyway\n", loadavg(), limit, max)
			return
		}
		fmt.Fprintf(os.Stderr, "load average %s: waiting for it to fall below %.2f\n", loadavg(), limit)
		time.Sleep(15 * time.Second)
	}
}

func command(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// machineHeader describes the machine, the toolchain and the library versions.
func machineHeader(load string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# redlock comparison benchmark\n\n")
	fmt.Fprintf(&b, "- date: %s\n", time.Now().Format(time.RFC3339))
	fmt.Fprintf(&b, "- nproc: %s (GOMAXPROCS %d)\n", command("nproc"), runtime.GOMAXPROCS(0))
	fmt.Fprintf(&b, "- CPU: %s\n", cpuModel())
	fmt.Fprintf(&b, "- Go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "- redis-server: %s\n", command("redis-server", "--version"))
	fmt.Fprintf(&b, "- kernel: %s\n", command("uname", "-sr"))
	fmt.Fprintf(&b, "- load average (1, 5, 15 min) at start: %s\n", load)
	if bi, ok := debug.ReadBuildInfo(); ok {
		var mods []string
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/go-redsync/redsync/v4", "github.com/bsm/redislock", "github.com/redis/rueidis",
				"github.com/redis/go-redis/v9", "github.com/gomodule/redigo":
				mods = append(mods, d.Path+" "+d.Version)
			}
		}
		fmt.Fprintf(&b, "- modules: %s\n", strings.Join(mods, ", "))
	}
	fmt.Fprintf(&b, "- command: (cd bench && go run . %s)\n\n", strings.Join(os.Args[1:], " "))
	return b.String()
}

// cpuSample is the machine's busy CPU time and this program's own (its process and its
// redis-server children), in clock ticks, at one moment.
type cpuSample struct {
	at          time.Time
	busy, owned int64
}

// sampleCPU reads /proc/stat and /proc/<pid>/stat for this process and pids. It returns the
// zero sample where /proc is missing.
func sampleCPU(pids []int) cpuSample {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuSample{}
	}
	var s cpuSample
	s.at = time.Now()
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		s.busy += n
	}
	s.owned = procTicks("self")
	for _, p := range pids {
		s.owned += procTicks(strconv.Itoa(p))
	}
	return s
}

// procTicks returns utime+stime of /proc/<pid>/stat.
func procTicks(pid string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	_, rest, ok := strings.Cut(string(b), ") ") // the command name may contain spaces
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// foreignCPU describes the CPU time that other processes used between a and b: the noise
// in this run's numbers.
func foreignCPU(a, b cpuSample) string {
	if a.at.IsZero() || b.at.IsZero() {
		return "unknown"
	}
	const hz = 100 // USER_HZ on Linux
	other := float64((b.busy-a.busy)-(b.owned-a.owned)) / hz
	wall := b.at.Sub(a.at).Seconds()
	return fmt.Sprintf("%.1f CPU-seconds in %.0f s (%.0f%% of %d CPUs)", max(other, 0), wall, 100*max(other, 0)/(wall*float64(runtime.NumCPU())), runtime.NumCPU())
}
