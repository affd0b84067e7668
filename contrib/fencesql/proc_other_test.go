//go:build !linux

package fencesql_test

import "syscall"

// childAttr runs a server as cred if not nil; outside Linux, cleanups alone stop the
// servers, by PID.
func childAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	if cred == nil {
		return nil
	}
	return &syscall.SysProcAttr{Credential: cred}
}
