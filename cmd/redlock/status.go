package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
)

// cmdStatus is the subcommand that shows who holds a name.
const cmdStatus = "status"

// statusSchema is the version of `redlock status -json`'s output, its "schema" field. It
// changes only if a field changes its meaning or goes away; new fields may be added
// without a change.
const statusSchema = 1

// statusUsageHead and statusUsageTail frame the flags in `redlock status -h`. doc.go and
// the README say the same.
const (
	statusUsageHead = `Usage: redlock status [flags] NAME

Show who holds NAME, and who waits for it, on each Redis master of -addrs: the lock
NAME (held by a Lease, a Mutex, an RWMutex's writer, an Election's leader, or
'redlock run' and 'redlock elect'), with its holder's fencing token and time left;
the waiters queued for it, and the first of them; an RWMutex's readers and their
time left; an Election's leader record; and a Semaphore's number of permits (as
the nodes record it), its permits in use, its fence counter and the waiters queued
for a permit. It reads every kind of key a name can have and shows those that
exist, as the library's Client.Status does: on each node, in one read-only script
that also reads the server's run_id (INFO server), which tells two addresses of
one server, and again with a Semaphore's permits on a node that records their
number. It only reads (it writes nothing and takes no lock). A summary first
says what a majority of the nodes agree on, which is what holds: the holder,
readers, leader and permits in use that a quorum of nodes have (unknown while
fewer than a quorum answer). A NAME that begins with '-' follows "--": redlock
status [flags] -- NAME.

-json prints one JSON object instead, whose fields are described below.

Flags:
`
	statusUsageTail = `
Output of -json, one object (the format is version 1, its "schema" field; later
versions only add fields). Times left are in milliseconds (-1: the key has no
expiry, so it is not redlock's); tokens are owner tokens, as the nodes hold them,
and a description is what a holder's token carries before its first '@' ("": none):
  schema     1
  name       NAME; key: the lock's Redis key
  quorum     how many nodes make a majority; answered: how many nodes answered
  found      the kinds of keys found under NAME on some node, among "lock" (the lock
             key, its fence counter or its queue), "rwmutex" (readers hold it or wait
             for it), "election" (a leader record), "semaphore" (a record of a
             Semaphore's number of permits: its permits and queue are read only
             on the nodes that have one)
  holder     the writer that holds the lock on a quorum, or null: owner, description
             (the holder's, from its token: 'redlock run -description', the library's
             WithDescription; "": none), token (its fencing token: the largest fence
             counter of those nodes), nodes (how many hold it), ttl_ms (how long a
             quorum of them still hold it)
  readers    how many readers hold the lock on a quorum
  leader     the leader record that a quorum hold, its token holding the lock there,
             or null: token, description (as holder's), value, nodes
  semaphore  null, or permits (the number of permits most nodes record) and in_use
             (permits held on a quorum: the same permit by the same owner)
  nodes      one object per address, in the order of -addrs:
    addr       the address
    error      why the node could not be read; then every field below is null
    lock       the lock key, or null (free on this node): owner (the holder's token,
               or "(readers)" while readers hold it), description (as holder's),
               readers (true then), ttl_ms
    fence      the lock's fence counter: the fencing token of its last fenced
               holder (every holder but a Mutex's); 0: none
    queue      the waiters for the lock, in turn order, without the holder: id (the
               waiter's), description (the waiter's, from its id), reader (it
               waits to read), ttl_ms (its place lapses then unless it calls again)
    readers    the readers that hold the lock: token, description, ttl_ms
    leader     the election's leader record, or null: token, value, current (its
               token holds the lock on this node: the leader, if a quorum agree),
               ttl_ms
    semaphore  null (no number of permits recorded on this node), or permits (the
               number recorded), in_use (how many are held), fence (the Semaphore's
               one fence counter, shared by all its permits: the fencing token of
               its last holder, whichever permit; 0: none), held (per permit held:
               permit, its index from 0; owner; description; fence, the Semaphore's
               counter as above, not necessarily this holder's token; ttl_ms) and
               queue (the waiters for a permit, in turn order, as queue above; a
               holder is not in it)

Exit status:
  0   at least one node answered, whatever NAME's state (free included)
  2   usage error, also two addresses that reach one server (by its run_id)
  69  no node answered (EX_UNAVAILABLE)
`
)

// statusConfig is what `redlock status` was asked to show, parsed and checked.
type statusConfig struct {
	name    string
	conn    access           // how to reach the Redis masters
	addrs   []*redis.Options // one per Redis master, from conn
	prefix  string
	json    bool
	timeout time.Duration // each node's answer, connecting included
}

