//go:build !linux

package main

import (
	"os"
	"syscall"
)

// sentinelCmd is never given outside Linux: redlock starts no sentinel there.
const sentinelCmd = ""

// commandAttr returns the attributes the command starts with: a process group of its own.
// Outside Linux there is no parent-death signal: a command whose redlock was killed runs
// on.
func commandAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// startThread runs start, and wait in the background if start succeeded, and returns
// start's error.
func startThread(start func() error, wait func()) error {
	if err := start(); err != nil {
		return err
	}
	go wait()
	return nil
}

// sentinel is nil outside Linux: nothing outlives redlock to kill its command's group.
type sentinel struct{}

func startSentinel(*os.File) *sentinel { return nil }
func (*sentinel) watch(int)            {}
func (*sentinel) dismiss()             {}
func sentinelMain([]string) int        { return exitUsage }
