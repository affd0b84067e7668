// Package valkey is the redlock backend for valkey-go (github.com/valkey-io/valkey-go): a
// core.Node over a valkey.Client, standalone, sentinel or cluster. It implements
// core.Subscriber (release notifications over
// pub/sub, SSUBSCRIBE on a cluster client), as the rueidis backend does: valkey-go is a fork
// of rueidis, and the two backends differ in little but the driver's names.
//
// Its name is the driver's: import one of the two under another name, for example
//
//	import rlvalkey "github.com/go-redlock/redlock/backends/valkey"
//
// Servers: the backend's tests and the conformance suite pass against miniredis, and
// against valkey-server 8.0.1 and redis-server 7.0.15, each standalone, as a real 3-master
// cluster and behind a Sentinel (make test-valkey runs them on Valkey).
package valkey

import (
	"context"

	"github.com/go-redlock/redlock/core"
	"github.com/valkey-io/valkey-go"
)

// Node is one Redis or Valkey master (or one cluster of them) reached through a valkey-go
// client. It is safe for concurrent use. It does not own the client and never closes it:
// close the Node (which ends its subscriptions) first, then the client.
type Node struct {
	node *node // backends/internal/rueidisfamily's, which backends/rueidis shares
}

var (
	_ core.Node = (*Node)(nil)
)

// New returns the Node for c, built with valkey.NewClient. valkey-go finds a cluster by
// itself; the Node of a cluster client subscribes with SSUBSCRIBE and has core publish
// releases with SPUBLISH. New(nil) returns nil, which redlock.New rejects.
//
// valkey.NewClient fails while the server is down; to start all the same, make the node
// with NewLazy, which makes its client on first use.
//
// Redlock needs N independent masters: give each its own client. Give each client a single
// Node, too: valkey-go keeps one subscription per channel and client, so one Node's
// unsubscribe would end another's. Lock scripts are writes: a standalone client with
// ReplicaAddress must not let its SendToReplicas pick EVAL, EVALSHA or SET.
//
// miniredis needs ClientOption{AlwaysRESP2: true, DisableCache: true, ForceSingleClient:
// true}: it runs no command on a subscribed RESP3 connection (valkey-go subscribes on its
// command connection under RESP3), has no client-side caching, and would be probed as a
// cluster. A real server needs none of them.
//
// Set ClientOption.AlwaysPipelining where a server may be slow. Without it, a call made
// while no other is under way puts its context's deadline on the connection, and a call
// that the node timeout ends closes the connection: the next call then waits for a new
// one's handshake first, two round trips in all, so a server more than half the node
// timeout away misses every other call. With it, a timed-out call leaves the connection
// open and the next costs one round trip.
func New(c valkey.Client) *Node {
	if c == nil {
		return nil
	}
	return &Node{node: newNode(c)}
}

// String names the node in errors: the server's address (addresses, comma-separated, for a
// client that knows several), or "cluster(addr,...)" for a cluster client, as the client
// knew its nodes when New was called; for a client that named none, its type and address.
func (n *Node) String() string { return n.node.String() }

// Eval runs s on the server with EVALSHA, falling back to EVAL when the server does not
// have the script yet, and returns the script's integer array reply. Concurrent calls share
// the client's pipelined connection; a call that the connection's breaking (a reset, say)
// failed is sent once more, within ctx. Eval returns when ctx ends, with ctx's error. A server
// error reply, such as WRONGTYPE, is an error that unwraps to a *valkey.ValkeyError, with the
// server's message (the "ERR " that valkey-go drops put back); on a closed client the error
// matches core.ErrClosed; on a cluster client, keys of different slots are an error that
// matches core.ErrInvalid (nothing is sent).
func (n *Node) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	return n.node.Eval(ctx, s, keys, args...)
}

// EvalStrings runs s as Eval does, and returns its reply's elements as strings (see
// core.Node): a nil element (Lua false) is "".
func (n *Node) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	return n.node.EvalStrings(ctx, s, keys, args...)
}
