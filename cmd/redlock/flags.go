package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
)

// The subcommands that run a command, which share runConfig and the runner.
const (
	cmdRun   = "run"   // run COMMAND holding a lock
	cmdElect = "elect" // run COMMAND while leading an election
)

// runConfig is what `redlock run` or `redlock elect` was asked to do, parsed and checked.
type runConfig struct {
	sub      string           // cmdRun or cmdElect
	name     string           // the election's, or the lock's (see lockName)
	names    []string         // run: the lock's names, each once, in the order of -name
	value    string           // elect: the value the leader proclaims
	describe string           // the holder's description (-description): "" for none
	observe  bool             // elect: print each new leader instead of campaigning
	conn     access           // how to reach the Redis masters
	addrs    []*redis.Options // one per Redis master, from conn
	command  []string         // the command and its arguments
	nonblock bool             // one attempt (TryAcquire) instead of a wait
	shared   bool             // run: the read side of the lock (an RWMutex's RLock)
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

// runUsageHead and runUsageTail frame the flags in `redlock run -h`, electUsageHead and
// electUsageTail in `redlock elect -h`, each tail followed by signalsUsage. doc.go says
// the same.
const (
	runUsageHead = `Usage: redlock run NAME [-name NAME...] [flags] [--] COMMAND [ARG...]

Run COMMAND while holding the lock NAME over the Redis masters of -addrs, and exit
with COMMAND's status. NAME comes first, as in 'redlock elect' and 'redlock status'
(commands run under one NAME, -addrs and -prefix take turns); without "--", COMMAND
begins at the next argument that is not a flag. -name NAME, the older form, still
works: then COMMAND begins at the first argument that is not a flag. One address makes a single-instance lock; several make a
Redlock over independent masters (not replicas of one another), a majority of which
must grant it. The lock is extended while COMMAND runs and released when it exits.
COMMAND gets the lock's fencing token in $REDLOCK_TOKEN: a decimal number that grows
from one holder of NAME to the next, for storage that should refuse late writers.

-name NAME after NAME, once per NAME, takes one lock over every NAME at once (the library's
AcquireAll, or TryAcquireAll with -nonblock): all of them or none, never one after
another, so two runs that share names cannot deadlock whatever their order. Each NAME
is held as its own lock would be, so the names' holders exclude it, and its token is
above every token the names had; losing any one name loses the lock. A NAME given
twice counts once; a comma is part of a NAME, not a separator. Everything else (the
flags, exit statuses, extension, loss and signals) is as for one name: "the lock" is
the lock over every NAME, and it is held elsewhere when any one of them is.

-shared holds the lock's read side, as flock -s does (the library's RWMutex readers):
any number of -shared runs hold it together, and a run without -shared excludes
them all, each waiting for the other in turn. A reader has no fencing token: COMMAND
gets no $REDLOCK_TOKEN.

Before its first attempt redlock connects to every node at once, and goes on as soon
as a majority of them has connected, or every one has connected or failed; it gives
each node at most 2s to connect. It waits for the lock as long as it takes (as
flock(1) does) unless given -wait, which bounds all of this, connecting included: the
time before COMMAND starts. With -nonblock, connecting comes before the one attempt:
up to 2s while no majority of the nodes answers. A node up for less than
-restart-guard abstains: redlock says so at once, with the time it has left.

Example, a crontab that runs a job on one machine at a time and skips a run, silently,
while another machine still runs it:

  REDIS_ADDRS=10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379
  */5 * * * * redlock run report -nonblock -quiet -conflict-exit-code 0 -- /usr/local/bin/report --daily

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
`
	electUsageHead = `Usage: redlock elect NAME [flags] [--] COMMAND [ARG...]
       redlock elect -observe NAME [flags]

Campaign to lead the election NAME over the Redis masters of -addrs, run COMMAND once
this process leads, and exit with COMMAND's status. One candidate leads at a time, and
candidates lead in the order they began to campaign. The election is the library's
(Client.NewElection): its leader holds the lock NAME, one address making a
single-instance lock and several a Redlock over independent masters, and records
-value on the nodes, where 'redlock status NAME' and Election.Leader read it.
Leadership is extended while COMMAND runs; if it is lost, COMMAND gets SIGTERM, then
SIGKILL after -grace, and redlock exits 75. When COMMAND exits, redlock resigns and
the next candidate leads. COMMAND gets the leader's fencing token in $REDLOCK_TOKEN: a
decimal number that grows from one leader of NAME to the next (a term number), for
storage that should refuse a former leader's late writes. Each line COMMAND writes on
the file descriptor that $REDLOCK_PROCLAIM_FD names becomes the leader's value, without
a new election (as etcdctl's proclaim): echo ready >&"$REDLOCK_PROCLAIM_FD". NAME must
not begin with '-'.

With -observe, redlock campaigns for nothing and runs no COMMAND (as etcdctl elect
-l): it prints the value of NAME's leader, then that of each new leader as it
changes (a new leader's too when its value is the last one's) or proclaims a new
value, one line each, and
an empty line whenever no candidate leads, until SIGINT, SIGTERM or SIGHUP (exit
status 0); 69 if reading the leader fails for good.

A candidate waits as long as it takes to lead (-wait 0, the default). Before its
first attempt it connects to every node at once, as 'redlock run' does, giving each
node at most 2s to connect; a -wait above 0 bounds all of this, connecting included.

Example, a scheduler that runs on one machine of three at a time, the others standing
by to take over when it exits or its machine fails:

  REDIS_ADDRS=10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379
  redlock elect scheduler -value "$(hostname)" -- /usr/local/bin/scheduler

Flags:
`
	electUsageTail = `
Exit status:
  COMMAND's own     COMMAND ran and exited; 128+N if signal N killed it
  1                 another candidate still led when -wait ran out; COMMAND did not run
                    (-conflict-exit-code sets this status)
  2                 usage error, also two addresses of one server (found at the first
                    attempt); COMMAND did not run
  69                leadership was not obtained: nodes unreachable or failing, too few
                    for a majority, or abstaining under the restart guard, when -wait ran
                    out; COMMAND did not run
  75                leadership was lost while COMMAND ran (its keys vanished, or it could
                    not be extended in time): COMMAND got SIGTERM, and SIGKILL after -grace
  124               -timeout ran out: COMMAND got SIGTERM, and SIGKILL after -grace
  126, 127          COMMAND could not be started, or was not found
  128+N             signal N interrupted the campaign; COMMAND did not run
`
	// signalsUsage ends both usages: %[1]s is what redlock does once COMMAND has exited,
	// %[2]s what it keeps while COMMAND runs.
	signalsUsage = `
Signals: COMMAND runs in a process group of its own. Each SIGINT, SIGTERM, SIGHUP,
SIGQUIT, SIGUSR1 and SIGUSR2 that redlock gets goes to that group once (followed by
SIGCONT, so that a stopped COMMAND acts on it). So a Ctrl-C on a terminal reaches
COMMAND once, through redlock, and redlock waits for COMMAND to exit before it
%[1]s. It waits for the rest of the group too (a job COMMAND put in the
background), which it stops whenever it stops COMMAND (a loss, -timeout), and then
exits with COMMAND's status. COMMAND is not the terminal's foreground job: if it
reads from the terminal it is stopped, so give it its input from a file or a pipe.
redlock ignores SIGTSTP (Ctrl-Z): stopped, it could not extend %[2]s. If
redlock is killed (SIGKILL), on Linux COMMAND's process group is killed with it
(SIGKILL, by a parent-death signal and a sentinel process): only a process that left
the group (setsid) runs on; elsewhere COMMAND runs on. Either way %[2]s expires
after -ttl.
`
)

// commandFlags returns the flag set of `redlock run` or `redlock elect` (sub), which fills
// c; defaults are the library's. It prints nothing: parseCommand reports errors, and
// commandUsage the usage.
func commandFlags(sub string, c *runConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("redlock "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	elect := sub == cmdElect
	if !elect {
		fs.Func("name", "another `NAME` to hold with the first, all or none (once per NAME; a comma is\n"+
			"part of a NAME); the older form of NAME: -name NAME given before COMMAND's first\n"+
			"argument stands for NAME", func(s string) error {
			c.names = append(c.names, s)
			return nil
		})
	}
	accessFlags(fs, &c.conn)
	if elect {
		fs.BoolVar(&c.observe, "observe", false, "campaign for nothing and run no COMMAND: print the value of each new leader\n"+
			"of NAME, one line each (an empty line: no leader), until SIGINT or SIGTERM")
		fs.StringVar(&c.value, "value", "", "the `value` this candidate records as the leader's, for 'redlock status' and\n"+
			"Election.Leader to show; at most 4096 bytes (default HOST:PID, this machine's host\nname and redlock's process ID)")
		fs.DurationVar(&c.wait, "wait", 0, "how long to campaign, connecting to the nodes included: the most time before\n"+
			"COMMAND starts; 0 waits as long as it takes")
		fs.IntVar(&c.conflictCode, "conflict-exit-code", exitConflictDefault, "exit `status` when another candidate still leads as -wait runs out (0-255)")
		fs.BoolVar(&c.quiet, "quiet", false, "say nothing when another candidate still leads as -wait runs out: the exit\nstatus says it")
		fs.DurationVar(&c.timeout, "timeout", 0, "stop COMMAND (SIGTERM, then SIGKILL after -grace) if it still runs this long\nafter this process began to lead; exit status 124; 0: no limit")
		fs.DurationVar(&c.grace, "grace", 5*time.Second, "time from SIGTERM to SIGKILL when COMMAND must stop (lost leadership, -timeout)")
		fs.DurationVar(&c.ttl, "ttl", 10*time.Second, "the leader's lock's lifetime on each node, renewed while COMMAND runs: how\nlong leadership outlives a redlock that was killed or cut off from Redis")
	} else {
		fs.BoolVar(&c.shared, "shared", false, "hold the lock's read side, with other -shared runs (an RWMutex's readers, as\n"+
			"flock -s): a run without -shared waits for them all, and they for it; no\n"+
			"$REDLOCK_TOKEN (readers have no fencing token)")
		fs.BoolVar(&c.nonblock, "nonblock", false, "make one attempt: do not wait for the lock (connecting first takes up to 2s\n"+
			"while no majority of the nodes answers)")
		fs.DurationVar(&c.wait, "wait", 0, "how long to wait for the lock, connecting to the nodes included: the most\n"+
			"time before COMMAND starts; 0 waits as long as it takes, as flock(1) does")
		fs.IntVar(&c.conflictCode, "conflict-exit-code", exitConflictDefault, "exit `status` when the lock is held elsewhere (0-255)")
		fs.BoolVar(&c.quiet, "quiet", false, "say nothing when the lock is held elsewhere: the exit status says it")
		fs.DurationVar(&c.timeout, "timeout", 0, "stop COMMAND (SIGTERM, then SIGKILL after -grace) if it still runs this long\nafter the lock was taken; exit status 124; 0: no limit")
		fs.DurationVar(&c.grace, "grace", 5*time.Second, "time from SIGTERM to SIGKILL when COMMAND must stop (lost lock, -timeout)")
		fs.DurationVar(&c.ttl, "ttl", 10*time.Second, "the lock's lifetime on each node, renewed while COMMAND runs: how long\nthe lock outlives a redlock that was killed or cut off from Redis")
	}
	fs.StringVar(&c.describe, "description", "", "a short `text` that describes this holder beside its token, where 'redlock\n"+
		"status' and the library's Client.Status show it: at most 128 bytes, printable,\n"+
		"without spaces or '@'; \"\" for none (default HOST:PID, this machine's host name\n"+
		"and redlock's process ID)")
	fs.DurationVar(&c.guard, "restart-guard", defaultGuard, "a node up for less than this `duration` abstains, as a restart may have made it\n"+
		"forget its locks; at least -ttl. 0 turns it off: only safe if every node persists\n"+
		"each write (appendonly yes, appendfsync always)")
	fs.DurationVar(&c.nodeTimeout, "node-timeout", 100*time.Millisecond, "bound on each node's answer; a slower node counts as failed")
	fs.Float64Var(&c.driftFactor, "drift-factor", 0.01, "clock drift allowance, as a fraction of -ttl, in [0, 1)")
	prefixFlag(fs, &c.prefix)
	fs.DurationVar(&c.retryMin, "retry-min", 10*time.Millisecond, "first pause between attempts while waiting, when no release wakes redlock")
	fs.DurationVar(&c.retryMax, "retry-max", 250*time.Millisecond, "longest pause between attempts while waiting (they double up to it)")
	return fs
}

// prefixFlag defines -prefix, which fills prefix.
func prefixFlag(fs *flag.FlagSet, prefix *string) {
	fs.StringVar(prefix, "prefix", "redlock:", "prefix of the Redis keys the lock uses")
}

// commandUsage returns the usage text of `redlock run` or `redlock elect` (sub).
func commandUsage(sub string) string {
	var b bytes.Buffer
	head, tail, after, kept := runUsageHead, runUsageTail, "releases the lock", "the lock"
	if sub == cmdElect {
		head, tail, after, kept = electUsageHead, electUsageTail, "resigns", "its leadership"
	}
	b.WriteString(head)
	fs := commandFlags(sub, &runConfig{})
	fs.SetOutput(&b)
	fs.PrintDefaults()
	b.WriteString(accessUsage)
	b.WriteString(tail)
	fmt.Fprintf(&b, signalsUsage, after, kept)
	return b.String()
}

// parseArgs parses args with fs, and takes the arguments that are not flags, up to the
// first after "--", as names: at most most() of them (asked again after each flag parsed),
// which may come before, between and after the flags. It returns the names and the
// arguments after them (those after "--", or from the first argument past the names that
// is not a flag). It returns flag.ErrHelp for -h, or a usageError.
func parseArgs(fs *flag.FlagSet, args []string, most func() int) (names, rest []string, err error) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, nil, err
			}
			return nil, nil, usageError{err.Error()}
		}
		rest = fs.Args()
		ended := len(rest) < len(args) && args[len(args)-len(rest)-1] == "--"
		if ended || len(rest) == 0 || len(names) >= most() {
			return names, rest, nil
		}
		names = append(names, rest[0])
		args = rest[1:]
	}
}

