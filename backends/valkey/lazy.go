package valkey

import (
	"context"

	"github.com/go-redlock/redlock/backends/internal/rueidisfamily"
	"github.com/go-redlock/redlock/core"
	"github.com/valkey-io/valkey-go"
)

// Lazy is a node whose valkey-go client is made on first use, so that a program can start
// while its server is down: valkey.NewClient fails when it cannot connect, and a Node
// needs a client. Make one with NewLazy. It is safe for concurrent use.
//
// A call (Eval or Subscribe) that finds no client makes one with
// valkey.NewClient(opt), unless an attempt is under way already; either way it waits for
// that attempt within its context. If the attempt fails, the calls waiting for it fail with
// its error ("redlock: cannot connect: ...", or the server's error reply first, such as
// "WRONGPASS ... (redlock: cannot connect)", which core.Permanent knows), and the next call
// makes a new attempt: one at a time, each at least a second after the last one started,
// so a down server is dialled about once a second at most, not once per call. Once a client is made,
// the Lazy is the Node of New over it, and valkey-go reconnects by itself from then on.
//
// Lazy is for one master, standalone or behind Sentinel (ClientOption.Sentinel). A client
// that valkey-go finds to be a Redis Cluster client is closed and refused: every call fails
// with an error that matches core.ErrInvalid (give a cluster to New: its NewClient succeeds
// while any seed address answers).
//
// The Lazy owns its client: Close (which redlock.Client.Close calls) closes it.
type Lazy struct {
	lazy *rueidisfamily.Lazy[valkey.ValkeyMessage, *valkey.ValkeyMessage] // shared with backends/rueidis
}

var (
	_ core.Node       = (*Lazy)(nil)
	_ core.Subscriber = (*Lazy)(nil)
)

// NewLazy returns a Lazy that makes its client with valkey.NewClient(opt) on first use.
// It connects to nothing itself. opt is used as given, for each attempt.
//
// An opt without InitAddress, which valkey.NewClient refuses, makes a Lazy that never
// dials: every call fails with an error that matches core.ErrInvalid. Its name is then made
// from the Lazy's own address, such as "*valkey.Lazy@0xc000123456", distinct for each Lazy.
func NewLazy(opt valkey.ClientOption) *Lazy {
	l := new(Lazy)
	l.lazy = rueidisfamily.NewLazy(driver{}, opt.InitAddress, l, func() (*node, error) {
		c, err := valkey.NewClient(opt)
		if err != nil {
			return nil, err
		}
		return newNode(c), nil
	})
	return l
}

// String returns the addresses of ClientOption.InitAddress, sorted and joined by commas,
// as New names a standalone client's Node; without any, the name NewLazy made.
func (l *Lazy) String() string { return l.lazy.String() }

// Eval is the Node's Eval (see Node.Eval) once the client is made; until then it makes it
// (see Lazy).
func (l *Lazy) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	return l.lazy.Eval(ctx, s, keys, args...)
}

// EvalStrings is the Node's EvalStrings (see Node.EvalStrings) once the client is made;
// until then it makes it (see Lazy).
func (l *Lazy) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	return l.lazy.EvalStrings(ctx, s, keys, args...)
}

// Subscribe is the Node's Subscribe (see Node.Subscribe) once the client is made; until then
// it makes it (see Lazy).
func (l *Lazy) Subscribe(ctx context.Context, channel string, onMessage func(payload string)) (func(), error) {
	return l.lazy.Subscribe(ctx, channel, onMessage)
}

// Close ends the subscriptions (see Node.Close) and closes the client. It waits for an
// attempt to make the client that is under way (valkey-go bounds it by its dial timeout).
// Every call after Close fails with an error that matches core.ErrClosed. It is idempotent,
// and must not be called from a Subscribe callback.
func (l *Lazy) Close() error { return l.lazy.Close() }