// statusFlags returns the flag set of `redlock status`, which fills c.
func statusFlags(c *statusConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("redlock status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	accessFlags(fs, &c.conn)
	prefixFlag(fs, &c.prefix)
	fs.BoolVar(&c.json, "json", false, "print one JSON object, whose fields the end of this text describes")
	fs.DurationVar(&c.timeout, "node-timeout", 2*time.Second, "bound on each node's answer, connecting included; a slower node is shown as\nnot answering")
	return fs
}

// statusUsage returns the usage text of `redlock status`.
func statusUsage() string {
	var b strings.Builder
	b.WriteString(statusUsageHead)
	fs := statusFlags(&statusConfig{})
	fs.SetOutput(&b)
	fs.PrintDefaults()
	b.WriteString(accessUsage)
	b.WriteString(statusUsageTail)
	return b.String()
}

// parseStatus parses the arguments of `redlock status`, with getenv for REDIS_ADDRS. It
// returns flag.ErrHelp for -h, or a usageError.
func parseStatus(args []string, getenv func(string) string) (*statusConfig, error) {
	c := &statusConfig{}
	fs := statusFlags(c)
	name, addrs, err := parseOneName("status", fs, args, getenv, &c.conn, &c.prefix, &c.timeout)
	if err != nil {
		return nil, err
	}
	c.name, c.addrs = name, addrs
	return c, nil
}

// statusMain is `redlock status`: it parses args (getenv gives $REDIS_ADDRS), reads NAME's
// keys on every node, prints them to stdout and returns the exit status.
func statusMain(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c, err := parseStatus(args, getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, statusUsage())
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "redlock status: %v\nRun 'redlock status -h' for usage.\n", err)
		return exitUsage
	}
	rep, err := readStatus(c)
	var usage usageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "redlock status: %v\nRun 'redlock status -h' for usage.\n", err)
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "redlock status: %s\n", trim(err))
		return exitUnavailable
	}
	if c.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep) // nothing to do about a closed stdout
	} else {
		printStatus(stdout, rep)
	}
	if rep.Answered == 0 {
		fmt.Fprintf(stderr, "redlock status: no node answered\n")
		return exitUnavailable
	}
	return 0
}

// statusReport is the output of `redlock status -json` (see statusUsageTail).
type statusReport struct {
	Schema    int              `json:"schema"`
	Name      string           `json:"name"`
	Key       string           `json:"key"`
	Quorum    int              `json:"quorum"`
	Answered  int              `json:"answered"`
	Found     []string         `json:"found"`
	Holder    *holderSummary   `json:"holder"`
	Readers   int              `json:"readers"`
	Leader    *leaderSummary   `json:"leader"`
	Semaphore *semaphoreSumary `json:"semaphore"`
	Nodes     []nodeStatus     `json:"nodes"`
}

// holderSummary is the writer that holds the lock on a quorum of the nodes.
type holderSummary struct {
	Owner       string `json:"owner"`
	Description string `json:"description"`
	Token       uint64 `json:"token"`
	Nodes       int    `json:"nodes"`
	TTLms       int64  `json:"ttl_ms"`
}

// leaderSummary is the leader record that a quorum of the nodes hold, current.
type leaderSummary struct {
	Token       string `json:"token"`
	Description string `json:"description"`
	Value       string `json:"value"`
	Nodes       int    `json:"nodes"`
}

// semaphoreSumary is what a quorum of the nodes say of a Semaphore.
type semaphoreSumary struct {
	Permits int `json:"permits"`
	InUse   int `json:"in_use"`
}

// nodeStatus is what one node holds under the name. For a node that could not be read,
// Error is set and every other field but Addr is nil.
type nodeStatus struct {
	Addr      string          `json:"addr"`
	Error     string          `json:"error,omitempty"`
	Lock      *lockState      `json:"lock"`
	Fence     *uint64         `json:"fence"`
	Queue     []waiterState   `json:"queue"`
	Readers   []readerState   `json:"readers"`
	Leader    *leaderRecord   `json:"leader"`
	Semaphore *semaphoreState `json:"semaphore"`
}

// lockState is a node's lock key.
type lockState struct {
	Owner       string `json:"owner"`
	Description string `json:"description"`
	Readers     bool   `json:"readers"`
	TTLms       int64  `json:"ttl_ms"`
}

