package rueidisfamily

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-redlock/redlock/core"
)

// Lazy is a backend's Lazy (see backends/rueidis's Lazy for what it promises): a node
// whose client is made on first use, one attempt at a time and at most one a second. It
// owns its client. It is safe for concurrent use.
type Lazy[M any, P Message[M]] struct {
	driver Driver
	dial   func() (*Node[M, P], error)
	name   string

	mu      sync.Mutex
	node    *Node[M, P]   // nil until a client was made
	attempt chan struct{} // non-nil while an attempt is under way; closed when it ends
	last    time.Time     // when the last attempt started
	err     error         // the last attempt's error; permanent if it matches core.ErrInvalid
	closed  bool
}

// lazyRetry is the least time between the starts of two of a Lazy's attempts to make its
// client.
const lazyRetry = time.Second

// NewLazy returns a Lazy whose node dial makes, over a client of d's (d's NewClient, then
// NewNode); it dials nothing itself. addrs are the client option's InitAddress: the Lazy is
// named for them, sorted and joined by commas. Without any, the Lazy never dials: every call
// fails with an error that matches core.ErrInvalid, and the Lazy is named for self (the
// backend's Lazy), its type and address.
func NewLazy[M any, P Message[M]](d Driver, addrs []string, self any, dial func() (*Node[M, P], error)) *Lazy[M, P] {
	addrs = slices.Sorted(slices.Values(addrs))
	l := &Lazy[M, P]{driver: d, dial: dial, name: strings.Join(addrs, ",")}
	if len(addrs) == 0 {
		l.name = fmt.Sprintf("%T@%p", self, self)
		l.err = fmt.Errorf("%w: redlock: %s: the %s has no InitAddress", core.ErrInvalid, l.name, d.Names().Option)
	}
	return l
}

// String returns the Lazy's name (see NewLazy).
func (l *Lazy[M, P]) String() string { return l.name }

// Eval is the Node's Eval once the client is made; until then it makes it.
func (l *Lazy[M, P]) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	n, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return n.Eval(ctx, s, keys, args...)
}

// EvalStrings is the Node's EvalStrings once the client is made; until then it makes it.
func (l *Lazy[M, P]) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	n, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return n.EvalStrings(ctx, s, keys, args...)
}

// Subscribe is the Node's Subscribe once the client is made; until then it makes it.
func (l *Lazy[M, P]) Subscribe(ctx context.Context, channel string, onMessage func(payload string)) (func(), error) {
	n, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return n.Subscribe(ctx, channel, onMessage)
}

// Close ends the subscriptions (see Node.Close) and closes the client. It waits for an
// attempt to make the client that is under way (the driver bounds it by its dial timeout).
// Every call after Close fails with an error that matches core.ErrClosed. It is idempotent,
// and must not be called from a Subscribe callback.
func (l *Lazy[M, P]) Close() error {
	l.mu.Lock()
	l.closed = true
	attempt := l.attempt
	l.mu.Unlock()
	if attempt != nil {
		<-attempt
	}
	l.mu.Lock()
	n := l.node
	l.node = nil
	l.mu.Unlock()
	if n != nil {
		_ = n.Close()
		n.client.Close()
	}
	return nil
}

// get returns the Node over the client, making the client first if need be (see Lazy).
func (l *Lazy[M, P]) get(ctx context.Context) (*Node[M, P], error) {
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

// connect makes the client and its node, and closes attempt when it is done.
func (l *Lazy[M, P]) connect(attempt chan struct{}) {
	n, err := l.dial()
	_, reply := l.driver.Reply(err)
	switch {
	case reply: // the server's reply (WRONGPASS...) first, for core.Permanent
		err = fmt.Errorf("%w (redlock: cannot connect)", serverError(l.driver, err))
	case err != nil:
		err = fmt.Errorf("redlock: cannot connect: %w", err)
	case n.ShardedPubSub():
		_ = n.Close()
		n.client.Close()
		n, err = nil, fmt.Errorf("%w: redlock: %s is a Redis Cluster: give its client to %s.New, not NewLazy", core.ErrInvalid, l.name, l.driver.Names().Backend)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	defer close(attempt)
	l.attempt, l.err = nil, err
	if n != nil {
		l.node = n
	}
}
