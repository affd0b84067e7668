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
	"sync"
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
exist: on each node, a Semaphore's record of its number of permits first, then
the rest in one MULTI/EXEC (that many permits among them, if recorded), then
the server's run_id (INFO server), which tells two addresses of one server. It only
reads (it writes nothing and takes no lock), and needs no lock. A summary first
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
expiry, so it is not redlock's); tokens are owner tokens, as the nodes hold them:
  schema     1
  name       NAME; key: the lock's Redis key
  quorum     how many nodes make a majority; answered: how many nodes answered
  found      the kinds of keys found under NAME on some node, among "lock" (the lock
             key, its fence counter or its queue), "rwmutex" (readers hold it or wait
             for it), "election" (a leader record), "semaphore" (a record of a
             Semaphore's number of permits: its permits and queue are read only
             on the nodes that have one)
  holder     the writer that holds the lock on a quorum, or null: owner, token (its
             fencing token: the largest fence counter of those nodes), nodes (how many
             hold it), ttl_ms (how long a quorum of them still hold it)
  readers    how many readers hold the lock on a quorum
  leader     the leader record that a quorum hold, its token holding the lock there,
             or null: token, value, nodes
  semaphore  null, or permits (the number of permits most nodes record) and in_use
             (permits held on a quorum: the same permit by the same owner)
  nodes      one object per address, in the order of -addrs:
    addr       the address
    error      why the node could not be read; then every field below is null
    lock       the lock key, or null (free on this node): owner (the holder's token,
               or "(readers)" while readers hold it), readers (true then), ttl_ms
    fence      the lock's fence counter: the fencing token of its last fenced
               holder (every holder but a Mutex's); 0: none
    queue      the waiters for the lock, in turn order, without the holder: id (the
               waiter's), reader (it waits to read), ttl_ms (its place lapses then
               unless it calls again)
    readers    the readers that hold the lock: token, ttl_ms
    leader     the election's leader record, or null: token, value, current (its
               token holds the lock on this node: the leader, if a quorum agree),
               ttl_ms
    semaphore  null (no number of permits recorded on this node), or permits (the
               number recorded), in_use (how many are held), fence (the Semaphore's
               one fence counter, shared by all its permits: the fencing token of
               its last holder, whichever permit; 0: none), held (per permit held:
               permit, its index from 0; owner; fence, the Semaphore's counter as
               above, not necessarily this holder's token; ttl_ms) and queue (the
               waiters for a permit, in turn order, as queue above; a holder is
               not in it)

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
	names, rest, err := parseArgs(fs, args, func() int { return 1 })
	if err != nil {
		return nil, err
	}
	if len(names) == 0 && len(rest) > 0 { // NAME after "--": one that begins with '-', say
		names, rest = rest[:1], rest[1:]
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.addrs, err = c.conn.nodes(set, getenv); err != nil {
		return nil, err
	}
	switch {
	case len(names) == 0 || names[0] == "":
		return nil, usagef("no name: give it after the flags, as in redlock status NAME")
	case len(rest) > 0:
		return nil, usagef("one name only: unexpected %q", strings.Join(rest, " "))
	case len(names[0]) > redlock.MaxNameLen:
		return nil, usagef("NAME of %d bytes: at most %d", len(names[0]), redlock.MaxNameLen)
	case len(c.addrs) == 0:
		return nil, usagef("no Redis address: give -addrs host:port[,host:port...] or set $REDIS_ADDRS")
	case c.timeout <= 0:
		return nil, usagef("-node-timeout must be positive, got %v", c.timeout)
	case len(c.prefix) > maxPrefixLen:
		return nil, usagef("-prefix of %d bytes: at most %d", len(c.prefix), maxPrefixLen)
	}
	if err := core.CheckPrefix(c.prefix); err != nil {
		return nil, usagef("-prefix: %s", strings.TrimPrefix(trim(err), "invalid argument: "))
	}
	c.name = names[0]
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
	rep := readStatus(c)
	if rep.twice != "" {
		fmt.Fprintf(stderr, "redlock status: -addrs: %s\nRun 'redlock status -h' for usage.\n", rep.twice)
		return exitUsage
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

	twice string // two addresses that reach one server, said so; then the rest is not shown
}

// holderSummary is the writer that holds the lock on a quorum of the nodes.
type holderSummary struct {
	Owner string `json:"owner"`
	Token uint64 `json:"token"`
	Nodes int    `json:"nodes"`
	TTLms int64  `json:"ttl_ms"`
}

// leaderSummary is the leader record that a quorum of the nodes hold, current.
type leaderSummary struct {
	Token string `json:"token"`
	Value string `json:"value"`
	Nodes int    `json:"nodes"`
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

	runID string // the server's run_id, or "" if it did not report one
}

// lockState is a node's lock key.
type lockState struct {
	Owner   string `json:"owner"`
	Readers bool   `json:"readers"`
	TTLms   int64  `json:"ttl_ms"`
}

// waiterState is a waiter in a node's queue.
type waiterState struct {
	ID     string `json:"id"`
	Reader bool   `json:"reader"`
	TTLms  int64  `json:"ttl_ms"`
}

// readerState is a reader's share on a node.
type readerState struct {
	Token string `json:"token"`
	TTLms int64  `json:"ttl_ms"`
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
	Permit int    `json:"permit"`
	Owner  string `json:"owner"`
	Fence  uint64 `json:"fence"`
	TTLms  int64  `json:"ttl_ms"`
}

// readersHold is the lock key's value while readers hold the lock (see core's doc).
const readersHold = "(readers)"

// readStatus reads c.name's keys on every node at once, each within c.timeout, and sums
// them up.
func readStatus(c *statusConfig) *statusReport {
	keys := core.NewKeys(c.prefix, c.name)
	rep := &statusReport{Schema: statusSchema, Name: c.name, Key: keys.Lock, Quorum: len(c.addrs)/2 + 1, Found: []string{}}
	set := newNodes(c.addrs)
	defer set.close()
	rep.Nodes = make([]nodeStatus, len(set.clients))
	var wg sync.WaitGroup
	for i, cl := range set.clients {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
			defer cancel()
			n, err := readNode(ctx, cl, c.prefix, keys)
			if err != nil {
				n = nodeStatus{Error: set.explain(i, err, c.timeout)}
			}
			n.Addr = cl.Options().Addr
			rep.Nodes[i] = n
		})
	}
	wg.Wait()
	ids := map[string]int{} // run_id -> the first node that reported it
	for i, n := range rep.Nodes {
		if j, ok := ids[n.runID]; ok && n.runID != "" {
			rep.twice = fmt.Sprintf("%s and %s reach the same server, which must count as one vote: give each server one address", rep.Nodes[j].Addr, n.Addr)
			return rep
		}
		ids[n.runID] = i
	}
	rep.sum()
	return rep
}

