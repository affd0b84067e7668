//go:build !linux

package main

import "syscall"

// childAttr is nil where the OS has no parent-death signal: stopAll and the watchdog are
// then the only ways the servers are stopped.
func childAttr() *syscall.SysProcAttr { return nil }
