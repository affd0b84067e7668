package core

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// NoExpiry is the time left of a key without an expiry, which is not redlock's.
const NoExpiry time.Duration = -1

// ReadersHold is the lock key's value while readers hold the lock (see the package doc,
// Readers).
const ReadersHold = "(readers)"

// Status is what the nodes hold under one name, read by Cluster.Status: per node, and what a
// quorum of them agree on, which is what holds. A Status is a snapshot: it is not updated.
type Status struct {
	Name     string // the name as given
	Key      string // the lock's Redis key
	Quorum   int    // how many nodes make a majority
	Answered int    // how many nodes answered
	// Found are the kinds of keys found under the name on some node, in this order, among
	// "lock" (the lock key, its fence counter or its queue), "rwmutex" (readers hold it or
	// wait for it), "election" (a leader record) and "semaphore" (a Semaphore's record of
	// its number of permits).
	Found []string
	// Holder is the writer that holds the lock on a quorum, or nil.
	Holder *Holder
	// Readers is how many readers hold the lock on a quorum.
	Readers int
	// Leader is the election's leader record that a quorum hold, its token holding the lock
	// there, or nil.
	Leader *Leader
	// Semaphore is what the nodes say of a Semaphore of the name, or nil if none records one.
	Semaphore *SemaphoreSummary
	// Nodes are the nodes' states, in the Cluster's order.
	Nodes []NodeStatus
}

// Known reports whether a quorum of the nodes answered. While fewer did, the nodes that did
// not may hold what the others lack: Holder, Readers, Leader and the Semaphore's permits in
// use are unknown, not absent.
func (s *Status) Known() bool { return s.Answered >= s.Quorum }

// Holder is the writer that holds a lock on a quorum of the nodes.
type Holder struct {
	Owner       string        // the owner's token on the nodes (see the package doc, Tokens)
	Description string        // the holder's description that Owner carries (see Lock.Description), or ""
	Token       uint64        // its fencing token: the largest fence counter of those nodes
	Nodes       int           // how many nodes it holds
	TTL         time.Duration // how long a quorum of them still hold it (NoExpiry: no expiry)
}

// Leader is an election's leader record that a quorum of the nodes hold.
type Leader struct {
	Token       string // the leader's owner token
	Description string // the leader's description that Token carries (see Lock.Description), or ""
	Value       string // the value it proclaimed
	Nodes       int    // how many nodes hold the record, its token holding the lock there
}

// SemaphoreSummary is what a quorum of the nodes say of a Semaphore.
type SemaphoreSummary struct {
	Permits int // the number of permits that most nodes record
	InUse   int // the permits held on a quorum: the same permit by the same owner
}

// NodeStatus is what one node holds under a name. For a node that could not be read, Err
// is set and every other field but Node is zero.
type NodeStatus struct {
	Node  string // the node's String
	Err   error  // why the node could not be read
	Lock  *LockKey
	Fence uint64 // the lock's fence counter: the token of its last fenced holder; 0: none
	// Queue are the waiters for the lock, in turn order, without its holder.
	Queue []Waiter
	// Readers are the readers' shares that hold the lock.
	Readers   []Share
	Leader    *LeaderRecord
	Semaphore *SemaphoreStatus // nil: no number of permits recorded on this node

	server string // the run_id the server reported, or ""
}

// LockKey is a node's lock key.
type LockKey struct {
	Owner       string        // the holder's token, or ReadersHold while readers hold it
	Description string        // the holder's description that Owner carries (see Lock.Description), or ""
	Readers     bool          // readers hold the lock
	TTL         time.Duration // its time left (NoExpiry: no expiry)
}

// Waiter is a waiter in a node's queue.
type Waiter struct {
	ID          string        // the waiter's id
	Description string        // the waiter's description that ID carries (see Lock.Description), or ""
	Reader      bool          // it waits to read
	TTL         time.Duration // its place lapses then, unless it calls again
}

// Share is a reader's share of a lock on a node.
type Share struct {
	Token       string
	Description string // the reader's description that Token carries (see Lock.Description), or ""
	TTL         time.Duration
}

// LeaderRecord is a node's record of an election's leader.
type LeaderRecord struct {
	Token   string
	Value   string
	Current bool // its token holds the lock on this node: the leader, if a quorum agree
	TTL     time.Duration
}

// SemaphoreStatus is what a node holds of a Semaphore.
type SemaphoreStatus struct {
	Permits int    // the number of permits recorded
	InUse   int    // how many are held
	Fence   uint64 // the Semaphore's one fence counter, shared by all its permits; 0: none
	Held    []Permit
	Queue   []Waiter // the waiters for a permit, in turn order; a holder is not in it
}

// Permit is a Semaphore's permit held on a node.
type Permit struct {
	Index       int    // the permit's index, from 0
	Owner       string // its holder's token
	Description string // its holder's description that Owner carries (see Lock.Description), or ""
	TTL         time.Duration
}

