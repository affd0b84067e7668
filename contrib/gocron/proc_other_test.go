//go:build !linux

package redlockgocron_test

import "syscall"

// childAttr has nothing to add outside Linux: cleanups kill the servers by PID.
func childAttr() *syscall.SysProcAttr { return nil }