// readNode reads every key that a lock, RWMutex, Election or Semaphore called keys.Name
// has under prefix. It first reads the Semaphore's record of its number of permits, K,
// then every key in one transaction (MULTI/EXEC: a snapshot of the node), the K permits
// among them; if the record changed in between, it reads again with the new K. Last it
// reads the server's run_id (see runID).
func readNode(ctx context.Context, c *redis.Client, prefix string, keys core.Keys) (nodeStatus, error) {
	record := core.NewSemaphoreKeys(prefix, keys.Name, 1).Readers
	v, err := c.Get(ctx, record).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nodeStatus{}, fmt.Errorf("get %s: %w", record, err)
	}
	k := recorded(v)
	for try := 1; ; try++ {
		n, now, err := snapshot(ctx, c, prefix, keys, record, k)
		if err != nil || now == k || try == 3 {
			if err == nil {
				n.runID = runID(ctx, c)
			}
			return n, err
		}
		k = now
	}
}

// runID returns the run_id that c's server reports in INFO server, which tells apart two
// addresses of one server; "" if it reports none, or INFO fails (a user whose ACL refuses
// it, say): such a node cannot be compared.
func runID(ctx context.Context, c *redis.Client) string {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return id
		}
	}
	return ""
}

// recorded returns the number of permits of a Semaphore's record, v: 0 for none (or for
// what is not a number).
func recorded(v string) int {
	k, err := strconv.Atoi(v)
	if err != nil || k < 0 {
		return 0
	}
	return k
}

