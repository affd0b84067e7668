package main

import "syscall"

// childAttr makes a child get SIGKILL when this process dies, even by SIGKILL or a crash:
// a last resort behind stopAll.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
