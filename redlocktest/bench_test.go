package redlocktest_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/redlocktest"
)

// BenchmarkLockUnlock measures an uncontended Mutex Lock and Unlock through a Client of
// the kit, in real time (no bubble): over the kit's default number of servers (3) and
// over 1 and 5, with the Client's default options, and over 3 without the restart guard
// (whose first attempt is a plain SET NX). It also reports the process's CPU time per
// pair (cpu-ns/op, user and system), which a shared machine's load moves less than the
// real time.
func BenchmarkLockUnlock(b *testing.B) {
	for _, bc := range []struct {
		name    string
		servers int
		opts    []redlock.Option
	}{
		{"default", redlocktest.DefaultServers, nil},
		{"no guard", redlocktest.DefaultServers, []redlock.Option{redlock.WithRestartGuard(0)}},
		{"N=1", 1, nil},
		{"N=5", 5, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := redlocktest.New(b, redlocktest.WithServers(bc.servers)).Client(bc.opts...).NewMutex("bench")
			start := cpuTime(b)
			for b.Loop() {
				if err := m.LockContext(ctx); err != nil {
					b.Fatal(err)
				}
				m.Unlock()
			}
			b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime returns the CPU time the process has used so far, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(fmt.Errorf("getrusage: %w", err))
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
