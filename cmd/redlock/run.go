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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
)

// releaseTimeout bounds the release of the lock once the command has exited, the releases
// tried again included (see release). Each node's answer is bounded by the node timeout
// anyway; a lock not released expires after its TTL.
const releaseTimeout = 5 * time.Second

// runMain is `redlock run`: it parses args (getenv gives $REDIS_ADDRS), takes the lock, runs
// the command while holding it, releases it, and returns the exit status.
func runMain(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return commandMain(cmdRun, args, getenv, stdout, stderr)
}

// electMain is `redlock elect`: it parses args (getenv gives $REDIS_ADDRS), campaigns until
// this process leads the election, runs the command while it leads, resigns, and returns
// the exit status.
func electMain(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return commandMain(cmdElect, args, getenv, stdout, stderr)
}

// commandMain is `redlock run` or `redlock elect`, as sub says: the two differ only in what
// they take (a lock, or an election's leadership) and in their flags.
func commandMain(sub string, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c, err := parseCommand(sub, args, getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, commandUsage(sub))
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "redlock %s: %v\nRun 'redlock %s -h' for usage.\n", sub, err, sub)
		return exitUsage
	}
	r := &runner{runConfig: c, stderr: stderr, start: time.Now()}
	if c.observe {
		return r.observe(stdout)
	}
	return r.run()
}

// runner carries out one `redlock run` or `redlock elect` (runConfig.sub).
type runner struct {
	*runConfig
	stderr  io.Writer         // redlock's messages
	start   time.Time         // when the run began: -wait counts from there
	sigs    <-chan os.Signal  // the signals redlock catches (see notifySignals)
	nodes   *nodeSet          // the nodes of -addrs
	client  *redlock.Client   // over them
	lease   holding           // the lock (run), its read side (-shared) or the leadership (elect), once taken
	elected *redlock.Election // the election (elect), once campaigning
	abstain *abstentions      // says that a node abstains
	cmd     *exec.Cmd         // the command, before it starts
}

// run takes the lock (or leadership), runs the command, releases the lock (resigns) and
// returns the exit status. Every path that took the lock releases it before it returns.
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

	r.nodes = newNodes(r.addrs)
	defer r.nodes.close()
	r.abstain = &abstentions{guard: r.guard, waiting: !r.nonblock, say: r.say}
	client, err := redlock.New(r.nodes.nodes, r.options(warnLogger(r.stderr, r.cause), r.abstain)...)
	if err != nil { // every error of New is about its input; parseRun checked most of it
		r.usage(err)
		return exitUsage
	}
	r.client = client
	defer r.closeClient() // before nodes.close: it ends the nodes' subscriptions

	if code, ok := r.acquire(); !ok {
		return code
	}
	var proclaims *proclaimer
	if leader, ok := r.lease.(*redlock.Lease); ok && r.elected != nil {
		if proclaims, err = r.proclaimPipe(r.elected, leader); err != nil {
			r.say("%v", err)
			return r.release(exitCannotRun)
		}
	}
	p, err := start(r.cmd, r.lease.Token())
	if proclaims != nil {
		proclaims.started()
	}
	if err != nil {
		r.say("%v", err)
		return r.release(startStatus(err))
	}
	return r.release(r.supervise(p))
}

// closeClient closes the Client, waiting for it at most four times -node-timeout: enough
// for the queue leaves that Close waits for (each within three node timeouts), so that an
// interrupted wait leaves no queue behind. Close then ends the nodes' subscriptions, which
// can take go-redis seconds (its read timeouts) against a node that does not answer;
// redlock exits next, which closes every connection anyway.
func (r *runner) closeClient() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.client.Close() // nothing to do about an error on the way out
	}()
	t := time.NewTimer(4 * r.nodeTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// warnLogger returns the logger for what the library reports but cannot return, such as a
// wait for the lock that keeps failing: warnings, to w, without a time (cron and journald
// add their own), with each error written as cause gives it.
//
// It drops the library's own line about a node that abstains under the restart guard:
// redlock says that itself, naming its flag (see abstentions).
func warnLogger(w io.Writer, cause func(error) string) *slog.Logger {
	return slog.New(dropAbstentions{slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			if err, ok := a.Value.Any().(error); ok && a.Value.Kind() == slog.KindAny {
				return slog.String(a.Key, cause(err))
			}
			return a
		},
	})})
}

