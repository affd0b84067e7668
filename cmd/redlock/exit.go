package main

import (
	"errors"
	"io/fs"
	"os/exec"
	"syscall"
)

// Exit statuses of redlock itself. When the command ran and ended on its own, redlock exits
// with the command's status instead (see commandStatus). doc.go and the usage text of
// `redlock run` document them; keep the three in step.
const (
	// exitConflictDefault is the default of -conflict-exit-code: the lock is held by
	// another owner (-nonblock), or still was when -wait ran out. It is 1, as flock's.
	exitConflictDefault = 1
	// exitUsage is a usage error: a bad flag or argument, or options the library refuses,
	// before or at the first attempt (two addresses of one server).
	exitUsage = 2
	// exitUnavailable (EX_UNAVAILABLE in sysexits.h) means the lock was not obtained for
	// another reason than a holder: nodes unreachable or failing, too few of them for a
	// quorum, or abstaining under the restart guard.
	exitUnavailable = 69
	// exitLost (EX_TEMPFAIL) means the lock ended while the command ran (its keys vanished,
	// or it could not be extended in time): the command was terminated, or had just exited.
	exitLost = 75
	// exitTimeout is -timeout running out: the command was terminated. It is timeout(1)'s.
	exitTimeout = 124
	// exitCannotRun means the command was found but could not be started, as in shells.
	exitCannotRun = 126
	// exitNotFound means the command was not found, as in shells.
	exitNotFound = 127
	// exitSignal plus a signal's number is the status of a command killed by that signal,
	// and redlock's own when that signal interrupted its wait for the lock, as in shells.
	exitSignal = 128
)

// commandStatus returns the exit status to report for a command that ran and ended with
// waitErr (exec.Cmd.Wait's error): its own exit status, or 128+N if signal N killed it.
func commandStatus(waitErr error) int {
	var ee *exec.ExitError
	if !errors.As(waitErr, &ee) {
		if waitErr == nil {
			return 0
		}
		return exitCannotRun // Wait failed without an exit status: not expected
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignal + int(ws.Signal())
	}
	return ee.ExitCode()
}

// startStatus returns the exit status for a command that could not be started with err:
// 127 if it does not exist, else 126.
func startStatus(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exitNotFound
	}
	return exitCannotRun
}