// parseCommand parses the arguments of `redlock run` or `redlock elect` (sub), with getenv
// for REDIS_ADDRS. It returns flag.ErrHelp for -h, or a usageError.
func parseCommand(sub string, args []string, getenv func(string) string) (*runConfig, error) {
	c := &runConfig{sub: sub}
	fs := commandFlags(sub, c)
	// NAME comes first, but for run's older form, -name NAME: given before any other
	// argument that is not a flag, that one begins COMMAND.
	most := func() int {
		if sub == cmdRun && len(c.names) > 0 {
			return 0
		}
		return 1
	}
	names, command, err := parseArgs(fs, args, most)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.command = command
	if len(names) > 0 {
		c.name = names[0]
	}
	if sub == cmdRun {
		c.names = append(names, c.names...)
		if slices.Contains(c.names, "") {
			return nil, usagef("an empty NAME: every lock name must have at least one byte")
		}
		c.names = fold(c.names)
		c.name = lockName(c.names)
	}
	if c.addrs, err = c.conn.nodes(set, getenv); err != nil {
		return nil, err
	}
	if sub == cmdElect && !set["value"] {
		c.value = defaultValue()
	}
	if !set["description"] {
		c.describe = defaultDescription()
	}
	switch {
	case c.name == "" && sub == cmdElect:
		return nil, usagef("no election name: give it first, as in redlock elect NAME -- COMMAND [ARG...]")
	case c.name == "":
		return nil, usagef("no lock name: give it first, as in redlock run NAME -- COMMAND [ARG...]")
	case c.observe && len(c.command) > 0:
		return nil, usagef("-observe runs no command: unexpected %q", strings.Join(c.command, " "))
	case c.observe && slices.ContainsFunc(notObserving, func(f string) bool { return set[f] }):
		return nil, usagef("-observe campaigns for nothing: -%s does not apply", notObserving[slices.IndexFunc(notObserving, func(f string) bool { return set[f] })])
	case len(c.command) == 0 && sub == cmdElect && !c.observe:
		return nil, usagef("no command to run: give it after the flags, as in redlock elect %s -- COMMAND [ARG...]", c.name)
	case len(c.command) == 0 && !c.observe:
		return nil, usagef("no command to run: give it after the flags, as in redlock run %s -- COMMAND [ARG...]", nameFlags(c.names))
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
	case len(c.value) > core.MaxValueLen:
		return nil, usagef("-value of %d bytes: at most %d", len(c.value), core.MaxValueLen)
	}
	if err := c.checkLibrary(); err != nil {
		return nil, err
	}
	return c, nil
}

