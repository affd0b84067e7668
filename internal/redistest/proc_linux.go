package redistest

import "syscall"

// childAttr makes redis-server get SIGKILL when the test process that started it dies,
// even by SIGKILL or a crash that skips the test's cleanups.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