// waiterState is a waiter in a node's queue.
type waiterState struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	Reader      bool   `json:"reader"`
	TTLms       int64  `json:"ttl_ms"`
}

// readerState is a reader's share on a node.
type readerState struct {
	Token       string `json:"token"`
	Description string `json:"description"`
	TTLms       int64  `json:"ttl_ms"`
}

// leaderRecord is a node's record of an election's leader.
type leaderRecord struct {
	Token   string `json:"token"`
	Value   string `json:"value"`
	Current bool   `json:"current"`
	TTLms   int64  `json:"ttl_ms"`
}

// semaphoreState is what a node holds of a Semaphore.
type semaphoreState struct {
	Permits int           `json:"permits"`
	InUse   int           `json:"in_use"`
	Fence   uint64        `json:"fence"` // the Semaphore's one fence counter
	Held    []permitState `json:"held"`
	Queue   []waiterState `json:"queue"`
}

// permitState is a permit held on a node. Its Fence is the Semaphore's fence counter, not
// the holder's own token: the Semaphore has one counter for all its permits.
type permitState struct {
	Permit      int    `json:"permit"`
	Owner       string `json:"owner"`
	Description string `json:"description"`
	Fence       uint64 `json:"fence"`
	TTLms       int64  `json:"ttl_ms"`
}

// readStatus reads c.name's keys on every node at once, each within c.timeout, through a
// redlock Client's Status. It returns a usageError for two addresses that reach one server,
// or another error if it could read no node at all.
func readStatus(c *statusConfig) (*statusReport, error) {
	set := newNodes(c.addrs)
	defer set.close()
	// Status takes no lock: the TTL only has to be above the node timeout, as New wants.
	client, err := redlock.New(set.nodes, redlock.WithPrefix(c.prefix), redlock.WithRestartGuard(0),
		redlock.WithTTL(max(10*time.Second, 4*c.timeout)), redlock.WithNodeTimeout(c.timeout))
	if err != nil {
		return nil, usagef("%s", trim(err))
	}
	defer func() { _ = client.Close() }()
	st, err := client.Status(context.Background(), c.name)
	switch {
	case st != nil: // err, if any, says that fewer than a quorum answered: so does the report
	case errors.Is(err, redlock.ErrInvalid):
		return nil, invalidStatus(err, c.name, c.addrs)
	default:
		return nil, err
	}
	return newReport(st, c.addrs, func(i int, err error) string { return set.explain(i, err, c.timeout) }), nil
}

// sameNodes matches the library's error for two nodes that reach one server, and gives
// their indices.
var sameNodes = regexp.MustCompile(`nodes ([0-9]+) \(.*\) and ([0-9]+) \(.*\) reach the same server`)

// invalidStatus returns err, an error of Status about name that matches redlock.ErrInvalid,
// as a usage error: for two nodes that reach one server, one about -addrs that names them
// as -addrs gives them.
func invalidStatus(err error, name string, addrs []*redis.Options) error {
	msg := opLock(strconv.Quote(name)).ReplaceAllString(err.Error(), "")
	msg = strings.TrimPrefix(strings.ReplaceAll(msg, "redlock: ", ""), "invalid argument: ")
	if m := sameNodes.FindStringSubmatch(msg); m != nil {
		i, _ := strconv.Atoi(m[1])
		j, _ := strconv.Atoi(m[2])
		if i < len(addrs) && j < len(addrs) {
			return usagef("-addrs: %s and %s reach the same server, which must count as one vote: give each server one address", addrs[i].Addr, addrs[j].Addr)
		}
	}
	return usagef("%s", msg)
}

// explain returns why client i could not be read, from err, its error in the Status: the
// cause of its last failed dial if it has not connected since, or how long it did not
// answer.
func (s *nodeSet) explain(i int, err error, timeout time.Duration) string {
	s.mu.Lock()
	dialErr := s.conns[i].dialErr
	s.mu.Unlock()
	timedOut := isTimeout(err) || errors.Is(err, redlock.ErrNodeTimeout)
	switch {
	case dialErr != nil && (timedOut || errors.Is(err, dialErr)):
		return "connecting: " + dialErr.Error()
	case timedOut:
		return fmt.Sprintf("no answer within -node-timeout %v", timeout)
	}
	return trim(err)
}

