package core

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
)

// identity tells apart the servers behind a Cluster's nodes, so that one server reached
// through two Nodes (two clients of one address, say) never counts as two votes (see the
// package doc, One server, one vote). Servers are compared by the run_id they report, random
// per server process, which a node's acquisitions ask for in their reply until it is known.
// Once two nodes are found to reach one server, every acquisition fails with an error that
// matches ErrInvalid and names both. A server that reports no run_id (miniredis) cannot be
// compared, and takes part. A Node for a Redis Cluster is identified by the shard that
// serves its first lock. A single node needs no identity.
type identity struct {
	known   []atomic.Bool // per node: identified (or unidentifiable)
	unknown atomic.Int32  // the nodes not known yet
	mu      sync.Mutex
	ids     map[[4]int64]int // run_id -> the node that reported it
	broken  atomic.Pointer[error]
}

// init readies id for n nodes, none known unless there is one.
func (id *identity) init(n int) {
	id.known = make([]atomic.Bool, n)
	if n == 1 {
		id.known[0].Store(true)
	} else {
		id.unknown.Store(int32(n))
	}
}

// sameNode reports whether a and b are the same Node value.
func sameNode(a, b Node) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// identified records which server node i reaches, from its reply vals to an acquisition
// that asked the server to say (see acquire.lua). It returns an error if the reply does
// not say, or the Cluster's configuration error if two nodes reach one server.
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