// dropAbstentions is a slog.Handler that drops the library's records about a node that
// abstains under the restart guard (a message about the guard, with a "node" attribute),
// and passes on every other record to its Handler.
type dropAbstentions struct{ slog.Handler }

// Handle passes r on unless it is about an abstention.
func (d dropAbstentions) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "abstains") && strings.Contains(r.Message, "restart guard") {
		node := false
		r.Attrs(func(a slog.Attr) bool {
			node = a.Key == "node"
			return !node
		})
		if node {
			return nil
		}
	}
	return d.Handler.Handle(ctx, r)
}

// WithAttrs keeps the records of the new Handler filtered.
func (d dropAbstentions) WithAttrs(attrs []slog.Attr) slog.Handler {
	return dropAbstentions{d.Handler.WithAttrs(attrs)}
}

// WithGroup keeps the records of the new Handler filtered.
func (d dropAbstentions) WithGroup(name string) slog.Handler {
	return dropAbstentions{d.Handler.WithGroup(name)}
}

// trim returns err's message without the library's "redlock: " prefix, which redlock's own
// messages have already.
func trim(err error) string { return strings.TrimPrefix(err.Error(), "redlock: ") }

// cause returns the message of err, an error of the library about the lock, for a line
// that names the lock already: without the operation and the lock (by its name or its
// Redis key) that the library puts before the cause, nor its "redlock: " prefixes.
func (r *runner) cause(err error) string {
	msg := err.Error()
	locks := []string{strconv.Quote(r.name), quoted(r.name)}
	for _, name := range append(slices.Clone(r.names), r.name) {
		locks = append(locks, strconv.Quote(core.NewKeys(r.prefix, name).Lock))
	}
	for _, lock := range locks {
		msg = opLock(lock).ReplaceAllString(msg, "")
	}
	return strings.ReplaceAll(msg, "redlock: ", "")
}

// opLock matches what the library writes before an error about the lock that lock quotes:
// "redlock: ", an operation ("acquire", say), lock and ": ".
func opLock(lock string) *regexp.Regexp {
	return regexp.MustCompile(`(?:redlock: )?[a-z]+ ` + regexp.QuoteMeta(lock) + `: `)
}

// quoted returns name quoted as the library's errors quote a lock's name: cut short past 64
// bytes.
func quoted(name string) string {
	const most = 64
	if len(name) > most {
		return fmt.Sprintf("%q... (%d bytes)", name[:most], len(name))
	}
	return strconv.Quote(name)
}

// refusedByNodes reports whether err is the nodes' answer, too few of them saying yes (a
// *redlock.QuorumError), rather than an error about the command's input.
func refusedByNodes(err error) bool {
	var qe *redlock.QuorumError
	return errors.As(err, &qe)
}

// usage reports err, an error of the library that matches redlock.ErrInvalid, as a usage
// error. An error that names a node of -addrs (the same server twice, say) is about -addrs.
func (r *runner) usage(err error) {
	msg := strings.TrimPrefix(r.cause(err), "invalid argument: ")
	for _, o := range r.addrs {
		if strings.Contains(msg, o.Addr) {
			msg = "-addrs: " + strings.ReplaceAll(msg, "one Node", "one address")
			break
		}
	}
	fmt.Fprintf(r.stderr, "redlock %s: %s\nRun 'redlock %s -h' for usage.\n", r.sub, msg, r.sub)
}

// subject names what r takes in its messages: `lock "NAME"`, `lock ["NAME" "OTHER"]` over
// several names, either with "shared " before it for -shared, or `leadership of election
// "NAME"`.
func (r *runner) subject() string {
	shared := ""
	if r.shared {
		shared = "shared "
	}
	switch {
	case r.sub == cmdElect:
		return "leadership of election " + strconv.Quote(r.name)
	case r.several():
		return fmt.Sprintf("%slock %q", shared, r.names)
	}
	return shared + "lock " + strconv.Quote(r.name)
}

// several reports whether r takes one lock over several names.
func (r *runner) several() bool { return len(r.names) > 1 }

