package core

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
)

// identity tells apart the servers behind a Cluster's nodes, so that one server reached
// through two Nodes (the same Node twice, or two clients of one address) never counts as
// two votes. NewCluster refuses the same Node value twice; servers are compared at each
// node's first acquisition, by the run_id the server reports, which is random per server
// process. Once two nodes are found to reach one server, every acquisition fails with an
// error that matches ErrInvalid and names both.
//
// A server that does not report a run_id (miniredis) cannot be compared, and takes part.
// A Node for a Redis Cluster is identified by the shard that serves its first lock.
type identity struct {
	known  []atomic.Bool // per node: identified (or unidentifiable)
	mu     sync.Mutex
	ids    map[[4]int64]int // run_id -> the node that reported it
	broken atomic.Pointer[error]
}

// sameNode reports whether a and b are the same Node value.
func sameNode(a, b Node) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// identify asks node i which server it reaches, through key (on Redis Cluster, the shard
// that serves it), and records it. It returns the node's error, or the Cluster's
// configuration error if two nodes reach one server.
func (c *Cluster) identify(ctx context.Context, i int, key string) error {
	vals, err := c.nodes[i].Eval(ctx, identifyScript, []string{key})
	if err != nil {
		return err
	}
	if len(vals) == 5 && vals[0] == 1 {
		id := [4]int64(vals[1:5])
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
	}
	c.id.known[i].Store(true)
	return c.misconfigured()
}

// misconfigured returns the error that two nodes reach one server, once found, or nil.
func (c *Cluster) misconfigured() error {
	if p := c.id.broken.Load(); p != nil {
		return *p
	}
	return nil
}
