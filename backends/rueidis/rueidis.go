// Package rueidis is the redlock backend for rueidis (github.com/redis/rueidis): a core.Node
// over a rueidis.Client, standalone, sentinel or cluster.
//
// Its name is the driver's: import one of the two under another name, for example
//
//	import rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
package rueidis

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/go-redlock/redlock/core"
	"github.com/redis/rueidis"
)

// Node is one Redis master (or one Redis Cluster) reached through a rueidis client. It is
// safe for concurrent use; it does not own the client and never closes it.
type Node struct {
	client rueidis.Client
	name   string
	ps     *pubsub // Subscribe's state; see subscribe.go
}

var _ core.Node = (*Node)(nil)

// scripts holds one rueidis.Lua per core script, made once: rueidis.Lua.Exec sends EVALSHA
// and falls back to EVAL on NOSCRIPT, through the client's auto-pipelining.
var scripts = func() map[*core.Script]*rueidis.Lua {
	m := make(map[*core.Script]*rueidis.Lua)
	for _, s := range core.Scripts() {
		m[s] = rueidis.NewLuaScript(s.Source())
	}
	return m
}()

// New returns the Node for c. Build c with rueidis.NewClient; a cluster client (rueidis
// detects Redis Cluster by itself) subscribes with SSUBSCRIBE. New of a nil client returns
// nil, which redlock.New rejects.
//
// Each Node's client should be its own: Redlock needs N independent masters. Give each
// client a single Node: one Node's unsubscribe ends rueidis's subscription to that channel
// for the whole client. miniredis needs ClientOption{AlwaysRESP2: true, DisableCache: true,
// ForceSingleClient: true}: it runs no command on a subscribed RESP3 connection (where
// rueidis subscribes), has no client-side caching, and would pass for a cluster.
func New(c rueidis.Client) *Node {
	if c == nil {
		return nil
	}
	addrs := make([]string, 0, 1)
	for addr := range c.Nodes() {
		addrs = append(addrs, addr)
	}
	sort.Strings(addrs)
	name := strings.Join(addrs, ",")
	sharded := c.Mode() == rueidis.ClientModeCluster
	if sharded {
		name = "cluster(" + name + ")"
	}
	return &Node{client: c, name: name, ps: newPubSub(c, sharded)}
}

// String returns the server's address, or "cluster(addr,...)" for a cluster client.
func (n *Node) String() string { return n.name }

// Eval runs s with EVALSHA, and with EVAL when the server does not have the script yet.
// Concurrent calls share the client's pipelined connection. Eval returns when ctx ends,
// with ctx's error. A server error reply, such as WRONGTYPE, is a *rueidis.RedisError.
func (n *Node) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); ok || ctx.Done() == nil {
		return n.eval(ctx, s, keys, args)
	}
	// rueidis honours a deadline throughout, but a cancellation only once connected: a
	// connection it opens for this call goes on in the background until its own timeouts.
	type result struct {
		vals []int64
		err  error
	}
	done := make(chan result, 1)
	go func() {
		vals, err := n.eval(ctx, s, keys, args)
		done <- result{vals, err}
	}()
	select {
	case r := <-done:
		return r.vals, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (n *Node) eval(ctx context.Context, s *core.Script, keys, args []string) ([]int64, error) {
	lua := scripts[s]
	if lua == nil { // not a core script: used once, not kept
		lua = rueidis.NewLuaScript(s.Source())
	}
	resp := lua.Exec(ctx, n.client, keys, args)
	if err := resp.Error(); err != nil { // a server error, rueidis.Nil, or the connection's
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	arr, err := resp.ToArray()
	if err != nil {
		return nil, fmt.Errorf("redlock: %s script: %w", s.Name(), err)
	}
	out := make([]int64, len(arr))
	for i := range arr {
		if out[i], err = arr[i].ToInt64(); err != nil {
			return nil, fmt.Errorf("redlock: %s script replied a non-integer at %d: %w", s.Name(), i, err)
		}
	}
	return out, nil
}