// take makes the attempt that acquire asks for: the lock, in one attempt (-nonblock) or
// waiting until ctx ends, or the election's leadership, campaigning until ctx ends. Over
// several names it takes them all at once, or none.
func (r *runner) take(ctx context.Context) (holding, error) {
	switch {
	case r.shared:
		return r.takeShared(ctx)
	case r.sub == cmdElect:
		r.elected = r.client.NewElection(r.name)
		return r.elected.Campaign(ctx, r.value)
	case r.several() && r.nonblock:
		return r.client.TryAcquireAll(ctx, r.names)
	case r.several():
		return r.client.AcquireAll(ctx, r.names)
	case r.nonblock:
		return r.client.TryAcquire(ctx, r.name)
	}
	return r.client.Acquire(ctx, r.name)
}

// say writes a message to redlock's standard error.
func (r *runner) say(format string, args ...any) {
	fmt.Fprintf(r.stderr, "redlock: "+format+"\n", args...)
}

// interrupted is the cause of a wait for the lock that a signal ended.
type interrupted struct{ sig os.Signal }

func (i interrupted) Error() string { return "interrupted by " + signalName(i.sig) }

// acquire connects to the nodes and takes the lock or leadership into r.lease (see take),
// in one attempt (-nonblock) or waiting until -wait has passed since the run began, and
// gives up if a forwarded signal arrives first. If it does not get the lock, it says why and returns the
// exit status and false.
func (r *runner) acquire() (int, bool) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() { // the command has not started: a signal is for redlock
		defer close(done)
		for {
			select {
			case sig := <-r.sigs:
				if sig == syscall.SIGPIPE { // a message to a closed pipe: it failed, that is all
					continue
				}
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
	budget := ctx // what remains of -wait
	if !r.nonblock && r.wait > 0 {
		var bcancel context.CancelFunc
		budget, bcancel = context.WithDeadline(ctx, r.start.Add(r.wait))
		defer bcancel()
	}
	r.nodes.connect(budget)
	attempt := budget // until -wait runs out, or one attempt
	if r.nonblock {
		attempt = ctx
	}
	lease, err := r.take(attempt)
	if err == nil { // a nil *Lease in the interface would not be nil
		r.lease = lease
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
		r.say("%s while %s %s: not running the command", sig, what, r.subject())
		if r.lease != nil {
			return r.release(signalStatus(sig.sig)), false
		}
		return signalStatus(sig.sig), false
	case err == nil:
		return 0, true
	case errors.Is(err, redlock.ErrInvalid) && refusedByNodes(err):
		// The servers refuse for good (a wrong password, an ACL, a cluster node given as a
		// plain one): no flag of this command is wrong, the deployment is.
		r.say("cannot take %s: %s", r.subject(), r.cause(err))
		return exitUnavailable, false
	case errors.Is(err, redlock.ErrInvalid):
		r.usage(err)
		return exitUsage, false
	case errors.Is(err, redlock.ErrHeld):
		some := "" // which of several names is held, the library does not say
		if r.several() {
			some = " (one of its names at least)"
		}
		if !r.quiet {
			if r.nonblock {
				r.say("%s is held elsewhere%s: not running the command", r.subject(), some)
			} else {
				r.say("%s was still held elsewhere%s after waiting %v: not running the command", r.subject(), some, r.wait)
			}
		}
		return r.conflictCode, false
	}
	within := ""
	if !r.nonblock && r.wait > 0 && errors.Is(err, context.DeadlineExceeded) {
		within = fmt.Sprintf(" within -wait %v", r.wait)
	}
	r.say("could not take %s%s, not running the command: %s", r.subject(), within, r.cause(err))
	if errors.Is(err, redlock.ErrRestarted) {
		r.say("a node up for less than -restart-guard %v abstains: a restart may have made it forget its locks", r.guard)
	}
	if err := r.nodes.failures(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			r.say("%s", line)
		}
	}
	return exitUnavailable, false
}

// ignoreStop says that redlock does not stop on SIGTSTP.
func (r *runner) ignoreStop() {
	r.say("ignoring SIGTSTP: a stopped redlock could not extend its lock")
}

// supervise waits for the command p, and then every other process of its group, to exit,
// passing on the signals redlock gets, and stops them (SIGTERM, then SIGKILL after -grace)
// if the lease ends or -timeout runs out. It returns the exit status: the command's, or
// exitLost or exitTimeout if they had to be stopped, or if the lease ended before they
// exited.
func (r *runner) supervise(p *process) int {
	var (
		ended    = r.lease.Done()
		exited   = p.exited
		group    <-chan time.Time // polls the command's group once the command has exited
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
	defer p.stop()
	terminate := func() {
		if !stopping {
			stopping = true
			p.signal(syscall.SIGTERM)
			kill = time.After(r.grace)
		}
	}
	for {
		select {
		case <-p.orphans:
			p.reapOrphans()
		case <-exited:
			exited = nil
			p.reapOrphans() // those that the command's zombie hid
			if !p.groupRuns() {
				return r.exitStatus(p, status)
			}
			r.groupRunsOn(status >= 0)
			poll := time.NewTicker(groupPoll)
			defer poll.Stop()
			group = poll.C
		case <-group:
			if !p.groupRuns() {
				return r.exitStatus(p, status)
			}
		case sig := <-r.sigs:
			if sig == syscall.SIGPIPE { // a message to a closed pipe: it failed, that is all
				continue
			}
			if sig == syscall.SIGTSTP {
				r.ignoreStop()
				continue
			}
			p.signal(sig)
		case <-ended:
			ended = nil
			r.say("lost %s while the command ran: %s; stopping the command (SIGTERM, then SIGKILL after %v)",
				r.subject(), r.lossReason(r.lease.Err()), r.grace)
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

// groupRunsOn says that the command exited while other processes of its group run on;
// stopping: they must stop too (the lease ended, or -timeout ran out).
func (r *runner) groupRunsOn(stopping bool) {
	const msg = "the command exited, but other processes of its process group still run"
	if stopping {
		r.say("%s: waiting for them to exit", msg)
		return
	}
	r.say("%s: %s stays held until they exit", msg, r.subject())
}

// groupPoll is how often redlock looks whether the command's process group has any
// process left, once the command has exited.
const groupPoll = 50 * time.Millisecond

// exitStatus returns the exit status once the command and its group have exited: status
// if they had to be stopped (exitLost, exitTimeout), exitLost if the lease has ended,
// else the command's own.
func (r *runner) exitStatus(p *process, status int) int {
	if status != exitLost && r.lease.Err() != nil {
		r.say("lost %s before the command exited: %s", r.subject(), r.lossReason(r.lease.Err()))
		return exitLost
	}
	if status >= 0 {
		return status
	}
	return commandStatus(p.err)
}

// pause waits for d, and reports whether ctx is still live then.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// lossReason explains why a lease ended, from Lease.Err.
func (r *runner) lossReason(err error) string {
	switch {
	case errors.Is(err, redlock.ErrLost) && r.several():
		return "the Redis nodes no longer hold every one of its names (keys were deleted, or expired)"
	case errors.Is(err, redlock.ErrLost):
		return "the Redis nodes no longer hold it (its keys were deleted, or expired)"
	case errors.Is(err, redlock.ErrExpired):
		return "it could not be extended before its validity ran out (nodes unreachable or too slow)"
	}
	return r.cause(err)
}

// release releases the lock (for elect: resigns), within releaseTimeout, and returns the
// exit status: code, or exitLost if the release finds that the nodes no longer held the
// lock. A release that too few nodes answered is tried again (see Lease.Release), pausing
// as between attempts to take the lock, until releaseTimeout.
func (r *runner) release(code int) int {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	err := r.lease.Release(ctx)
	b := core.Backoff{Min: r.retryMin, Max: r.retryMax}
	expired := false // while tried again: not lost while the command ran
	for attempt := 0; errors.Is(err, redlock.ErrNoQuorum) && !core.Permanent(err) && !r.shared && pause(ctx, b.Delay(attempt, 0)); attempt++ {
		again := r.lease.Release(ctx)
		if expired = errors.Is(again, redlock.ErrNotHeld); expired {
			break
		}
		err = again
	}
	switch {
	case err == nil, code == exitLost: // a lease that ended says so again: reported already
		return code
	case expired:
		r.say("could not release %s before it expired (its keys are gone now): %s", r.subject(), r.cause(err))
		return code
	case errors.Is(err, redlock.ErrNotHeld):
		r.say("%s was no longer held when released: it was lost while the command ran", r.subject())
		return exitLost
	}
	r.say("could not release %s (it expires within -ttl %v): %s", r.subject(), r.ttl, r.cause(err))
	return code
}
