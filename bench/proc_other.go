//go:build !linux

package main

import (
	"syscall"
	"time"
)

func childAttr() *syscall.SysProcAttr { return nil }

// processCPU is unknown here: the throughput rows then show no client CPU.
func processCPU() time.Duration { return 0 }
