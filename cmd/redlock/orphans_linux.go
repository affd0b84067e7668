package main

import "syscall"

// prSetChildSubreaper is Linux's PR_SET_CHILD_SUBREAPER option of prctl(2).
const prSetChildSubreaper = 36

// adoptOrphans makes redlock the parent of its descendants whose own parent exits (a job
// that the command put in the background), so that redlock reaps them once they exit (see
// process.groupRuns) instead of the system's first process, which in a container may
// never reap them: a process not reaped still belongs to its process group. It fails only
// on kernels before 3.4, where such processes are left to the first process as before.
func adoptOrphans() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}
