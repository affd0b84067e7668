package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/redis/go-redis/v9"
)

// cmdBreak is the subcommand that ends whatever holds a name.
const cmdBreak = "break"

// breakUsageHead and breakUsageTail frame the flags in `redlock break -h`.
const (
	breakUsageHead = `Usage: redlock break [flags] NAME

End whatever holds NAME on the Redis masters of -addrs, for a holder known to be dead
whose TTL is long: a lock's writer (a Lease, a Mutex, an RWMutex's writer, an
Election's leader, 'redlock run' or 'redlock elect'), an RWMutex's readers, a
Semaphore's permits. It shows what holds NAME (as 'redlock status' does), asks for
confirmation on standard input unless -force, then raises the lock's fence counter
above the writer's fencing token on a majority of the nodes and releases each holding
under its holder's own token, on every node; the first waiter queued is then handed
the lock. A holder that takes NAME after the read is not touched. A NAME that begins
with '-' follows "--": redlock break [flags] -- NAME.

What it risks: a holder that is still running is not stopped, and goes on as if it
held the lock until its next extension fails ('redlock run' then stops its command,
exit 75); meanwhile it runs beside the next holder. Only storage that checks fencing
tokens refuses its late writes, as they carry a token below every later holder's.
Readers and permits carry no token a store can check.

Flags:
`
	breakUsageTail = `
Exit status:
  0   broken, or nothing held NAME
  1   not confirmed
  2   usage error, also two addresses that reach one server
  69  fewer than a majority of the nodes answered (nothing broken), or a release
      or the fence's raise failed (EX_UNAVAILABLE)
`
)

// breakConfig is what `redlock break` was asked to do, parsed and checked.
type breakConfig struct {
	name    string
	conn    access           // how to reach the Redis masters
	addrs   []*redis.Options // one per Redis master, from conn
	prefix  string
	force   bool
	timeout time.Duration // each node's answer
}

// breakFlags returns the flag set of `redlock break`, which fills c.
func breakFlags(c *breakConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("redlock break", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	accessFlags(fs, &c.conn)
	prefixFlag(fs, &c.prefix)
	fs.BoolVar(&c.force, "force", false, "break without asking for confirmation")
	fs.DurationVar(&c.timeout, "node-timeout", 2*time.Second, "bound on each node's answer")
	return fs
}

// breakUsage returns the usage text of `redlock break`.
func breakUsage() string {
	var b strings.Builder
	b.WriteString(breakUsageHead)
	fs := breakFlags(&breakConfig{})
	fs.SetOutput(&b)
	fs.PrintDefaults()
	b.WriteString(accessUsage)
	b.WriteString(breakUsageTail)
	return b.String()
}

// parseBreak parses the arguments of `redlock break`, with getenv for REDIS_ADDRS. It
// returns flag.ErrHelp for -h, or a usageError.
func parseBreak(args []string, getenv func(string) string) (*breakConfig, error) {
	c := &breakConfig{}
	fs := breakFlags(c)
	name, addrs, err := parseOneName("break", fs, args, getenv, &c.conn, &c.prefix, &c.timeout)
	if err != nil {
		return nil, err
	}
	c.name, c.addrs = name, addrs
	return c, nil
}

// breakMain is `redlock break`: it parses args (getenv gives $REDIS_ADDRS), shows what
// holds NAME, asks on stdin for confirmation unless -force, breaks it and returns the exit
// status.
func breakMain(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	c, err := parseBreak(args, getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, breakUsage())
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "redlock break: %v\nRun 'redlock break -h' for usage.\n", err)
		return exitUsage
	}
	set := newNodes(c.addrs)
	defer set.close()
	// The TTL bounds how long a writer's lock stays if the break fails between raising its
	// fence and releasing it; the library wants it above the node timeout.
	client, err := redlock.New(set.nodes, redlock.WithPrefix(c.prefix), redlock.WithRestartGuard(0),
		redlock.WithTTL(max(10*time.Second, 4*c.timeout)), redlock.WithNodeTimeout(c.timeout))
	if err != nil {
		fmt.Fprintf(stderr, "redlock break: %s\n", trim(err))
		return exitUsage
	}
	defer func() { _ = client.Close() }()
	ctx := context.Background()
	st, err := client.Status(ctx, c.name)
	if code, ok := breakFailed(stderr, "reading "+strconv.Quote(c.name), err); !ok {
		return code
	}
	held := describeHolders(st)
	if held == "" {
		fmt.Fprintf(stdout, "%s: nothing holds it\n", strconv.Quote(c.name))
		return 0
	}
	fmt.Fprintf(stdout, "%s is held: %s\n", strconv.Quote(c.name), held)
	if !c.force && !confirmed(stdin, stdout, c.name) {
		fmt.Fprintf(stderr, "redlock break: not confirmed: nothing broken (give -force to break without asking)\n")
		return exitConflictDefault
	}
	b, err := client.Break(ctx, c.name)
	if b != nil {
		fmt.Fprintf(stdout, "broken: %d writers, %d readers, %d permit holders", len(b.Owners), len(b.Readers), len(b.Permits))
		if b.Fence != 0 {
			fmt.Fprintf(stdout, "; fence raised to %d", b.Fence)
		}
		fmt.Fprintln(stdout)
	}
	code, _ := breakFailed(stderr, "breaking "+strconv.Quote(c.name), err)
	return code
}

// breakFailed reports err, if any, to stderr as what failed, and returns the exit status
// and whether there was no error.
func breakFailed(stderr io.Writer, what string, err error) (int, bool) {
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, redlock.ErrInvalid):
		fmt.Fprintf(stderr, "redlock break: %s\nRun 'redlock break -h' for usage.\n", trim(err))
		return exitUsage, false
	}
	fmt.Fprintf(stderr, "redlock break: %s: %s\n", what, trim(err))
	return exitUnavailable, false
}

// describeHolders says what holds the name on some node, or "" if nothing does.
func describeHolders(st *redlock.Status) string {
	var parts []string
	owners := map[string]bool{}
	readers, permits := 0, 0
	for _, n := range st.Nodes {
		if n.Lock != nil && !n.Lock.Readers && !owners[n.Lock.Owner] {
			owners[n.Lock.Owner] = true
			parts = append(parts, "writer "+shown(n.Lock.Owner))
		}
		readers = max(readers, len(n.Readers))
		if n.Semaphore != nil {
			permits = max(permits, n.Semaphore.InUse)
		}
	}
	if h := st.Holder; h != nil {
		left := h.TTL.Milliseconds()
		if h.TTL == redlock.NoExpiry {
			left = -1
		}
		parts = append(parts, fmt.Sprintf("token %d, on %d of %d nodes, for %s more", h.Token, h.Nodes, len(st.Nodes), ttl(left)))
	}
	if readers > 0 {
		parts = append(parts, fmt.Sprintf("%d readers", readers))
	}
	if permits > 0 {
		parts = append(parts, fmt.Sprintf("%d permits in use", permits))
	}
	return strings.Join(parts, "; ")
}

// confirmed asks on stdout whether to break name and reports whether the first line of
// stdin says yes.
func confirmed(stdin io.Reader, stdout io.Writer, name string) bool {
	fmt.Fprintf(stdout, "Break %s? Its holder, if it still runs, is not stopped. [y/N] ", strconv.Quote(name))
	line, _ := bufio.NewReader(stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	fmt.Fprintln(stdout)
	return false
}
