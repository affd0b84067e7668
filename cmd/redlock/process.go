package main

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// tokenEnv is the environment variable that gives the command its fencing token.
const tokenEnv = "REDLOCK_TOKEN"

// forwarded are the signals that redlock passes on to the command's process group (and
// that end its wait for the lock, before the command starts). Left to their defaults, each
// would kill redlock and leave the command running without anyone to extend its lock.
var forwarded = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

// notifySignals sends the forwarded signals, SIGTSTP and SIGPIPE to a channel instead of
// acting on them, until the returned function is called. SIGTSTP and SIGPIPE are caught
// rather than ignored (signal.Ignore) because an ignored signal stays ignored in the
// command after exec. With SIGPIPE caught, a message written to a standard error that is
// a pipe nobody reads fails (EPIPE) instead of killing redlock with the lock held.
func notifySignals() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, append([]os.Signal{syscall.SIGTSTP, syscall.SIGPIPE}, forwarded...)...)
	return ch, func() { signal.Stop(ch) }
}

// signalNames names the signals that redlock's messages mention.
var signalNames = map[os.Signal]string{
	syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP",
	syscall.SIGQUIT: "SIGQUIT", syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGTSTP: "SIGTSTP", syscall.SIGKILL: "SIGKILL",
}

// signalName returns the usual name of sig, such as SIGINT.
func signalName(sig os.Signal) string {
	if name, ok := signalNames[sig]; ok {
		return name
	}
	return sig.String()
}

// signalStatus returns the exit status that stands for sig, 128 + its number.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return exitSignal + int(s)
	}
	return exitSignal
}

// process is the command, running in a process group of its own (whose ID is its PID).
type process struct {
	cmd     *exec.Cmd
	exited  chan struct{}    // closed once it has exited and been reaped
	err     error            // exec.Cmd.Wait's error; set before exited closes
	orphans <-chan os.Signal // SIGCHLD: an orphan redlock adopted may have exited (see reapOrphans)
	sentry  *sentinel        // kills the group if redlock dies first; nil: none
	unwatch func()           // ends the signals to orphans
}

// newCommand returns the command for argv with redlock's standard input, output and error,
// or the error of looking its program up (in $PATH, or at its path if it has a slash): not
// found, or not executable, which shows before the lock is taken.
func newCommand(argv []string) (*exec.Cmd, error) {
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd, cmd.Err
}

// start starts cmd in a process group of its own, with the fencing token in its
// environment (none for token 0, a reader's: a REDLOCK_TOKEN that redlock inherited is
// left out, as a REDLOCK_PROCLAIM_FD is), after what cmd.Env holds already. On Linux the command gets SIGKILL if redlock dies (a parent-death signal),
// and redlock's sentinel kills the rest of its group then (see startSentinel): neither
// runs on without the lock. Call stop once the command's group has exited.
func start(cmd *exec.Cmd, token uint64) (*process, error) {
	orphans, unwatch := adoptOrphans()
	sentry := startSentinel(os.Stderr)
	extra := cmd.Env // the command's own, such as REDLOCK_PROCLAIM_FD
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, tokenEnv+"=") || strings.HasPrefix(kv, proclaimEnv+"=")
	})
	cmd.Env = append(cmd.Env, extra...)
	if token != 0 { // 0: a reader's, which has none
		cmd.Env = append(cmd.Env, tokenEnv+"="+strconv.FormatUint(token, 10))
	}
	cmd.SysProcAttr = commandAttr()
	p := &process{cmd: cmd, exited: make(chan struct{}), orphans: orphans, sentry: sentry, unwatch: unwatch}
	err := startThread(cmd.Start, func() {
		p.err = cmd.Wait()
		close(p.exited)
	})
	if err != nil {
		sentry.dismiss()
		unwatch()
		return nil, err
	}
	sentry.watch(cmd.Process.Pid)
	return p, nil
}

// stop ends what start set up around the command once its group has exited: the signals
// of exited orphans, and the sentinel. If the group still runs (redlock is on its way out
// after a panic, say), the sentinel stays, and kills the group once redlock has exited.
func (p *process) stop() {
	p.unwatch()
	select {
	case <-p.exited:
		if !p.groupRuns() {
			p.sentry.dismiss()
		}
	default:
	}
}

// signal sends sig to the command's process group, unless every process of it has
// exited, and then SIGCONT, so that a stopped command acts on it at once (as shells do on
// kill).
func (p *process) signal(sig os.Signal) {
	select {
	case <-p.exited:
		if !p.groupRuns() {
			return
		}
	default:
	}
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, s) // fails only if the group has exited meanwhile
	if s != syscall.SIGKILL {
		_ = syscall.Kill(-pgid, syscall.SIGCONT)
	}
}

// groupRuns reports whether a process of the command's group still runs (or is stopped),
// once the command has exited: it reaps those of the group that redlock adopted (see
// adoptOrphans) and have exited, then asks whether the group has any process left. It
// must not be called before exited closes, when it could reap the command itself.
func (p *process) groupRuns() bool {
	pgid := p.cmd.Process.Pid
	var status syscall.WaitStatus
	for range 1024 { // one exited process each; any more at the next call
		if pid, err := syscall.Wait4(-pgid, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
			break
		}
	}
	return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) // EPERM: one runs as another user
}

// reapOrphans reaps every child of redlock that has exited but the command, which
// exec.Cmd.Wait reaps: the orphans redlock adopted (see adoptOrphans), in the command's
// group or out of it, which would otherwise stay zombies while redlock runs. While the
// command has exited and Wait has not reaped it yet, the others may wait for the next
// call.
func (p *process) reapOrphans() {
	var status syscall.WaitStatus
	for range 1024 { // one exited child each; any more at the next call
		pid := exitedChild()
		if pid <= 0 {
			return
		}
		select {
		case <-p.exited: // reaped: pid is an orphan's
		default:
			if pid == p.cmd.Process.Pid {
				return
			}
		}
		_, _ = syscall.Wait4(pid, &status, syscall.WNOHANG, nil)
	}
}