// Status reads every key that a lock, an RWMutex, an Election or a Semaphore called name
// has under prefix, on every node at once, each within timeout, and sums up what a quorum
// hold. On each node it runs the status script, which only reads: once without a
// Semaphore's keys, and again with them where the node records a number of permits (again
// if that number changed in between, at most three reads in all). It returns once every
// node answered or timed out.
//
// Errors: one that matches ErrInvalid if two nodes reported one server's run_id (then the
// Status is nil: one server would count twice); a *QuorumError if fewer than a quorum
// answered, or ctx's error if ctx ended first, each with the Status (whose Known is false).
// It is safe for concurrent use.
func (c *Cluster) Status(ctx context.Context, prefix, name string, timeout time.Duration) (*Status, error) {
	keys := NewKeys(prefix, name)
	st := &Status{Name: name, Key: keys.Lock, Quorum: c.quorum, Found: []string{}, Nodes: make([]NodeStatus, len(c.nodes))}
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() {
			dctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			s, err := readNode(dctx, n, prefix, keys)
			if err = explained(err, c.sharded[i], statusScript); err != nil {
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					err = timeoutError(timeout, err)
				}
				s = NodeStatus{Err: err}
			}
			s.Node = n.String()
			st.Nodes[i] = s
		})
	}
	wg.Wait()
	servers := map[string]int{}
	for i, n := range st.Nodes {
		if j, ok := servers[n.server]; ok && n.server != "" {
			return nil, opError("status", name, fmt.Errorf("%w: nodes %d (%s) and %d (%s) reach the same server, which must count as one vote: give each server one Node",
				ErrInvalid, j, st.Nodes[j].Node, i, n.Node))
		}
		servers[n.server] = i
	}
	st.sum()
	switch {
	case st.Known():
		return st, nil
	case ctx.Err() != nil:
		return st, ctxError(ctx, "status", name)
	}
	qe := &QuorumError{Op: "status", Key: name, Quorum: c.quorum, Nodes: len(c.nodes), OK: st.Answered}
	for _, n := range st.Nodes {
		if n.Err != nil {
			qe.Errs = append(qe.Errs, NodeError{Node: n.Node, Err: n.Err})
		}
	}
	return st, qe
}

// readNode reads node n's keys of the name whose keys are keys: first without a Semaphore's
// keys, then, if the node records K permits, with them, until the record read is the one
// whose K permits were read (at most three reads).
func readNode(ctx context.Context, n Node, prefix string, keys Keys) (NodeStatus, error) {
	base := []string{keys.Lock, keys.Fence, keys.Queue, keys.Alive, keys.Waiters, keys.Readers, keys.Leader,
		NewSemaphoreKeys(prefix, keys.Name, 1).Readers}
	k := 0
	for try := 1; ; try++ {
		args := base
		if k > 0 {
			sem := NewSemaphoreKeys(prefix, keys.Name, min(k, maxPermits))
			args = append(append(slices.Clip(base), sem.Fence, sem.Queue, sem.Alive, sem.Waiters), sem.Permits...)
		}
		vals, err := n.EvalStrings(ctx, statusScript, args)
		if err != nil {
			return NodeStatus{}, err
		}
		s, now, err := parseStatus(vals, min(k, maxPermits))
		if err != nil || now == k || try == 3 {
			return s, err
		}
		k = now
	}
}

// maxPermits is the most permits of a Semaphore that Status reads: the root package's
// MaxPermits.
const maxPermits = 1 << 10

// statusReply reads a status script's reply in order.
type statusReply struct {
	vals []string
	err  error
}

// next returns the next value, or "" once the reply is short (and records the error).
func (r *statusReply) next() string {
	if len(r.vals) == 0 {
		r.err = errors.New("redlock: status script: a short reply")
		return ""
	}
	v := r.vals[0]
	r.vals = r.vals[1:]
	return v
}

// int returns the next value as an integer.
func (r *statusReply) int() int64 {
	v := r.next()
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("redlock: status script: %q where an integer belongs", v)
	}
	return n
}

// list returns the next list: a count, then that many values.
func (r *statusReply) list() []string {
	n := r.int()
	if n < 0 || n > int64(len(r.vals)) {
		if r.err == nil {
			r.err = fmt.Errorf("redlock: status script: a list of %d values where %d are left", n, len(r.vals))
		}
		return nil
	}
	out := r.vals[:n]
	r.vals = r.vals[n:]
	return out
}

// scored returns the next list as member, score pairs: the members in order, and each
// member's score.
func (r *statusReply) scored() ([]string, map[string]float64) {
	l := r.list()
	members, scores := make([]string, 0, len(l)/2), make(map[string]float64, len(l)/2)
	for i := 0; i+1 < len(l); i += 2 {
		score, _ := strconv.ParseFloat(l[i+1], 64)
		members, scores[l[i]] = append(members, l[i]), score
	}
	return members, scores
}