// newReport returns the report of st, whose nodes have the addresses addrs; explain says
// why node i could not be read, from its error.
func newReport(st *redlock.Status, addrs []*redis.Options, explain func(i int, err error) string) *statusReport {
	rep := &statusReport{Schema: statusSchema, Name: st.Name, Key: st.Key, Quorum: st.Quorum, Answered: st.Answered,
		Found: append([]string{}, st.Found...), Readers: st.Readers, Nodes: make([]nodeStatus, len(st.Nodes))}
	if h := st.Holder; h != nil {
		rep.Holder = &holderSummary{Owner: h.Owner, Description: h.Description, Token: h.Token, Nodes: h.Nodes, TTLms: millis(h.TTL)}
	}
	if l := st.Leader; l != nil {
		rep.Leader = &leaderSummary{Token: l.Token, Description: l.Description, Value: l.Value, Nodes: l.Nodes}
	}
	if s := st.Semaphore; s != nil {
		rep.Semaphore = &semaphoreSumary{Permits: s.Permits, InUse: s.InUse}
	}
	for i, n := range st.Nodes {
		if n.Err != nil {
			rep.Nodes[i] = nodeStatus{Error: explain(i, n.Err)}
		} else {
			rep.Nodes[i] = newNodeStatus(n)
		}
		rep.Nodes[i].Addr = addrs[i].Addr
	}
	return rep
}

// newNodeStatus returns the report of n, a node that answered, without its address.
func newNodeStatus(n redlock.NodeStatus) nodeStatus {
	fence := n.Fence
	out := nodeStatus{Fence: &fence, Queue: newWaiters(n.Queue), Readers: []readerState{}}
	if l := n.Lock; l != nil {
		out.Lock = &lockState{Owner: l.Owner, Description: l.Description, Readers: l.Readers, TTLms: millis(l.TTL)}
	}
	for _, r := range n.Readers {
		out.Readers = append(out.Readers, readerState{Token: r.Token, Description: r.Description, TTLms: millis(r.TTL)})
	}
	if l := n.Leader; l != nil {
		out.Leader = &leaderRecord{Token: l.Token, Value: l.Value, Current: l.Current, TTLms: millis(l.TTL)}
	}
	if s := n.Semaphore; s != nil {
		out.Semaphore = &semaphoreState{Permits: s.Permits, InUse: s.InUse, Fence: s.Fence, Held: []permitState{}, Queue: newWaiters(s.Queue)}
		for _, p := range s.Held {
			out.Semaphore.Held = append(out.Semaphore.Held, permitState{Permit: p.Index, Owner: p.Owner, Description: p.Description, Fence: s.Fence, TTLms: millis(p.TTL)})
		}
	}
	return out
}

// newWaiters returns the report of a queue's waiters.
func newWaiters(ws []core.Waiter) []waiterState {
	out := []waiterState{}
	for _, w := range ws {
		out = append(out, waiterState{ID: w.ID, Description: w.Description, Reader: w.Reader, TTLms: millis(w.TTL)})
	}
	return out
}

// millis returns a time left in milliseconds: -1 for redlock.NoExpiry.
func millis(d time.Duration) int64 {
	if d == redlock.NoExpiry {
		return -1
	}
	return d.Milliseconds()
}

// ttl formats a time left in milliseconds for the table.
func ttl(ms int64) string {
	if ms < 0 {
		return "no expiry"
	}
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d >= time.Minute:
		d = d.Round(time.Second)
	case d >= time.Second:
		d = d.Round(10 * time.Millisecond)
	}
	return d.String()
}

