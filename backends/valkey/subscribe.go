package valkey

import (
	"context"

	"github.com/go-redlock/redlock/core"
)

var (
	_ core.Subscriber    = (*Node)(nil)
	_ core.ShardedPubSub = (*Node)(nil)
)

// Subscribe implements core.Subscriber: onMessage is called with every message on channel,
// and once more after valkey-go re-established the subscription on a new connection, since
// messages may have been missed meanwhile. It returns once the server confirmed the
// subscription; it fails with ctx's error if ctx ends first, or with the client's error if
// SUBSCRIBE fails. After Close, or on a closed client, the error matches core.ErrClosed.
//
// Each channel is one valkey-go Client.Receive call, which valkey-go multiplexes with every
// other channel over the client's one pub/sub connection (one per master of a cluster; under
// RESP3 the pipelined command connection itself). A cluster client subscribes with
// SSUBSCRIBE.
//
// unsubscribe is idempotent; once it returns no call to onMessage starts (one already under
// way may still be running). Callbacks run on a goroutine of the Node's or valkey-go's and
// must not block; they may call unsubscribe. Subscribe is safe for concurrent use.
func (n *Node) Subscribe(ctx context.Context, channel string, onMessage func(payload string)) (unsubscribe func(), err error) {
	return n.node.Subscribe(ctx, channel, onMessage)
}

// ShardedPubSub reports whether the Node is over a cluster client, whose Subscribe uses
// SSUBSCRIBE, so that core publishes release notifications with SPUBLISH.
func (n *Node) ShardedPubSub() bool { return n.node.ShardedPubSub() }

// Close stops the Node's pub/sub machinery: it ends every subscription (no callback starts
// after Close returns), unsubscribes on the server (waiting at most a second for it)
// and waits for the Node's goroutines to exit. It always returns nil. Eval keeps
// working; Subscribe fails afterwards. Close never closes the valkey-go client, which
// belongs to the caller. It is idempotent and safe for concurrent use, and must not be
// called from a Subscribe callback.
func (n *Node) Close() error { return n.node.Close() }
