package valkey

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/valkey-io/valkey-go"
)

// Lazy is a node whose valkey-go client is made on first use, so that a program can start
// while its server is down: valkey.NewClient fails when it cannot connect, and a Node
// needs a client. Make one with NewLazy. It is safe for concurrent use.
//
// A call (Eval, SetNX or Subscribe) that finds no client makes one with
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
	opt  valkey.ClientOption
	name string

	mu      sync.Mutex
	node    *Node         // nil until a client was made
	client  valkey.Client // node's
	attempt chan struct{} // non-nil while an attempt is under way; closed when it ends
	last    time.Time     // when the last attempt started
	err     error         // the last attempt's error; permanent if it matches core.ErrInvalid
	closed  bool
}

var (
	_ core.Node       = (*Lazy)(nil)
	_ core.Setter     = (*Lazy)(nil)
	_ core.Subscriber = (*Lazy)(nil)
)

// lazyRetry is the least time between the starts of two of a Lazy's attempts to make its
// client.
const lazyRetry = time.Second

// NewLazy returns a Lazy that makes its client with valkey.NewClient(opt) on first use.
// It connects to nothing itself. opt is used as given, for each attempt.
//
// An opt without InitAddress, which valkey.NewClient refuses, makes a Lazy that never
// dials: every call fails with an error that matches core.ErrInvalid. Its name is then made
// from the Lazy's own address, such as "*valkey.Lazy@0xc000123456", distinct for each Lazy.
func NewLazy(opt valkey.ClientOption) *Lazy {
	addrs := append([]string(nil), opt.InitAddress...)
	sort.Strings(addrs)
	l := &Lazy{opt: opt, name: strings.Join(addrs, ",")}
	if len(addrs) == 0 {
		l.name = fmt.Sprintf("%T@%p", l, l)
		l.err = fmt.Errorf("%w: redlock: %s: the valkey.ClientOption has no InitAddress", core.ErrInvalid, l.name)
	}
	return l
}

// String returns the addresses of ClientOption.InitAddress, sorted and joined by commas,
// as New names a standalone client's Node; without any, the name NewLazy made.
func (l *Lazy) String() string { return l.name }

// Eval is the Node's Eval (see Node.Eval) once the client is made; until then it makes it
// (see Lazy).
func (l *Lazy) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	n, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return n.Eval(ctx, s, keys, args...)
}

// EvalStrings is the Node's EvalStrings (see Node.EvalStrings) once the client is made;
// until then it makes it (see Lazy).
func (l *Lazy) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	n, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return n.EvalStrings(ctx, s, keys, args...)
}

// SetNX is the Node's SetNX (see Node.SetNX) once the client is made; until then it makes
// it (see Lazy).
func (l *Lazy) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	n, err := l.get(ctx)
	if err != nil {
		return false, err
	}
	return n.SetNX(ctx, key, value, ttl)
}

// Subscribe is the Node's Subscribe (see Node.Subscribe) once the client is made; until then
// it makes it (see Lazy).
func (l *Lazy) Subscribe(ctx context.Context, channel string, onMessage func(payload string)) (func(), error) {
	n, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return n.Subscribe(ctx, channel, onMessage)
}

// Close ends the subscriptions (see Node.Close) and closes the client. It waits for an
// attempt to make the client that is under way (valkey-go bounds it by its dial timeout).
// Every call after Close fails with an error that matches core.ErrClosed. It is idempotent,
// and must not be called from a Subscribe callback.
func (l *Lazy) Close() error {
	l.mu.Lock()
	l.closed = true
	attempt := l.attempt
	l.mu.Unlock()
	if attempt != nil {
		<-attempt
	}
	l.mu.Lock()
	n, c := l.node, l.client
	l.node, l.client = nil, nil
	l.mu.Unlock()
	if n != nil {
		_ = n.Close()
		c.Close()
	}
	return nil
}

// get returns the Node over the client, making the client first if need be (see Lazy).
func (l *Lazy) get(ctx context.Context) (*Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return nil, fmt.Errorf("%w: redlock: %s: the node is closed", core.ErrClosed, l.name)
	case l.node != nil:
		n := l.node
		l.mu.Unlock()
		return n, nil
	case l.err != nil && l.attempt == nil && (errors.Is(l.err, core.ErrInvalid) || time.Since(l.last) < lazyRetry):
		err := l.err // the last attempt's, too recent to try again
		l.mu.Unlock()
		return nil, err
	}
	attempt := l.attempt
	if attempt == nil {
		attempt = make(chan struct{})
		l.attempt, l.last = attempt, time.Now()
		go l.connect(attempt)
	}
	l.mu.Unlock()
	select {
	case <-attempt:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed { // Close is about to close the node the attempt made, if it made one
		return nil, fmt.Errorf("%w: redlock: %s: the node is closed", core.ErrClosed, l.name)
	}
	if l.node != nil {
		return l.node, nil
	}
	return nil, l.err
}

// connect makes the client, and closes attempt when it is done.
func (l *Lazy) connect(attempt chan struct{}) {
	c, err := valkey.NewClient(l.opt)
	var reply *valkey.ValkeyError
	switch {
	case errors.As(err, &reply) && !reply.IsNil(): // the server's reply (WRONGPASS...) first, for core.Permanent
		err = fmt.Errorf("%w (redlock: cannot connect)", serverError(err))
	case err != nil:
		err = fmt.Errorf("redlock: cannot connect: %w", err)
	case c.Mode() == valkey.ClientModeCluster:
		c.Close()
		c, err = nil, fmt.Errorf("%w: redlock: %s is a Redis Cluster: give its client to rlvalkey.New, not NewLazy", core.ErrInvalid, l.name)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	defer close(attempt)
	l.attempt, l.err = nil, err
	if c != nil {
		l.client, l.node = c, New(c)
	}
}