// hash returns the next list as a hash's fields and values.
func (r *statusReply) hash() map[string]string {
	l := r.list()
	h := make(map[string]string, len(l)/2)
	for i := 0; i+1 < len(l); i += 2 {
		h[l[i]] = l[i+1]
	}
	return h
}

// queue returns the next three lists, a queue's keys (see waiters).
func (r *statusReply) queue(holder string, left func(float64) time.Duration) []Waiter {
	queue, _ := r.scored()
	_, alive := r.scored()
	return waiters(queue, alive, r.hash(), holder, left)
}

// parseStatus reads vals, the reply of a status script given k permits, into a node's state.
// It also returns the number of permits the node's record holds: a state whose record is not
// k is to be read again.
func parseStatus(vals []string, k int) (NodeStatus, int, error) {
	r := &statusReply{vals: vals}
	ms := r.int()
	left := func(deadline float64) time.Duration { return time.Duration(int64(deadline)-ms) * time.Millisecond }
	s := NodeStatus{server: r.next(), Queue: []Waiter{}, Readers: []Share{}}
	lock, lockTTL, fence := r.next(), r.int(), counter(r.next())
	leader, leaderTTL, record := r.next(), r.int(), recorded(r.next())
	var holder string // the lock's owner, if a writer
	if lockTTL != -2 {
		s.Lock = &LockKey{Owner: lock, Description: describedBy(lock), Readers: lock == ReadersHold, TTL: pttl(lockTTL)}
		if !s.Lock.Readers {
			holder = lock
		}
	}
	s.Fence = fence
	s.Queue = r.queue(holder, left)
	readers, ends := r.scored()
	for _, token := range readers {
		if t := left(ends[token]); t > 0 {
			s.Readers = append(s.Readers, Share{Token: token, Description: describedBy(token), TTL: t})
		}
	}
	if leaderTTL != -2 {
		token, value, _ := cutSpace(leader)
		s.Leader = &LeaderRecord{Token: token, Value: value, Current: token != "" && token == holder, TTL: pttl(leaderTTL)}
	}
	if k == 0 {
		return s, record, r.done()
	}
	sem := &SemaphoreStatus{Permits: record, Fence: counter(r.next()), Held: []Permit{}}
	sem.Queue = r.queue("", left)
	for i := range k {
		owner, t := r.next(), r.int()
		if t != -2 {
			sem.Held = append(sem.Held, Permit{Index: i, Owner: owner, Description: describedBy(owner), TTL: pttl(t)})
		}
	}
	sem.InUse = len(sem.Held)
	if record > 0 { // else the record went between the reads: see readNode
		s.Semaphore = sem
	}
	return s, record, r.done()
}

// done returns the reply's error, or one for values left over.
func (r *statusReply) done() error {
	if r.err == nil && len(r.vals) > 0 {
		r.err = fmt.Errorf("redlock: status script: %d values left over", len(r.vals))
	}
	return r.err
}

// cutSpace splits an election's record, "<token> <value>".
func cutSpace(record string) (token, value string, ok bool) {
	for i := range len(record) {
		if record[i] == ' ' {
			return record[:i], record[i+1:], true
		}
	}
	return record, "", false
}