// snapshot is readNode's transaction, which reads k permits (at most MaxPermits) if k > 0.
// It returns the node's state and the number of permits that record, the Semaphore's
// record, holds in the snapshot: a snapshot whose record is not k is to be read again.
func snapshot(ctx context.Context, c *redis.Client, prefix string, keys core.Keys, record string, k int) (nodeStatus, int, error) {
	type lockCmds struct {
		value *redis.StringCmd
		pttl  *redis.Cmd
	}
	type queueCmds struct {
		queue, alive *redis.ZSliceCmd
		waiters      *redis.MapStringStringCmd
	}
	var (
		now                     *redis.TimeCmd
		lock                    lockCmds
		fence, semFence, leader *redis.StringCmd
		permits                 *redis.StringCmd
		queue, semQueue         queueCmds
		readers                 *redis.ZSliceCmd
		leaderTTL               *redis.Cmd
		slots                   []lockCmds
		readLock                = func(p redis.Pipeliner, key string) lockCmds {
			return lockCmds{p.Get(ctx, key), p.Do(ctx, "PTTL", key)}
		}
		readQueue = func(p redis.Pipeliner, k core.Keys) queueCmds {
			return queueCmds{p.ZRangeWithScores(ctx, k.Queue, 0, -1), p.ZRangeWithScores(ctx, k.Alive, 0, -1), p.HGetAll(ctx, k.Waiters)}
		}
	)
	var sem core.Keys
	if k > 0 {
		sem = core.NewSemaphoreKeys(prefix, keys.Name, min(k, redlock.MaxPermits))
		slots = make([]lockCmds, len(sem.Permits))
	}
	cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Time(ctx)
		lock, fence, queue = readLock(p, keys.Lock), p.Get(ctx, keys.Fence), readQueue(p, keys)
		readers = p.ZRangeWithScores(ctx, keys.Readers, 0, -1)
		leader, leaderTTL = p.Get(ctx, keys.Leader), p.Do(ctx, "PTTL", keys.Leader)
		permits = p.Get(ctx, record)
		if k > 0 {
			for i, key := range sem.Permits {
				slots[i] = readLock(p, key)
			}
			semFence, semQueue = p.Get(ctx, sem.Fence), readQueue(p, sem)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nodeStatus{}, 0, err
	}
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return nodeStatus{}, 0, fmt.Errorf("%s: %w", strings.Join(strings.Fields(fmt.Sprint(cmd.Args()...)), " "), err)
		}
	}
	ms := now.Val().UnixMilli()
	left := func(deadline float64) int64 { return int64(deadline) - ms }

	n := nodeStatus{Queue: []waiterState{}, Readers: []readerState{}}
	var holder string // the lock's owner, if a writer
	if v, err := lock.value.Result(); err == nil {
		n.Lock = &lockState{Owner: v, Readers: v == readersHold, TTLms: pttl(lock.pttl)}
		if v != readersHold {
			holder = v
		}
	}
	lockFence := counter(fence)
	n.Fence = &lockFence
	n.Queue = waiters(queue.queue.Val(), queue.alive.Val(), queue.waiters.Val(), holder, left)
	for _, z := range readers.Val() {
		if t := left(z.Score); t > 0 {
			n.Readers = append(n.Readers, readerState{Token: fmt.Sprint(z.Member), TTLms: t})
		}
	}
	if record, err := leader.Result(); err == nil {
		token, value, _ := strings.Cut(record, " ")
		n.Leader = &leaderRecord{Token: token, Value: value, Current: token != "" && token == holder, TTLms: pttl(leaderTTL)}
	}

	if k == 0 {
		return n, recorded(permits.Val()), nil
	}
	// A Semaphore's holders are not in its queue: a waiter granted a permit leaves it.
	s := &semaphoreState{Permits: recorded(permits.Val()), Fence: counter(semFence), Held: []permitState{},
		Queue: waiters(semQueue.queue.Val(), semQueue.alive.Val(), semQueue.waiters.Val(), "", left)}
	for i, slot := range slots {
		if v, err := slot.value.Result(); err == nil {
			s.Held = append(s.Held, permitState{Permit: i, Owner: v, Fence: s.Fence, TTLms: pttl(slot.pttl)})
		}
	}
	s.InUse = len(s.Held)
	if s.Permits > 0 { // else the record went between the reads: see readNode
		n.Semaphore = s
	}
	return n, s.Permits, nil
}

