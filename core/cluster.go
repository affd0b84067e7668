package core

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
)

// Cluster is a set of N independent nodes that grant a lock by majority (quorum N/2+1).
// A Cluster is safe for concurrent use.
type Cluster struct {
	nodes     []Node
	quorum    int
	sharded   []bool         // per node: it publishes with SPUBLISH (see ShardedPubSub)
	unguarded []atomic.Bool  // per node: it cannot report its uptime to the restart guard
	down      []atomic.Bool  // per node: its last call failed in transit (see suspects)
	calls     []atomic.Int32 // per node: calls under way (see request.spare)
	warn      func(node string)
	unknown   func(node string) // see OnUnidentified
	abstains  func(node string, left time.Duration)
	failing   func(node string, err error) // see OnFailedForGood
	failed    []atomic.Bool                // per node: it was told to failing
	abstained []atomic.Bool                // per node: it abstained under the restart guard, and has not granted since
	id        identity                     // which server each node reaches
	deadlines sharedDeadlines              // for single-node calls
	closed    atomic.Bool
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	bg        background // calls that outlive the operation that made them (see Wait)
}

// ClusterOption configures a Cluster.
type ClusterOption func(*Cluster)

// OnUnguarded sets the function called, once per node and Cluster, when a node was asked to
// apply the restart guard and cannot, because its server is known to have no uptime to give
// (miniredis). Such a node takes part unguarded. A server that refuses INFO (an ACL without
// it) does not: its acquisitions fail, with an error that matches ErrInvalid and says how to
// grant it or turn the guard off. f must not block.
func OnUnguarded(f func(node string)) ClusterOption {
	return func(c *Cluster) { c.warn = f }
}

// OnUnidentified sets the function called, once per node and Cluster, when a node cannot
// be told apart from the others (see the package doc, One server, one vote) because its
// server refuses the INFO that says which server it is (an ACL without it). Such a node
// takes part unchecked. f must not block.
func OnUnidentified(f func(node string)) ClusterOption {
	return func(c *Cluster) { c.unknown = f }
}

// OnAbstained sets the function called when a node abstains under the restart guard for the
// first time since it was last seen to grant (a lock's first acquisition over a server that
// started less than the guard ago, say), with how long it will go on abstaining. f must not
// block.
func OnAbstained(f func(node string, left time.Duration)) ClusterOption {
	return func(c *Cluster) { c.abstains = f }
}

// OnFailedForGood sets the function called, once per node and Cluster, when a node first
// fails with an error that no retry can fix (see Permanent; a closed client's aside): a
// refused command, say, which a quorum of other nodes may hide. f must not block.
func OnFailedForGood(f func(node string, err error)) ClusterOption {
	return func(c *Cluster) { c.failing = f }
}

// ShardedPubSub is an optional capability of a Node: a Node whose ShardedPubSub returns true
// (a Redis Cluster client whose Subscriber uses SSUBSCRIBE) gets release notifications
// published with SPUBLISH, so that a release is not broadcast to every shard.
type ShardedPubSub interface {
	ShardedPubSub() bool
}

// NewCluster returns the cluster of nodes. It fails with an error that matches ErrInvalid
// if there are no nodes, one is nil (a nil interface or a nil pointer inside one), or one
// Node is given twice. Two Nodes that reach one server are found at first contact instead.
func NewCluster(nodes []Node, opts ...ClusterOption) (*Cluster, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: no nodes", ErrInvalid)
	}
	c := &Cluster{
		nodes:     append([]Node(nil), nodes...),
		quorum:    len(nodes)/2 + 1,
		sharded:   make([]bool, len(nodes)),
		unguarded: make([]atomic.Bool, len(nodes)),
		abstained: make([]atomic.Bool, len(nodes)),
		failed:    make([]atomic.Bool, len(nodes)),
		down:      make([]atomic.Bool, len(nodes)),
		calls:     make([]atomic.Int32, len(nodes)),
		done:      make(chan struct{}),
	}
	for i, n := range nodes {
		if isNil(n) {
			return nil, fmt.Errorf("%w: node %d is nil", ErrInvalid, i)
		}
		for j := range i {
			if t := reflect.TypeOf(n); t == reflect.TypeOf(nodes[j]) && t.Comparable() && nodes[j] == n {
				return nil, fmt.Errorf("%w: nodes %d and %d are the same Node (%s): each server must count as one vote", ErrInvalid, j, i, n)
			}
		}
		if s, ok := n.(ShardedPubSub); ok {
			c.sharded[i] = s.ShardedPubSub()
		}
	}
	c.id.known = make([]atomic.Bool, len(nodes)) // none known unless there is one
	if len(nodes) == 1 {
		c.id.known[0].Store(true)
	} else {
		c.id.unknown.Store(int32(len(nodes)))
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

func isNil(n Node) bool {
	if n == nil {
		return true
	}
	v := reflect.ValueOf(n)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// Unguarded returns the names of the nodes that were asked to apply the restart guard and
// could not, because their servers are known to have no uptime to give (see OnUnguarded).
func (c *Cluster) Unguarded() []string {
	var names []string
	for i := range c.unguarded {
		if c.unguarded[i].Load() {
			names = append(names, c.nodes[i].String())
		}
	}
	return names
}

// voted notes node i's reply vals to an acquisition: an abstention is told to the OnAbstained
// function if the node was last seen to grant (or never seen).
func (c *Cluster) voted(i int, vals []int64) {
	switch {
	case vals[0] == -1 && len(vals) > 1:
		if !c.abstained[i].Swap(true) && c.abstains != nil {
			c.abstains(c.nodes[i].String(), time.Duration(vals[1])*time.Millisecond)
		}
	case vals[0] == 1:
		c.granted(i)
	}
}

// failedWith tells the OnFailedForGood function of node i's error err if no retry can fix it
// and it is the node's first such error.
func (c *Cluster) failedWith(i int, err error) {
	if c.failing != nil && !errors.Is(err, ErrClosed) && permanentNode(err) && !c.failed[i].Swap(true) {
		c.failing(c.nodes[i].String(), err)
	}
}

// granted notes that node i granted a lock: its next abstention is told again.
func (c *Cluster) granted(i int) {
	if c.abstained[i].Load() {
		c.abstained[i].Store(false)
	}
}

func (c *Cluster) markUnguarded(i int) {
	if !c.unguarded[i].Swap(true) && c.warn != nil {
		c.warn(c.nodes[i].String())
	}
}

// Close makes every later acquisition fail with ErrClosed, and wakes the waiters of
// AcquireWait, which then fail with it. Extend and Release still work, so that held locks
// can be let go. It closes nothing of the nodes'. It is safe to call more than once.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.done)
	})
}

