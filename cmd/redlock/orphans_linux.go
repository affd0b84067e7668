package main

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// prSetChildSubreaper is Linux's PR_SET_CHILD_SUBREAPER option of prctl(2).
const prSetChildSubreaper = 36

// adoptOrphans makes redlock the parent of its descendants whose own parent exits (a job
// that the command put in the background), so that redlock reaps them once they exit (see
// process.reapOrphans) instead of the system's first process, which in a container may
// never reap them: a process not reaped still belongs to its process group. It fails only
// on kernels before 3.4, where such processes are left to the first process as before. It
// returns a channel that gets SIGCHLD, a child of redlock having exited, until the returned
// function is called.
func adoptOrphans() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGCHLD)
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	return ch, func() { signal.Stop(ch) }
}

// pAll is Linux's P_ALL of waitid(2): any child.
const pAll = 0

// siginfoPid is the offset of si_pid in Linux's siginfo_t: after si_signo, si_errno and
// si_code (three ints), where the union of fields begins, aligned as a pointer.
const siginfoPid = (12 + unsafe.Alignof(uintptr(0)) - 1) / unsafe.Alignof(uintptr(0)) * unsafe.Alignof(uintptr(0))

// exitedChild returns the PID of a child of redlock that has exited and has not been
// reaped, leaving it unreaped, or 0 if there is none.
func exitedChild() int {
	var info [16]uint64 // siginfo_t: 128 bytes, aligned
	_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pAll, 0, uintptr(unsafe.Pointer(&info)),
		syscall.WEXITED|syscall.WNOHANG|syscall.WNOWAIT, 0, 0)
	if errno != 0 {
		return 0
	}
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(&info), siginfoPid)))
}