// pttl returns the time left of a PTTL reply, in milliseconds: -1 for a key without an
// expiry, 0 for one that expired as it was read.
func pttl(cmd *redis.Cmd) int64 {
	v, err := cmd.Int64()
	if err != nil || v == -2 {
		return 0
	}
	return v
}

// counter returns the fence counter of a GET reply, or 0 if there is none.
func counter(cmd *redis.StringCmd) uint64 {
	v, err := cmd.Result()
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(v, 10, 64)
	return n
}

// attemptToken matches a waiter's token, "<waiter id>.<attempt>" (see core's doc).
var attemptToken = regexp.MustCompile(`^(.+)\.([0-9]+)$`)

// waiterID returns the waiter id of token, a waiter's token, and true; or token itself and
// false if token is not a waiter's (an owner that took the lock at its first attempt).
func waiterID(token string) (string, bool) {
	if m := attemptToken.FindStringSubmatch(token); m != nil {
		return m[1], true
	}
	return token, false
}

// readerAttempt matches a reader's recorded attempt, "<token> <ttl ms> <fence floor>
// <guard s> r", which a reader of several names follows with the names' lock keys (see
// core's doc).
var readerAttempt = regexp.MustCompile(`^\S+ [0-9]+ [0-9]+ [0-9]+ r(?: |$)`)

// waiters returns a queue's live waiters in turn order, from its keys (see core's doc):
// queue (ids by ticket), alive (ids by the server time at which their place lapses, and
// "!<id>" marks of those that left) and attempts (each id's latest attempt, which marks a
// reader: see readerAttempt). It leaves out the waiter that holds the lock (holder is its
// token) and those whose place has lapsed; left gives the time left until a deadline.
func waiters(queue, alive []redis.Z, attempts map[string]string, holder string, left func(float64) int64) []waiterState {
	deadline := make(map[string]float64, len(alive))
	for _, z := range alive {
		deadline[fmt.Sprint(z.Member)] = z.Score
	}
	holderID, _ := waiterID(holder)
	out := []waiterState{}
	for _, z := range queue {
		id := fmt.Sprint(z.Member)
		d, ok := deadline[id]
		if !ok || left(d) <= 0 || (holder != "" && id == holderID) {
			continue
		}
		out = append(out, waiterState{ID: id, Reader: readerAttempt.MatchString(attempts[id]), TTLms: left(d)})
	}
	return out
}

// explain returns why client i could not be read, with err: the cause of its last failed
// dial if it never connected (go-redis hides it behind the context's error), or how long
// it did not answer.
func (s *nodeSet) explain(i int, err error, timeout time.Duration) string {
	s.mu.Lock()
	dialErr := s.conns[i].dialErr
	s.mu.Unlock()
	switch {
	case !isTimeout(err):
		return err.Error()
	case dialErr != nil:
		return "connecting: " + dialErr.Error()
	}
	return fmt.Sprintf("no answer within -node-timeout %v", timeout)
}

