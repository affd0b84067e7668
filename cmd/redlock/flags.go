package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
)

// runConfig is what `redlock run` was asked to do, parsed and checked.
type runConfig struct {
	name     string
	addrs    []*redis.Options // one per Redis master
	command  []string         // the command and its arguments
	nonblock bool             // one attempt (TryAcquire) instead of a wait
	wait     time.Duration    // how long to wait for the lock; 0: no limit
	quiet    bool             // no message when the lock is held elsewhere
	grace    time.Duration    // from SIGTERM to SIGKILL when the command must stop
	timeout  time.Duration    // stop the command this long after the lock was taken; 0: never

	conflictCode int // exit status when the lock is held elsewhere

	// The library's options.
	ttl, nodeTimeout   time.Duration
	driftFactor        float64
	prefix             string
	retryMin, retryMax time.Duration
	guard              time.Duration
}

// defaultGuard is the default of -restart-guard, the library's default restart guard. It
// applies whatever the number of addresses: one server that restarts without its data
// forgets the locks it granted as surely as one of several.
const defaultGuard = 30 * time.Second

// maxPrefixLen is the longest key prefix the library takes (see redlock.WithPrefix).
const maxPrefixLen = 256

// usageError is a mistake in redlock's command line; it exits with exitUsage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// runUsageHead and runUsageTail frame the flags in `redlock run -h`. doc.go says the same.
const (
	runUsageHead = `Usage: redlock run -name NAME [flags] [--] COMMAND [ARG...]

Run COMMAND while holding the lock NAME over the Redis masters of -addrs, and exit
with COMMAND's status. One address makes a single-instance lock; several make a
Redlock over independent masters (not replicas of one another), a majority of which
must grant it. The lock is extended while COMMAND runs and released when it exits.
COMMAND gets the lock's fencing token in $REDLOCK_TOKEN: a decimal number that grows
from one holder of NAME to the next, for storage that should refuse late writers.

Before its first attempt redlock connects to every node at once, and goes on as soon
as a majority of them has connected, or every one has connected or failed; it gives
each node at most 2s to connect. -wait bounds all of this, connecting included: the
time before COMMAND starts. With -nonblock, connecting comes before the one attempt:
up to 2s while no majority of the nodes answers.

Example, a crontab that runs a job on one machine at a time and skips a run, silently,
while another machine still runs it:

  REDIS_ADDRS=10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379
  */5 * * * * redlock run -name report -nonblock -quiet -conflict-exit-code 0 -- /usr/local/bin/report --daily

Flags:
`
	runUsageTail = `
Exit status:
  COMMAND's own     COMMAND ran and exited; 128+N if signal N killed it
  1                 the lock is held elsewhere (-nonblock), or still was when -wait ran
                    out; COMMAND did not run (-conflict-exit-code sets this status)
  2                 usage error, also two addresses of one server (found at the first
                    attempt); COMMAND did not run
  69                the lock was not obtained: nodes unreachable or failing, too few for
                    a majority, or abstaining under the restart guard; COMMAND did not run
  75                the lock was lost while COMMAND ran (its keys vanished, or it could
                    not be extended in time): COMMAND got SIGTERM, and SIGKILL after -grace
  124               -timeout ran out: COMMAND got SIGTERM, and SIGKILL after -grace
  126, 127          COMMAND could not be started, or was not found
  128+N             signal N interrupted the wait for the lock; COMMAND did not run

Signals: COMMAND runs in a process group of its own. Each SIGINT, SIGTERM, SIGHUP,
SIGQUIT, SIGUSR1 and SIGUSR2 that redlock gets goes to that group once (followed by
SIGCONT, so that a stopped COMMAND acts on it). So a Ctrl-C on a terminal reaches
COMMAND once, through redlock, and redlock waits for COMMAND to exit before it
releases the lock. COMMAND is not the terminal's foreground job: if it reads from the
terminal it is stopped, so give it its input from a file or a pipe. redlock ignores
SIGTSTP (Ctrl-Z): stopped, it could not extend the lock. If redlock is killed with
SIGKILL, COMMAND runs on and the lock expires after -ttl.
`
)

