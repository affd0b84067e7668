package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sentinelCmd is the hidden first argument with which redlock starts its sentinel: a copy
// of itself that kills the command's process group if redlock dies without dismissing it
// (SIGKILL, the OOM killer). The second argument is redlock's process ID, which the
// sentinel checks against its parent's, so that no user's command line can start one.
const sentinelCmd = "__redlock-sentinel"

// commandAttr returns the attributes the command starts with: a process group of its own,
// and SIGKILL when redlock's thread that started it ends (see startThread), so that the
// command cannot outlive a redlock that was killed. The sentinel stops the rest of the
// group then.
func commandAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// startThread runs start and then wait on one goroutine locked to its OS thread, which
// stays alive until wait returns: Linux sends the parent-death signal when the thread that
// started a process ends, not when the process does, and a Go thread may otherwise end
// while redlock runs on. It returns start's error.
func startThread(start func() error, wait func()) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := start()
		started <- err
		if err == nil {
			wait()
		}
	}()
	return <-started
}

// sentinel is redlock's sentinel process, and the pipe through which redlock tells it the
// command's process group and, at the end, that it may go.
type sentinel struct {
	cmd  *exec.Cmd
	pipe *os.File // the write end; the sentinel reads the other
}

// startSentinel starts the sentinel (see sentinelCmd) in a process group of its own, so
// that a signal to redlock's group (a shell's kill -9 %1) does not reach it, with stderr
// for what it says. If it cannot, it says so on stderr and returns nil: the command then
// still dies with redlock (commandAttr), but not the rest of its group.
func startSentinel(stderr *os.File) *sentinel {
	failed := func(err error) *sentinel {
		fmt.Fprintf(stderr, "redlock: could not start the sentinel that kills the command's process group if redlock is killed (%v): only the command itself would die with redlock\n", err)
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return failed(err)
	}
	defer r.Close()
	ready, readyW, err := os.Pipe()
	if err != nil {
		w.Close()
		return failed(err)
	}
	defer ready.Close()
	cmd := exec.Command("/proc/self/exe", sentinelCmd, strconv.Itoa(os.Getpid()))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, readyW, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		w.Close()
		return failed(err)
	}
	go func() { _ = cmd.Wait() }() // or reapOrphans reaps it: either way it is reaped
	// Wait until it has checked its parent and ignores the signals: a redlock killed before
	// that would leave a sentinel that no longer knows its parent, and kills nothing.
	_ = ready.SetReadDeadline(time.Now().Add(sentinelStart))
	if line, err := bufio.NewReader(ready).ReadString('\n'); err != nil || line != "ready\n" {
		w.Close()
		_ = cmd.Process.Kill()
		return failed(fmt.Errorf("it did not say it was ready within %v: %v", sentinelStart, err))
	}
	return &sentinel{cmd: cmd, pipe: w}
}

// sentinelStart bounds how long the sentinel may take to start and say it is ready.
const sentinelStart = 30 * time.Second

// watch tells the sentinel the command's process group.
func (s *sentinel) watch(pgid int) {
	if s != nil {
		_, _ = fmt.Fprintf(s.pipe, "%d\n", pgid)
	}
}

// dismiss tells the sentinel that the command's group has exited, so that it exits
// without killing anything.
func (s *sentinel) dismiss() {
	if s != nil {
		_, _ = io.WriteString(s.pipe, "done\n")
		s.pipe.Close()
	}
}

// sentinelMain is the sentinel: it reads the command's process group from standard input,
// then waits; if standard input ends without "done" (redlock has died: the kernel closed
// its end of the pipe), it kills the group with SIGKILL, says so, and returns 0.
func sentinelMain(args []string) int {
	if len(args) != 1 || args[0] != strconv.Itoa(os.Getppid()) {
		return exitUsage
	}
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGPIPE)
	if _, err := io.WriteString(os.Stdout, "ready\n"); err != nil {
		return 0 // redlock is gone already: it started no command
	}
	_ = os.Stdout.Close()
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadString('\n')
	if err != nil {
		return 0 // redlock ended before the command started, or failed to start it
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pgid <= 1 {
		return exitUsage
	}
	if line, err := in.ReadString('\n'); err == nil && line == "done\n" {
		return 0
	}
	// The group's ID stays its own while any process of it lives, so this reaches the
	// command's group and no other, until it has no process left.
	killed := false
	for range 100 {
		if errors.Is(syscall.Kill(-pgid, syscall.SIGKILL), syscall.ESRCH) {
			break
		}
		killed = true
		time.Sleep(10 * time.Millisecond)
	}
	if !killed {
		return 0
	}
	fmt.Fprintf(os.Stderr, "redlock: redlock was killed while the command ran: killed the command's process group %d, which must not run without the lock\n", pgid)
	return 0
}
