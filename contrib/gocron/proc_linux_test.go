package redlockgocron_test

import "syscall"

// childAttr makes a redis-server get SIGKILL if the test process dies without its cleanups.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