// runFlags returns the flag set of `redlock run`, which fills c; defaults are the
// library's. It prints nothing: parseRun reports errors, and runUsage the usage.
func runFlags(c *runConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("redlock run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&c.name, "name", "", "the lock's `NAME` (required): commands run under one NAME, -addrs and -prefix take turns")
	fs.Func("addrs", "the Redis masters, comma-separated `host:port,...`, or redis:// or rediss:// URLs\n"+
		"(for a password, a database or TLS) (default $REDIS_ADDRS)", func(s string) (err error) {
		c.addrs, err = parseAddrs(s)
		return err
	})
	fs.BoolVar(&c.nonblock, "nonblock", false, "make one attempt: do not wait for the lock (connecting first takes up to 2s\n"+
		"while no majority of the nodes answers)")
	fs.DurationVar(&c.wait, "wait", 30*time.Second, "how long to wait for the lock, connecting to the nodes included: the most\n"+
		"time before COMMAND starts; 0 waits as long as it takes")
	fs.IntVar(&c.conflictCode, "conflict-exit-code", exitConflictDefault, "exit `status` when the lock is held elsewhere (0-255)")
	fs.BoolVar(&c.quiet, "quiet", false, "say nothing when the lock is held elsewhere: the exit status says it")
	fs.DurationVar(&c.timeout, "timeout", 0, "stop COMMAND (SIGTERM, then SIGKILL after -grace) if it still runs this long\nafter the lock was taken; exit status 124; 0: no limit")
	fs.DurationVar(&c.grace, "grace", 5*time.Second, "time from SIGTERM to SIGKILL when COMMAND must stop (lost lock, -timeout)")
	fs.DurationVar(&c.ttl, "ttl", 10*time.Second, "the lock's lifetime on each node, renewed while COMMAND runs: how long\nthe lock outlives a redlock that was killed or cut off from Redis")
	fs.DurationVar(&c.guard, "restart-guard", defaultGuard, "a node up for less than this `duration` abstains, as a restart may have made it\n"+
		"forget its locks; at least -ttl. 0 turns it off: only safe if every node persists\n"+
		"each write (appendonly yes, appendfsync always)")
	fs.DurationVar(&c.nodeTimeout, "node-timeout", 100*time.Millisecond, "bound on each node's answer; a slower node counts as failed")
	fs.Float64Var(&c.driftFactor, "drift-factor", 0.01, "clock drift allowance, as a fraction of -ttl, in [0, 1)")
	fs.StringVar(&c.prefix, "prefix", "redlock:", "prefix of the Redis keys the lock uses")
	fs.DurationVar(&c.retryMin, "retry-min", 10*time.Millisecond, "first pause between attempts while waiting, when no release wakes redlock")
	fs.DurationVar(&c.retryMax, "retry-max", 250*time.Millisecond, "longest pause between attempts while waiting (they double up to it)")
	return fs
}

// runUsage returns the usage text of `redlock run`.
func runUsage() string {
	var b bytes.Buffer
	b.WriteString(runUsageHead)
	fs := runFlags(&runConfig{})
	fs.SetOutput(&b)
	fs.PrintDefaults()
	b.WriteString(runUsageTail)
	return b.String()
}

// parseRun parses the arguments of `redlock run`, with getenv for REDIS_ADDRS. It returns
// flag.ErrHelp for -h, or a usageError.
func parseRun(args []string, getenv func(string) string) (*runConfig, error) {
	c := &runConfig{}
	fs := runFlags(c)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err.Error()}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.command = fs.Args()
	if !set["addrs"] {
		addrs, err := parseAddrs(getenv("REDIS_ADDRS"))
		if err != nil {
			return nil, usagef("$REDIS_ADDRS: %v", err)
		}
		c.addrs = addrs
	}
	switch {
	case c.name == "":
		return nil, usagef("no lock name: give one with -name")
	case len(c.command) == 0:
		return nil, usagef("no command to run: give it after the flags, as in redlock run -name %s -- COMMAND [ARG...]", c.name)
	case len(c.addrs) == 0:
		return nil, usagef("no Redis address: give -addrs host:port[,host:port...] or set $REDIS_ADDRS")
	case c.nonblock && set["wait"]:
		return nil, usagef("-nonblock and -wait exclude each other: -nonblock makes one attempt")
	case c.nonblock && (set["retry-min"] || set["retry-max"]):
		return nil, usagef("-retry-min and -retry-max apply while waiting, not with -nonblock")
	case c.wait < 0:
		return nil, usagef("-wait must not be negative, got %v", c.wait)
	case c.grace < 0:
		return nil, usagef("-grace must not be negative, got %v", c.grace)
	case c.timeout < 0:
		return nil, usagef("-timeout must not be negative, got %v", c.timeout)
	case c.conflictCode < 0 || c.conflictCode > 255:
		return nil, usagef("-conflict-exit-code must be in 0-255, got %d", c.conflictCode)
	}
	if err := c.checkLibrary(); err != nil {
		return nil, err
	}
	return c, nil
}

