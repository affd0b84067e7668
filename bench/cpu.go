package main

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuUse is what one side of a throughput measurement has spent so far: this process's CPU
// time (the client side: the library, its driver and the measuring goroutines), its write
// system calls, and the CPU time of the servers it talks to. Differences of two samples,
// divided by the pairs done in between, say where a lock+unlock pair's work goes on a
// machine whose CPUs the clients and the servers share.
type cpuUse struct {
	client, server time.Duration
	writes         int64 // -1 where unknown
}

// sampleUse reads this process's CPU time and write system calls and, over INFO cpu, the
// CPU time of the servers at addrs (used_cpu_user + used_cpu_sys).
func sampleUse(addrs []string) cpuUse {
	u := cpuUse{client: processCPU(), writes: writeSyscalls()}
	for _, a := range addrs {
		info, err := rawCommand(a, "INFO", "cpu")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(info, "\n") {
			name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || name != "used_cpu_user" && name != "used_cpu_sys" {
				continue
			}
			s, _ := strconv.ParseFloat(v, 64)
			u.server += time.Duration(s * float64(time.Second))
		}
	}
	return u
}

// writeSyscalls returns the write system calls this process made so far (syscw in
// /proc/self/io), or -1 where it cannot tell.
func writeSyscalls() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}
