package core

import (
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
	publish   []string      // per node: the release script's publish command
	sharded   bool          // some node publishes with SPUBLISH
	setters   bool          // every node is a Setter
	unguarded []atomic.Bool // per node: it cannot report its uptime to the restart guard
	down      []atomic.Bool // per node: its last call failed in transit (see suspects)
	warn      func(node string)
	id        identity // which server each node reaches
	closed    atomic.Bool
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

// ClusterOption configures a Cluster.
type ClusterOption func(*Cluster)

// OnUnguarded sets the function called, once per node and Cluster, when a node was asked to
// apply the restart guard and cannot, because it does not report its uptime (miniredis, or a
// server that forbids INFO in scripts). Such a node takes part unguarded. f must not block.
func OnUnguarded(f func(node string)) ClusterOption {
	return func(c *Cluster) { c.warn = f }
}

// ShardedPubSub is an optional capability of a Node: a Node whose ShardedPubSub returns true
// (a Redis Cluster client whose Subscriber uses SSUBSCRIBE) gets release notifications
// published with SPUBLISH, so that a release is not broadcast to every shard.
type ShardedPubSub interface {
	ShardedPubSub() bool
}

// NewCluster returns the cluster of nodes. It fails with an error that matches ErrInvalid
// if there are no nodes, one is nil (a nil interface or a nil pointer inside one), or one
// Node is given twice: each server must count as one vote. Two Nodes that reach one server
// are found at first contact instead (see Acquire). An even N is allowed but buys nothing:
// 4 nodes tolerate one failure, as 3 do.
func NewCluster(nodes []Node, opts ...ClusterOption) (*Cluster, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: no nodes", ErrInvalid)
	}
	for i, n := range nodes {
		if isNil(n) {
			return nil, fmt.Errorf("%w: node %d is nil", ErrInvalid, i)
		}
		for j := range i {
			if sameNode(nodes[j], n) {
				return nil, fmt.Errorf("%w: nodes %d and %d are the same Node (%s): each server must count as one vote", ErrInvalid, j, i, n)
			}
		}
	}
	c := &Cluster{
		nodes:     append([]Node(nil), nodes...),
		quorum:    len(nodes)/2 + 1,
		publish:   make([]string, len(nodes)),
		unguarded: make([]atomic.Bool, len(nodes)),
		down:      make([]atomic.Bool, len(nodes)),
		done:      make(chan struct{}),
	}
	c.id.init(len(nodes))
	for _, o := range opts {
		o(c)
	}
	c.setters = true
	for i, n := range nodes {
		if _, ok := n.(Setter); !ok {
			c.setters = false
		}
		c.publish[i] = "PUBLISH"
		if s, ok := n.(ShardedPubSub); ok && s.ShardedPubSub() {
			c.publish[i], c.sharded = "SPUBLISH", true
		}
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
// could not, because they do not report their uptime.
func (c *Cluster) Unguarded() []string {
	var names []string
	for i := range c.unguarded {
		if c.unguarded[i].Load() {
			names = append(names, c.nodes[i].String())
		}
	}
	return names
}

func (c *Cluster) markUnguarded(i int) {
	if !c.unguarded[i].Swap(true) && c.warn != nil {
		c.warn(c.nodes[i].String())
	}
}

// Nodes returns the number of nodes.
func (c *Cluster) Nodes() int { return len(c.nodes) }

// Close makes every later acquisition fail with ErrClosed, and wakes the waiters of
// AcquireWait, which then fail with it. Extend and Release still work, so that held locks
// can be let go. It closes nothing of the nodes'. It is safe to call more than once.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.done)
	})
}

// Quorum returns the number of yes-votes an operation needs: N/2+1.
func (c *Cluster) Quorum() int { return c.quorum }

// Lock is one owner's claim on a lock: which keys, under which token, for how long.
type Lock struct {
	Keys Keys
	// Token is the owner's random token (NewToken); AcquireWait sets one per attempt,
	// "<waiter id>.<attempt>". It must follow the format rules in the package doc (Tokens).
	Token string
	TTL   time.Duration
	// NodeTimeout bounds each node's answer. A node slower than this counts as failed.
	NodeTimeout time.Duration
	// DriftFactor scales the clock-drift allowance: validity = TTL - elapsed - (TTL*DriftFactor + 2ms).
	DriftFactor float64
	// Fence asks for a fencing token: each node advances its counter, and for N > 1, unless
	// a quorum of the granting nodes agree on the largest counter, one more round raises it
	// on a quorum before the token is returned. Without it the counter is left alone and
	// Grant.Fence is 0.
	Fence bool
	// Guard is the restart guard: a node whose server has been up for less than this
	// (rounded up to whole seconds) abstains from granting. 0 turns it off.
	Guard time.Duration

	// Waiter is the id under which the lock's waiters queue this owner, and Ticket its
	// place in the queue (smaller first). AcquireWait sets both; with an empty Waiter (a
	// single Acquire, say) the owner never queues and is refused while live waiters queue.
	Waiter string
	Ticket int64
	// Contended says that others are likely to hold or wait for the lock (the owner's last
	// acquisition had to wait, say): AcquireWait's first attempt then runs the acquire
	// script, which queues the owner at once, rather than a plain SET NX (see Setter).
	Contended bool
	// Persist keeps AcquireWait trying through errors that no retry can fix (see
	// Permanent), for a caller that has no way to return them (Mutex.Lock), but not after
	// Cluster.Close; otherwise such an error ends AcquireWait at once.
	Persist bool
	// Failed, if set, is called with the error of each failed attempt of AcquireWait but
	// the last (ctx's end, or a permanent error), in AcquireWait's goroutine, before it
	// waits for the next attempt: for a caller that reports long waits.
	Failed func(err error)

	// attempt is the number of AcquireWait's attempt under way (0 for Acquire): only its
	// first attempt may take the lock with a plain SET (see Setter), unless Contended.
	attempt int
	// acquiring is the acquisition that granted the lock, pending the number of its nodes
	// that had not answered when it returned, and late those nodes (a bit per node, for
	// N <= 64). Release calls each of them only once it answered, so that a straggler's
	// SET cannot land after the release and leave a key behind.
	acquiring *fanout
	pending   int
	late      uint64
}

// Drift is the clock-drift allowance subtracted from every validity: TTL*DriftFactor + 2ms.
func (l *Lock) Drift() time.Duration {
	return time.Duration(float64(l.TTL)*l.DriftFactor) + 2*time.Millisecond
}