// checkLibrary checks the flags that become the library's name and options, as the library
// would (see redlock.New and its options), so that a mistake is reported with the flag's
// name rather than the option's.
func (c *runConfig) checkLibrary() error {
	drift := time.Duration(float64(c.ttl)*c.driftFactor) + 2*time.Millisecond
	switch {
	case len(c.name) > redlock.MaxNameLen:
		return usagef("-name of %d bytes: at most %d", len(c.name), redlock.MaxNameLen)
	case c.ttl < time.Millisecond:
		return usagef("-ttl must be at least 1ms, got %v", c.ttl)
	case c.driftFactor < 0 || c.driftFactor >= 1 || c.driftFactor != c.driftFactor:
		return usagef("-drift-factor must be in [0, 1), got %v", c.driftFactor)
	case c.ttl <= drift:
		return usagef("-ttl %v leaves no validity after the drift allowance %v (-ttl times -drift-factor, plus 2ms)", c.ttl, drift)
	case c.nodeTimeout <= 0 || c.nodeTimeout >= c.ttl:
		return usagef("-node-timeout must be positive and shorter than -ttl %v, got %v", c.ttl, c.nodeTimeout)
	case c.retryMin <= 0:
		return usagef("-retry-min must be positive, got %v", c.retryMin)
	case c.retryMax < c.retryMin:
		return usagef("-retry-max %v is below -retry-min %v", c.retryMax, c.retryMin)
	case c.guard < 0:
		return usagef("-restart-guard must not be negative, got %v", c.guard)
	case c.guard > 0 && c.ttl > c.guard:
		return usagef("-ttl %v is above -restart-guard %v: the guard must cover the longest TTL used on these nodes; raise -restart-guard", c.ttl, c.guard)
	case len(c.prefix) > maxPrefixLen:
		return usagef("-prefix of %d bytes: at most %d", len(c.prefix), maxPrefixLen)
	}
	if err := core.CheckPrefix(c.prefix); err != nil {
		return usagef("-prefix: %s", strings.TrimPrefix(trim(err), "invalid argument: "))
	}
	return nil
}

// options returns the library's options for c, with logger for what the library reports
// but cannot return (a wait that keeps failing).
func (c *runConfig) options(logger *slog.Logger) []redlock.Option {
	return []redlock.Option{
		redlock.WithTTL(c.ttl),
		redlock.WithNodeTimeout(c.nodeTimeout),
		redlock.WithDriftFactor(c.driftFactor),
		redlock.WithPrefix(c.prefix),
		redlock.WithRetry(c.retryMin, c.retryMax),
		redlock.WithRestartGuard(c.guard),
		redlock.WithAutoExtend(true),
		redlock.WithLogger(logger),
	}
}
