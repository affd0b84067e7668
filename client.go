package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"weak"

	"github.com/go-redlock/redlock/core"
)

// Client grants locks over a fixed set of nodes. Create it with New; a Client is safe for
// concurrent use by many goroutines and holds no connections of its own (the nodes' driver
// clients do).
type Client struct {
	cluster *core.Cluster
	opts    settings

	qmu    sync.Mutex
	queues map[string]weak.Pointer[queue] // per lock key: its local queue (see queueOf)
}

// New returns a Client over nodes, one per independent Redis master. A lock needs a quorum
// of N/2+1 of them. An odd N is the useful shape: an even N is allowed, but 4 nodes
// tolerate one failure, as 3 do.
//
// New fails with an error that matches ErrInvalid if nodes is empty, a node is nil, or an
// option is out of range; the options become the Client's defaults for every call.
func New(nodes []Node, opts ...Option) (*Client, error) {
	s := defaults().with(opts)
	if !s.guardSet && len(nodes) > 1 {
		s.guard = defaultGuard
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	logger := s.logger
	cluster, err := core.NewCluster(nodes, core.OnUnguarded(func(node string) {
		if logger != nil {
			logger.Warn("redlock: node cannot report its uptime, so the restart guard is off for it", "node", node)
		}
	}))
	if err != nil {
		return nil, err
	}
	return &Client{cluster: cluster, opts: s}, nil
}

// Unguarded returns the nodes that cannot apply the restart guard because they do not
// report their uptime (miniredis does not, for one). They are found as locks are acquired
// with the guard on, so the list starts empty. Such a node's vote counts without the guard.
func (c *Client) Unguarded() []string { return c.cluster.Unguarded() }

// TryAcquire makes one attempt to take the lock called name, and returns its Lease.
//
// Errors: ErrHeld if another owner holds it, including another goroutine of this Client
// (found without a round trip), or if waiters are queued for it (they go first); a *QuorumError (ErrNoQuorum) if too few nodes
// answered yes; ErrExpired if the nodes answered slower than the validity; ErrInvalid for an
// empty name or a bad option; ctx's error (errors.Is(err, context.Canceled), say) if ctx ended.
func (c *Client) TryAcquire(ctx context.Context, name string, opts ...Option) (*Lease, error) {
	l, err := c.newLease(name, opts)
	if err != nil {
		return nil, err
	}
	q := c.queueOf(l.lock.Keys.Lock)
	if !q.tryJoin() {
		return nil, fmt.Errorf("%w (a goroutine of this Client holds or waits for %q)", ErrHeld, name)
	}
	l.lock.Token = core.NewToken()
	g, err := c.cluster.Acquire(ctx, &l.lock)
	if err != nil {
		q.leave()
		return nil, err
	}
	l.leaveQueue = q.leave
	l.start(g)
	return l, nil
}

// Acquire takes the lock called name, waiting while another owner holds it and retrying
// through node failures, until it succeeds or ctx ends. It returns the Lease. Goroutines of
// one Client that wait for one name (through Acquire, Do or a Mutex) queue locally in FIFO
// order, and only the first of them waits in Redis, where the waiters of all processes take
// turns in the order they started waiting (see core.Cluster.AcquireWait).
//
// When ctx ends first, the error matches ctx's error (context.DeadlineExceeded, say) and the
// last attempt's error (ErrHeld, ErrNoQuorum...) under errors.Is. It also fails at once with
// ErrInvalid for an empty name or a bad option.
func (c *Client) Acquire(ctx context.Context, name string, opts ...Option) (*Lease, error) {
	l, err := c.newLease(name, opts)
	if err != nil {
		return nil, err
	}
	q := c.queueOf(l.lock.Keys.Lock)
	if err := q.join(ctx); err != nil {
		return nil, fmt.Errorf("redlock: acquire %q: %w", name, err)
	}
	g, err := c.cluster.AcquireWait(ctx, &l.lock, core.Backoff{Min: l.opts.retryMin, Max: l.opts.retryMax})
	if err != nil {
		q.leave()
		return nil, err
	}
	l.leaveQueue = q.leave
	l.start(g)
	return l, nil
}

// Do acquires the lock called name (waiting, as Acquire does), runs fn while holding it, and
// releases it. The Lease extends itself while fn runs (WithAutoExtend is implied), and fn's
// context is cancelled, with the lease's error as its cause, the moment the lease ends (lost,
// expired, or past WithMaxHold): fn should then stop touching the shared resource.
//
// Do returns Acquire's error if the lock was never held; otherwise fn's error; if the lease
// ended while fn ran, an error that matches ErrNotHeld and the reason (ErrLost, say), joined
// with fn's; or else Release's error.
func (c *Client) Do(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...Option) error {
	if fn == nil {
		return fmt.Errorf("%w: nil function", ErrInvalid)
	}
	l, err := c.Acquire(ctx, name, append([]Option{WithAutoExtend(true)}, opts...)...)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-l.Done():
			cancel(notHeld{l.Err()})
		case <-fctx.Done():
		}
	}()
	ferr := fn(fctx)
	ended := l.Err()
	cancel(nil)
	rerr := l.Release(context.WithoutCancel(ctx))
	switch {
	case ended != nil:
		return errors.Join(notHeld{ended}, ferr)
	case ferr != nil:
		return ferr
	}
	return rerr
}

func (c *Client) newLease(name string, opts []Option) (*Lease, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty lock name", ErrInvalid)
	}
	s := c.opts
	if len(opts) > 0 {
		s = s.with(opts)
		if err := s.validate(); err != nil {
			return nil, err
		}
	}
	return &Lease{
		cluster: c.cluster,
		name:    name,
		opts:    s,
		lock: core.Lock{
			Keys:        core.NewKeys(s.prefix, name),
			TTL:         s.ttl,
			NodeTimeout: s.nodeTimeout,
			DriftFactor: s.driftFactor,
			Fence:       true,
			Guard:       s.guard,
		},
	}, nil
}
