package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/go-redlock/redlock"
)

// releaseTimeout bounds the release of the lock once the command has exited. Each node's
// answer is bounded by the node timeout anyway; a lock not released expires after its TTL.
const releaseTimeout = 5 * time.Second

// runMain is `redlock run`: it parses args (getenv gives $REDIS_ADDRS), takes the lock, runs
// the command while holding it, releases it, and returns the exit status.
func runMain(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c, err := parseRun(args, getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, runUsage())
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "redlock run: %v\nRun 'redlock run -h' for usage.\n", err)
		return exitUsage
	}
	r := &runner{runConfig: c, stderr: stderr}
	return r.run()
}

// runner carries out one `redlock run`.
type runner struct {
	*runConfig
	stderr io.Writer        // redlock's messages
	sigs   <-chan os.Signal // the signals redlock catches (see notifySignals)
	client *redlock.Client  // over the nodes of -addrs
	lease  *redlock.Lease   // the lock, once taken
	cmd    *exec.Cmd        // the command, before it starts

	connectErr error // the nodes that could not be reached before the lock was attempted
}

// run takes the lock, runs the command, releases the lock and returns the exit status.
// Every path that took the lock releases it before it returns.
func (r *runner) run() int {
	cmd, err := newCommand(r.command)
	if err != nil { // not found, or not executable: say so before taking the lock
		r.say("%v", err)
		return startStatus(err)
	}
	r.cmd = cmd
	sigs, stopSignals := notifySignals()
	defer stopSignals()
	r.sigs = sigs

	nodes := newNodes(r.addrs)
	defer nodes.close()
	client, err := redlock.New(nodes.nodes, r.options(warnLogger(r.stderr))...)
	if err != nil { // every error of New is about its input
		fmt.Fprintf(r.stderr, "redlock run: %s\nRun 'redlock run -h' for usage.\n", trim(err))
		return exitUsage
	}
	defer client.Close() // before nodes.close: it ends the nodes' subscriptions
	r.client = client
	r.connectErr = nodes.connect()

	if code, ok := r.acquire(); !ok {
		return code
	}
	p, err := start(r.cmd, r.lease.Token())
	if err != nil {
		r.say("%v", err)
		return r.release(startStatus(err))
	}
	return r.release(r.supervise(p))
}

// warnLogger returns the logger for what the library reports but cannot return, such as a
// wait for the lock that keeps failing: warnings, to w, without a time (cron and journald
// add their own).
func warnLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// trim returns err's message without the library's "redlock: " prefix, which redlock's own
// messages have already.
func trim(err error) string { return strings.TrimPrefix(err.Error(), "redlock: ") }

// say writes a message to redlock's standard error.
func (r *runner) say(format string, args ...any) {
	fmt.Fprintf(r.stderr, "redlock: "+format+"\n", args...)
}

// interrupted is the cause of a wait for the lock that a signal ended.
type interrupted struct{ sig os.Signal }

func (i interrupted) Error() string { return "interrupted by " + signalName(i.sig) }

// acquire takes the lock into r.lease, in one attempt (-nonblock) or waiting up to -wait,
// and gives up if a forwarded signal arrives first. If it does not get the lock, it says
// why and returns the exit status and false.
func (r *runner) acquire() (int, bool) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() { // the command has not started: a signal is for redlock
		defer close(done)
		for {
			select {
			case sig := <-r.sigs:
				if sig == syscall.SIGTSTP {
					r.ignoreStop()
					continue
				}
				cancel(interrupted{sig})
				return
			case <-quit:
				return
			}
		}
	}()
	var err error
	if r.nonblock {
		r.lease, err = r.client.TryAcquire(ctx, r.name)
	} else {
		wctx := ctx
		if r.wait > 0 {
			var wcancel context.CancelFunc
			wctx, wcancel = context.WithTimeout(ctx, r.wait)
			defer wcancel()
		}
		r.lease, err = r.client.Acquire(wctx, r.name)
	}
	close(quit)
	<-done

	var sig interrupted
	switch {
	case errors.As(context.Cause(ctx), &sig):
		what := "waiting for"
		if r.lease != nil {
			what = "taking"
		}
		r.say("%s while %s lock %q: not running the command", sig, what, r.name)
		if r.lease != nil {
			return r.release(signalStatus(sig.sig)), false
		}
		return signalStatus(sig.sig), false
	case err == nil:
		return 0, true
	case errors.Is(err, redlock.ErrInvalid):
		fmt.Fprintf(r.stderr, "redlock run: %s\n", trim(err))
		return exitUsage, false
	case errors.Is(err, redlock.ErrHeld):
		if !r.quiet {
			if r.nonblock {
				r.say("lock %q is held elsewhere: not running the command", r.name)
			} else {
				r.say("lock %q was still held elsewhere after waiting %v: not running the command", r.name, r.wait)
			}
		}
		return r.conflictCode, false
	}
	r.say("could not take lock %q, not running the command: %s", r.name, trim(err))
	if r.connectErr != nil {
		for _, line := range strings.Split(r.connectErr.Error(), "\n") {
			r.say("%s", line)
		}
	}
	return exitUnavailable, false
}

