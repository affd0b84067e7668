package core

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
)

// Cluster is a set of N independent nodes that grant a lock by majority (quorum N/2+1).
// A Cluster is safe for concurrent use.
type Cluster struct {
	nodes     []Node
	quorum    int
	sharded   []bool         // per node: it publishes with SPUBLISH (see ShardedPubSub)
	setters   bool           // every node is a Setter
	unguarded []atomic.Bool  // per node: it cannot report its uptime to the restart guard
	down      []atomic.Bool  // per node: its last call failed in transit (see suspects)
	calls     []atomic.Int32 // per node: calls under way (see request.spare)
	warn      func(node string)
	id        identity        // which server each node reaches
	deadlines sharedDeadlines // for single-node calls
	closed    atomic.Bool
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	bg        background // calls that outlive the operation that made them (see Wait)
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
	c := &Cluster{
		nodes:     append([]Node(nil), nodes...),
		quorum:    len(nodes)/2 + 1,
		sharded:   make([]bool, len(nodes)),
		setters:   true,
		unguarded: make([]atomic.Bool, len(nodes)),
		down:      make([]atomic.Bool, len(nodes)),
		calls:     make([]atomic.Int32, len(nodes)),
		done:      make(chan struct{}),
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
		_, setter := n.(Setter)
		c.setters = c.setters && setter
		if s, ok := n.(ShardedPubSub); ok {
			c.sharded[i] = s.ShardedPubSub()
		}
	}
	c.id.init(len(nodes))
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

// Close makes every later acquisition fail with ErrClosed, and wakes the waiters of
// AcquireWait, which then fail with it. Extend and Release still work, so that held locks
// can be let go. It closes nothing of the nodes'. It is safe to call more than once.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.done)
	})
}
