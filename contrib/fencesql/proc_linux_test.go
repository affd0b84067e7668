package fencesql_test

import "syscall"

// childAttr makes a server get SIGKILL if the test process dies without its cleanups, and
// runs it as cred if not nil (initdb and postgres refuse to run as root).
func childAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
}
