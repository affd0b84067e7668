package main

import "syscall"

// childAttr makes a child get SIGKILL when this process dies, even by SIGKILL or a crash:
// a last resort behind stopAll and the watchdog (as bench/proc_linux.go does).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
