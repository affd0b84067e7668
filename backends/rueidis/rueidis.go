// Package rueidis is the redlock backend for rueidis (github.com/redis/rueidis): a core.Node
// over a rueidis.Client, standalone, sentinel or cluster.
//
// Its name is the driver's: import one of the two under another name, for example
//
//	import rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
package rueidis

import (
	"context"

	"github.com/go-redlock/redlock/core"
	"github.com/redis/rueidis"
)

// Node is one Redis master (or one Redis Cluster) reached through a rueidis client. It is
// safe for concurrent use; it does not own the client and never closes it.
type Node struct {
	node *node // backends/internal/rueidisfamily's, which backends/valkey shares
}

var (
	_ core.Node = (*Node)(nil)
)

// New returns the Node for c. Build c with rueidis.NewClient; a cluster client (rueidis
// detects Redis Cluster by itself) subscribes with SSUBSCRIBE. New of a nil client returns
// nil, which redlock.New rejects.
//
// rueidis.NewClient fails while the server is down; to start all the same, make the node
// with NewLazy, which makes its client on first use.
//
// Each Node's client should be its own: Redlock needs N independent masters. Give each
// client a single Node: one Node's unsubscribe ends rueidis's subscription to that channel
// for the whole client. miniredis needs ClientOption{AlwaysRESP2: true, DisableCache: true,
// ForceSingleClient: true}: it runs no command on a subscribed RESP3 connection (where
// rueidis subscribes), has no client-side caching, and would pass for a cluster.
//
// Set ClientOption.AlwaysPipelining where a server may be slow. Without it, a call made
// while no other is under way puts its context's deadline on the connection, and a call
// that the node timeout ends closes the connection: the next call then waits for a new
// one's handshake first, two round trips in all, so a server more than half the node
// timeout away misses every other call. With it, a timed-out call leaves the connection
// open and the next costs one round trip.
func New(c rueidis.Client) *Node {
	if c == nil {
		return nil
	}
	return &Node{node: newNode(c)}
}

// String returns the server's address, or "cluster(addr,...)" for a cluster client; for a
// client that names no server (Nodes is empty), its type and address.
func (n *Node) String() string { return n.node.String() }

// Eval runs s with EVALSHA, and with EVAL when the server does not have the script yet.
// Concurrent calls share the client's pipelined connection; a call that the connection's
// breaking (a reset, say) failed is sent once more, within ctx. Eval returns when ctx ends,
// with ctx's error. A server error reply, such as WRONGTYPE, is an error that unwraps to a
// *rueidis.RedisError and whose message is the server's (with the "ERR " that rueidis drops
// put back).
func (n *Node) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	return n.node.Eval(ctx, s, keys, args...)
}

// EvalStrings runs s as Eval does, and returns its reply's elements as strings (see
// core.Node): a nil element (Lua false) is "".
func (n *Node) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	return n.node.EvalStrings(ctx, s, keys, args...)
}
