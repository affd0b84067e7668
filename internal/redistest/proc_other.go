//go:build !linux

package redistest

import "syscall"

// childAttr is nil where the OS cannot tie a child's life to its parent's: there, a test
// process that crashes before its cleanups leaves its servers running.
func childAttr() *syscall.SysProcAttr { return nil }