// sum fills the report's summary from its nodes: what a quorum of them hold.
func (rep *statusReport) sum() {
	owners := map[string][]int64{} // per writer: the TTLs of the nodes where it holds the lock
	tokens := map[string]uint64{}  // per writer: the largest fence counter of those nodes
	readers := map[string]int{}
	records := map[leaderSummary]int{}
	permitsSeen := map[int]int{}
	permitOwners := map[[2]string]int{} // per permit and owner: nodes
	found := map[string]bool{}
	for _, n := range rep.Nodes {
		if n.Error != "" {
			continue
		}
		rep.Answered++
		if n.Lock != nil && !n.Lock.Readers {
			owners[n.Lock.Owner] = append(owners[n.Lock.Owner], n.Lock.TTLms)
			tokens[n.Lock.Owner] = max(tokens[n.Lock.Owner], *n.Fence)
		}
		if n.Lock != nil || *n.Fence != 0 || len(n.Queue) > 0 {
			found["lock"] = true
		}
		for _, r := range n.Readers {
			readers[r.Token]++
		}
		if len(n.Readers) > 0 || slices.ContainsFunc(n.Queue, func(w waiterState) bool { return w.Reader }) {
			found["rwmutex"] = true
		}
		if n.Leader != nil {
			found["election"] = true
			if n.Leader.Current {
				records[leaderSummary{Token: n.Leader.Token, Value: n.Leader.Value}]++
			}
		}
		if s := n.Semaphore; s != nil {
			found["semaphore"] = true
			permitsSeen[s.Permits]++
			for _, h := range s.Held {
				permitOwners[[2]string{strconv.Itoa(h.Permit), h.Owner}]++
			}
		}
	}
	for _, kind := range []string{"lock", "rwmutex", "election", "semaphore"} {
		if found[kind] {
			rep.Found = append(rep.Found, kind)
		}
	}
	for owner, ttls := range owners {
		if len(ttls) >= rep.Quorum {
			slices.SortFunc(ttls, func(a, b int64) int { return cmpTTL(b, a) })
			rep.Holder = &holderSummary{Owner: owner, Token: tokens[owner], Nodes: len(ttls), TTLms: ttls[rep.Quorum-1]}
		}
	}
	for _, n := range readers {
		if n >= rep.Quorum {
			rep.Readers++
		}
	}
	for record, n := range records {
		if n >= rep.Quorum {
			record.Nodes = n
			rep.Leader = &record
		}
	}
	if found["semaphore"] {
		s := &semaphoreSumary{}
		most := 0
		for k, n := range permitsSeen {
			if n > most || (n == most && k > s.Permits) {
				s.Permits, most = k, n
			}
		}
		for _, n := range permitOwners {
			if n >= rep.Quorum {
				s.InUse++
			}
		}
		rep.Semaphore = s
	}
}

// cmpTTL orders times left, a key without an expiry (-1) being the longest.
func cmpTTL(a, b int64) int {
	if a < 0 {
		a = 1<<63 - 1
	}
	if b < 0 {
		b = 1<<63 - 1
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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
		fmt.Fprintf(w, "lock: held by %s, token %d, on %d of %d nodes, for %s more\n", shown(h.Owner), h.Token, h.Nodes, len(rep.Nodes), ttl(h.TTLms))
	case rep.Readers > 0:
		fmt.Fprintf(w, "lock: held by %d readers\n", rep.Readers)
	case slices.ContainsFunc(rep.Nodes, func(n nodeStatus) bool { return n.Lock != nil }):
		fmt.Fprintf(w, "lock: not held: no holder has a quorum of the nodes\n")
	case rep.Answered > 0:
		fmt.Fprintf(w, "lock: free\n")
	}
	if l := rep.Leader; l != nil {
		fmt.Fprintf(w, "election leader: %s (token %s), on %d of %d nodes\n", strconv.Quote(l.Value), shown(l.Token), l.Nodes, len(rep.Nodes))
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