// pttl returns the time left of a PTTL reply: NoExpiry for a key without an expiry, 0 for
// one that expired as it was read.
func pttl(ms int64) time.Duration {
	switch {
	case ms == -1:
		return NoExpiry
	case ms < 0:
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// counter returns the fence counter v, or 0 if there is none.
func counter(v string) uint64 {
	n, _ := strconv.ParseUint(v, 10, 64)
	return n
}

// recorded returns the number of permits of a Semaphore's record v: 0 for none (or for what
// is not a number).
func recorded(v string) int {
	k, err := strconv.Atoi(v)
	if err != nil || k < 0 {
		return 0
	}
	return k
}

// WaiterID returns the waiter id of token, a waiter's token "<waiter id>.<attempt>", and
// true; or token itself and false if token is not a waiter's (see the package doc, Tokens).
func WaiterID(token string) (string, bool) {
	if m := waiterToken.FindStringSubmatch(token); m != nil {
		return m[1], true
	}
	return token, false
}

// waiterToken matches a waiter's token, "<waiter id>.<attempt>".
var waiterToken = regexp.MustCompile(`^(.+)\.([0-9]+)$`)

// waiters returns a queue's live waiters in turn order, from its keys: queue (ids by ticket,
// in order), alive (each id's deadline, the server time at which its place lapses) and
// kinds (each id's record, "<w or r> <channel>": "r" marks a reader). It leaves out the waiter that
// holds the lock (holder is its token) and those whose place has lapsed; left gives the
// time left until a deadline.
func waiters(queue []string, alive map[string]float64, kinds map[string]string, holder string, left func(float64) time.Duration) []Waiter {
	holderID, _ := WaiterID(holder)
	out := []Waiter{}
	for _, id := range queue {
		d, ok := alive[id]
		if !ok || left(d) <= 0 || (holder != "" && id == holderID) {
			continue
		}
		out = append(out, Waiter{ID: id, Description: describedBy(id), Reader: strings.HasPrefix(kinds[id], "r "), TTL: left(d)})
	}
	return out
}

// sum fills the summary from the nodes: what a quorum of them hold.
func (s *Status) sum() {
	t := newStatusTally()
	for i := range s.Nodes {
		if n := &s.Nodes[i]; n.Err == nil {
			s.Answered++
			t.add(n)
		}
	}
	for _, kind := range []string{"lock", "rwmutex", "election", "semaphore"} {
		if t.found[kind] {
			s.Found = append(s.Found, kind)
		}
	}
	q := s.Quorum
	s.Holder, s.Leader, s.Semaphore = t.holder(q), t.leader(q), t.semaphore(q)
	for _, n := range t.readers {
		if n >= q {
			s.Readers++
		}
	}
}

// holder returns the writer that holds the lock on q nodes, or nil.
func (t *statusTally) holder(q int) *Holder {
	for owner, ttls := range t.owners {
		if len(ttls) >= q {
			slices.SortFunc(ttls, func(a, b time.Duration) int { return cmpTTL(b, a) })
			return &Holder{Owner: owner, Description: describedBy(owner), Token: t.tokens[owner], Nodes: len(ttls), TTL: ttls[q-1]}
		}
	}
	return nil
}

// leader returns the current leader record that q nodes hold, or nil.
func (t *statusTally) leader(q int) *Leader {
	for record, n := range t.records {
		if n >= q {
			record.Nodes = n
			return &record
		}
	}
	return nil
}

// semaphore returns what the nodes say of a Semaphore, with the permits in use on q
// nodes, or nil if none records one.
func (t *statusTally) semaphore(q int) *SemaphoreSummary {
	if !t.found["semaphore"] {
		return nil
	}
	sem := &SemaphoreSummary{}
	most := 0
	for k, n := range t.permits {
		if n > most || (n == most && k > sem.Permits) {
			sem.Permits, most = k, n
		}
	}
	for _, n := range t.permitOwners {
		if n >= q {
			sem.InUse++
		}
	}
	return sem
}

// statusTally counts what the nodes that answered hold, for Status.sum.
type statusTally struct {
	owners       map[string][]time.Duration // per writer: the TTLs of the nodes where it holds the lock
	tokens       map[string]uint64          // per writer: the largest fence counter of those nodes
	readers      map[string]int             // per reader: the nodes where it holds a share
	records      map[Leader]int             // per current leader record: the nodes that hold it
	permits      map[int]int                // per number of permits: the nodes that record it
	permitOwners map[Permit]int             // per permit and owner (TTL zero): the nodes
	found        map[string]bool
}

func newStatusTally() *statusTally {
	return &statusTally{owners: map[string][]time.Duration{}, tokens: map[string]uint64{}, readers: map[string]int{},
		records: map[Leader]int{}, permits: map[int]int{}, permitOwners: map[Permit]int{}, found: map[string]bool{}}
}

// add counts node n, which answered.
func (t *statusTally) add(n *NodeStatus) {
	if n.Lock != nil && !n.Lock.Readers {
		t.owners[n.Lock.Owner] = append(t.owners[n.Lock.Owner], n.Lock.TTL)
		t.tokens[n.Lock.Owner] = max(t.tokens[n.Lock.Owner], n.Fence)
	}
	if n.Lock != nil || n.Fence != 0 || len(n.Queue) > 0 {
		t.found["lock"] = true
	}
	for _, r := range n.Readers {
		t.readers[r.Token]++
	}
	if len(n.Readers) > 0 || slices.ContainsFunc(n.Queue, func(w Waiter) bool { return w.Reader }) {
		t.found["rwmutex"] = true
	}
	if n.Leader != nil {
		t.found["election"] = true
		if n.Leader.Current {
			t.records[Leader{Token: n.Leader.Token, Description: describedBy(n.Leader.Token), Value: n.Leader.Value}]++
		}
	}
	if sem := n.Semaphore; sem != nil {
		t.found["semaphore"] = true
		t.permits[sem.Permits]++
		for _, h := range sem.Held {
			t.permitOwners[Permit{Index: h.Index, Owner: h.Owner, Description: h.Description}]++
		}
	}
}

// cmpTTL orders times left, a key without an expiry (NoExpiry) being the longest.
func cmpTTL(a, b time.Duration) int {
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