// printStatus writes rep as text: a summary, a table of the nodes, and a table for each
// kind of key found beyond the lock.
func printStatus(w io.Writer, rep *statusReport) {
	fmt.Fprintf(w, "%s (key %s): %d of %d nodes answered, quorum %d\n", strconv.Quote(rep.Name), shown(rep.Key), rep.Answered, len(rep.Nodes), rep.Quorum)
	few := rep.Answered > 0 && rep.Answered < rep.Quorum // the silent nodes may hold what the rest lack
	switch h := rep.Holder; {
	case few:
		fmt.Fprintf(w, "lock: unknown: fewer than a quorum answered\n")
	case h != nil:
		fmt.Fprintf(w, "lock: held by %s%s, token %d, on %d of %d nodes, for %s more\n", shown(h.Owner), describedAs(h.Description), h.Token, h.Nodes, len(rep.Nodes), ttl(h.TTLms))
	case rep.Readers > 0:
		fmt.Fprintf(w, "lock: held by %d readers\n", rep.Readers)
	case slices.ContainsFunc(rep.Nodes, func(n nodeStatus) bool { return n.Lock != nil }):
		fmt.Fprintf(w, "lock: not held: no holder has a quorum of the nodes\n")
	case rep.Answered > 0:
		fmt.Fprintf(w, "lock: free\n")
	}
	if l := rep.Leader; l != nil {
		fmt.Fprintf(w, "election leader: %s (token %s%s), on %d of %d nodes\n", strconv.Quote(l.Value), shown(l.Token), describedAs(l.Description), l.Nodes, len(rep.Nodes))
	}
	switch s := rep.Semaphore; {
	case s != nil && few:
		fmt.Fprintf(w, "semaphore: permits in use unknown: fewer than a quorum answered; %d permits\n", s.Permits)
	case s != nil:
		fmt.Fprintf(w, "semaphore: %d permits in use of %d\n", s.InUse, s.Permits)
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nNODE\tLOCK\tTTL\tTOKEN\tQUEUE\tHEAD\tREADERS\n")
	var leaders, semaphores, readers bool
	for _, n := range rep.Nodes {
		if n.Error != "" {
			fmt.Fprintf(tw, "%s\tnot answering: %s\n", n.Addr, n.Error)
			continue
		}
		lock, left, token := "free", "-", "-"
		if l := n.Lock; l != nil {
			lock, left = "held by "+shown(l.Owner), ttl(l.TTLms)
			if l.Readers {
				lock = "readers"
			} else if *n.Fence != 0 {
				token = strconv.FormatUint(*n.Fence, 10)
			}
		}
		head := "-"
		if len(n.Queue) > 0 {
			head = waiterText(n.Queue[0])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\n", n.Addr, lock, left, token, len(n.Queue), head, len(n.Readers))
		leaders = leaders || n.Leader != nil
		semaphores = semaphores || n.Semaphore != nil
		readers = readers || len(n.Readers) > 0
	}
	_ = tw.Flush()

	if readers {
		fmt.Fprintf(tw, "\nNODE\tREADER\tTTL\n")
		for _, n := range rep.Nodes {
			for _, r := range n.Readers {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", n.Addr, shown(r.Token), ttl(r.TTLms))
			}
		}
		_ = tw.Flush()
	}
	if leaders {
		fmt.Fprintf(tw, "\nNODE\tLEADER\tVALUE\tCURRENT\tTTL\n")
		for _, n := range rep.Nodes {
			if l := n.Leader; l != nil {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\n", n.Addr, shown(l.Token), strconv.Quote(l.Value), l.Current, ttl(l.TTLms))
			}
		}
		_ = tw.Flush()
	}
	if semaphores {
		fmt.Fprintf(tw, "\nNODE\tPERMITS\tIN USE\tFENCE\tWAITING\tHEAD\n")
		for _, n := range rep.Nodes {
			s := n.Semaphore
			if s == nil {
				continue
			}
			fence, head := "-", "-"
			if s.Fence != 0 {
				fence = strconv.FormatUint(s.Fence, 10)
			}
			if len(s.Queue) > 0 {
				head = waiterText(s.Queue[0])
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%s\n", n.Addr, s.Permits, s.InUse, fence, len(s.Queue), head)
		}
		_ = tw.Flush()
		if !slices.ContainsFunc(rep.Nodes, func(n nodeStatus) bool { return n.Semaphore != nil && len(n.Semaphore.Held) > 0 }) {
			return
		}
		fmt.Fprintf(tw, "\nNODE\tPERMIT\tOWNER\tTTL\n")
		for _, n := range rep.Nodes {
			if n.Semaphore == nil {
				continue
			}
			for _, h := range n.Semaphore.Held {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", n.Addr, h.Permit, shown(h.Owner), ttl(h.TTLms))
			}
		}
		_ = tw.Flush()
	}
}

// describedAs returns what follows a holder's token in the summary: ", described as D"
// for its description D, or "" for none.
func describedAs(d string) string {
	if d == "" {
		return ""
	}
	return ", described as " + shown(d)
}

// waiterText describes a waiter for the table: its id, whether it waits to read or to
// write, and the time left of its place.
func waiterText(w waiterState) string {
	kind := "writer"
	if w.Reader {
		kind = "reader"
	}
	return fmt.Sprintf("%s (%s, %s)", shown(w.ID), kind, ttl(w.TTLms))
}

// shown returns s, a key or what a node holds, for the text: as it is, or quoted (as Go
// quotes it) if it has a byte that quoting escapes, such as a newline, a tab or invalid
// UTF-8, so that it keeps to its line and its column.
func shown(s string) string {
	if q := strconv.Quote(s); q[1:len(q)-1] != s {
		return q
	}
	return s
}