// ignoreStop says that redlock does not stop on SIGTSTP.
func (r *runner) ignoreStop() {
	r.say("ignoring SIGTSTP: a stopped redlock could not extend its lock")
}

// supervise waits for the command p to exit, passing on the signals redlock gets, and stops
// it (SIGTERM, then SIGKILL after -grace) if the lease ends or -timeout runs out. It returns
// the exit status: the command's, or exitLost or exitTimeout if it had to be stopped, or if
// the lease ended before the command exited.
func (r *runner) supervise(p *process) int {
	var (
		ended    = r.lease.Done()
		deadline <-chan time.Time // -timeout
		kill     <-chan time.Time // -grace after SIGTERM
		stopping bool             // SIGTERM was sent
		status   = -1             // exitLost or exitTimeout once the command must stop
	)
	if r.timeout > 0 {
		t := time.NewTimer(r.timeout)
		defer t.Stop()
		deadline = t.C
	}
	terminate := func() {
		if !stopping {
			stopping = true
			p.signal(syscall.SIGTERM)
			kill = time.After(r.grace)
		}
	}
	for {
		select {
		case <-p.exited:
			if status != exitLost && r.lease.Err() != nil {
				r.say("lost lock %q before the command exited: %s", r.name, lossReason(r.lease.Err()))
				status = exitLost
			}
			if status >= 0 {
				return status
			}
			return commandStatus(p.err)
		case sig := <-r.sigs:
			if sig == syscall.SIGTSTP {
				r.ignoreStop()
				continue
			}
			p.signal(sig)
		case <-ended:
			ended = nil
			r.say("lost lock %q while the command ran: %s; stopping the command (SIGTERM, then SIGKILL after %v)",
				r.name, lossReason(r.lease.Err()), r.grace)
			status = exitLost
			terminate()
		case <-deadline:
			deadline = nil
			if status < 0 {
				r.say("the command still ran after -timeout %v: stopping it (SIGTERM, then SIGKILL after %v)", r.timeout, r.grace)
				status = exitTimeout
				terminate()
			}
		case <-kill:
			kill = nil
			r.say("the command did not exit within %v of SIGTERM: sending SIGKILL to its process group", r.grace)
			p.signal(syscall.SIGKILL)
		}
	}
}

// lossReason explains why a lease ended, from Lease.Err.
func lossReason(err error) string {
	switch {
	case errors.Is(err, redlock.ErrLost):
		return "the Redis nodes no longer hold it (its keys were deleted, or expired)"
	case errors.Is(err, redlock.ErrExpired):
		return "it could not be extended before its validity ran out (nodes unreachable or too slow)"
	}
	return err.Error()
}

// release releases the lock, within releaseTimeout, and returns the exit status: code, or
// exitLost if the release finds that the nodes no longer held the lock.
func (r *runner) release(code int) int {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	err := r.lease.Release(ctx)
	switch {
	case err == nil, code == exitLost: // a lease that ended says so again: reported already
		return code
	case errors.Is(err, redlock.ErrNotHeld):
		r.say("lock %q was no longer held when released: it was lost while the command ran", r.name)
		return exitLost
	}
	r.say("could not release lock %q (it expires within -ttl %v): %s", r.name, r.ttl, trim(err))
	return code
}