// identity tells apart the servers behind a Cluster's nodes by the run_id they report (see
// the package doc, One server, one vote). Once two nodes are found to reach one server,
// every acquisition fails with an error that matches ErrInvalid and names both. A server
// that reports no run_id cannot be compared, and takes part.
type identity struct {
	known   []atomic.Bool // per node: identified (or unidentifiable)
	unknown atomic.Int32  // the nodes not known yet
	mu      sync.Mutex
	ids     map[[4]int64]int // run_id -> the node that reported it
	broken  atomic.Pointer[error]
}

// identified records which server node i reaches, from its reply vals to an acquisition
// that asked. It returns an error if the reply does not say, or misconfigured's.
func (c *Cluster) identified(i int, vals []int64) error {
	switch {
	case len(vals) >= 7:
		id := [4]int64(vals[3:7])
		c.id.mu.Lock()
		if c.id.ids == nil {
			c.id.ids = make(map[[4]int64]int)
		}
		if j, seen := c.id.ids[id]; seen && j != i {
			err := fmt.Errorf("%w: nodes %d (%s) and %d (%s) reach the same server, which must count as one vote: give each server one Node",
				ErrInvalid, j, c.nodes[j], i, c.nodes[i])
			c.id.broken.CompareAndSwap(nil, &err)
		} else {
			c.id.ids[id] = i
		}
		c.id.mu.Unlock()
	case len(vals) == 3 && vals[2] == 2: // the server refuses INFO
		if !c.id.known[i].Load() && c.unknown != nil {
			c.unknown(c.nodes[i].String())
		}
	case len(vals) == 3: // the server reports no run_id
	default:
		return fmt.Errorf("redlock: acquire script replied %d values where the server was asked to identify itself: want 3 or 7", len(vals))
	}
	if !c.id.known[i].Swap(true) {
		c.id.unknown.Add(-1)
	}
	return c.misconfigured()
}

// misconfigured returns the error that two nodes reach one server, once found, or nil.
func (c *Cluster) misconfigured() error {
	if p := c.id.broken.Load(); p != nil {
		return *p
	}
	return nil
}

// background counts the calls that outlive the operation that started them, for Wait.
// Unlike a sync.WaitGroup, it may start work while Wait waits, and each piece of work has a
// bound on its time, after which Wait stops waiting for it.
type background struct {
	mu     sync.Mutex
	n      int
	idle   chan struct{} // closed when n falls to 0; nil while n is 0
	latest time.Time     // the latest bound of the work counted since n was last 0
}

// goRun runs f in a goroutine of its own, counted until f returns or bound has passed.
func (b *background) goRun(bound time.Duration, f func()) {
	b.mu.Lock()
	if b.n == 0 {
		b.idle, b.latest = make(chan struct{}), time.Time{}
	}
	b.n++
	if by := time.Now().Add(bound); by.After(b.latest) {
		b.latest = by
	}
	b.mu.Unlock()
	go func() {
		defer b.done()
		f()
	}()
}

func (b *background) done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n--
	if b.n == 0 {
		close(b.idle)
		b.idle = nil
	}
}

// wait waits until no work is counted, or the bound of each piece counted has passed.
func (b *background) wait() {
	for {
		b.mu.Lock()
		idle, latest := b.idle, b.latest
		b.mu.Unlock()
		if idle == nil {
			return
		}
		t := time.NewTimer(time.Until(latest))
		select {
		case <-idle:
			t.Stop()
		case <-t.C:
			b.mu.Lock()
			later := b.idle != nil && b.latest.After(latest) // work with a later bound came
			b.mu.Unlock()
			if !later {
				return
			}
		}
	}
}

// Wait waits until the calls that c makes in the background have ended (waiters' leaves,
// the undoing of failed attempts, a release's calls still under way when it returned), each
// at most three node timeouts after the operation that started it returned, even where a
// node ignores its deadline; calls started while Wait waits too. Call it before closing the
// nodes.
func (c *Cluster) Wait() { c.bg.wait() }