// fold returns names without repeats: each name once, where it first came.
func fold(names []string) []string {
	var out []string
	for _, name := range names {
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// lockName returns the name of the lock over names (each once) as the library's errors
// give it: "" for none, the name itself for one, and for several the names as fmt.Sprint
// prints them, "[a b]" (see redlock.Client.AcquireAll).
func lockName(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return fmt.Sprint(names)
}

// nameFlags returns the arguments that give names, for a message: the first, then a -name
// flag for each other.
func nameFlags(names []string) string {
	var b strings.Builder
	for i, name := range names {
		if i > 0 {
			b.WriteString(" -name ")
		}
		b.WriteString(name)
	}
	return b.String()
}

// defaultValue returns the value that `redlock elect` proclaims without -value:
// "HOST:PID", this machine's host name and redlock's process ID.
func defaultValue() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// defaultDescription returns the holder's description without -description: "HOST:PID",
// as defaultValue, with each character that a description cannot hold (a space, an '@', one
// not printable: see core.CheckDescription) as '_', and cut to core.MaxDescriptionLen.
func defaultDescription() string {
	d := strings.Map(func(r rune) rune {
		if r == ' ' || r == '@' || r == utf8.RuneError || !unicode.IsPrint(r) {
			return '_'
		}
		return r
	}, defaultValue())
	for len(d) > core.MaxDescriptionLen {
		_, size := utf8.DecodeLastRuneInString(d)
		d = d[:len(d)-size]
	}
	return d
}

// checkLibrary checks the flags that become the library's name and options, as the library
// would (see redlock.New and its options), so that a mistake is reported with the flag's
// name rather than the option's.
func (c *runConfig) checkLibrary() error {
	drift := time.Duration(float64(c.ttl)*c.driftFactor) + 2*time.Millisecond
	for _, name := range c.names {
		if len(name) > redlock.MaxNameLen {
			return usagef("-name of %d bytes: at most %d", len(name), redlock.MaxNameLen)
		}
	}
	switch {
	case len(c.name) > redlock.MaxNameLen && c.sub == cmdElect:
		return usagef("NAME of %d bytes: at most %d", len(c.name), redlock.MaxNameLen)
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
	if err := core.CheckDescription(c.describe); err != nil {
		return usagef("-description: %s", strings.TrimPrefix(trim(err), "invalid argument: "))
	}
	return nil
}

// options returns the library's options for c, with logger for what the library reports
// but cannot return (a wait that keeps failing), and obs for its events (see abstentions).
func (c *runConfig) options(logger *slog.Logger, obs redlock.Observer) []redlock.Option {
	return []redlock.Option{
		redlock.WithTTL(c.ttl),
		redlock.WithNodeTimeout(c.nodeTimeout),
		redlock.WithDriftFactor(c.driftFactor),
		redlock.WithPrefix(c.prefix),
		redlock.WithRetry(c.retryMin, c.retryMax),
		redlock.WithRestartGuard(c.guard),
		redlock.WithAutoExtend(true),
		redlock.WithLogger(logger),
		redlock.WithObserver(obs),
		redlock.WithDescription(c.describe),
	}
}

// parseOneName parses args for the command sub (status, break), which takes flags (fs) and
// one NAME (after "--" if it begins with '-'), and returns the name and the Redis masters
// that conn and getenv give. prefix and timeout are the flags' values once parsed, checked
// here. It returns flag.ErrHelp for -h, or a usageError.
func parseOneName(sub string, fs *flag.FlagSet, args []string, getenv func(string) string, conn *access, prefix *string, timeout *time.Duration) (string, []*redis.Options, error) {
	names, rest, err := parseArgs(fs, args, func() int { return 1 })
	if err != nil {
		return "", nil, err
	}
	if len(names) == 0 && len(rest) > 0 { // NAME after "--": one that begins with '-', say
		names, rest = rest[:1], rest[1:]
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	addrs, err := conn.nodes(set, getenv)
	if err != nil {
		return "", nil, err
	}
	switch {
	case len(names) == 0 || names[0] == "":
		return "", nil, usagef("no name: give it after the flags, as in redlock %s NAME", sub)
	case len(rest) > 0:
		return "", nil, usagef("one name only: unexpected %q", strings.Join(rest, " "))
	case len(names[0]) > redlock.MaxNameLen:
		return "", nil, usagef("NAME of %d bytes: at most %d", len(names[0]), redlock.MaxNameLen)
	case len(addrs) == 0:
		return "", nil, usagef("no Redis address: give -addrs host:port[,host:port...] or set $REDIS_ADDRS")
	case *timeout <= 0:
		return "", nil, usagef("-node-timeout must be positive, got %v", *timeout)
	case len(*prefix) > maxPrefixLen:
		return "", nil, usagef("-prefix of %d bytes: at most %d", len(*prefix), maxPrefixLen)
	}
	if err := core.CheckPrefix(*prefix); err != nil {
		return "", nil, usagef("-prefix: %s", strings.TrimPrefix(trim(err), "invalid argument: "))
	}
	return names[0], addrs, nil
}
