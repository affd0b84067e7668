package redlock

import (
	"context"
	"fmt"

	"github.com/go-redlock/redlock/core"
)

// Client grants locks over a fixed set of nodes. Create it with New; a Client is safe for
// concurrent use by many goroutines and holds no connections of its own (the nodes' driver
// clients do).
type Client struct {
	cluster *core.Cluster
	opts    settings
}

// New returns a Client over nodes, one per independent Redis master. A lock needs a quorum
// of N/2+1 of them. An odd N is the useful shape: an even N is allowed, but 4 nodes
// tolerate one failure, as 3 do.
//
// New fails with an error that matches ErrInvalid if nodes is empty, a node is nil, or an
// option is out of range; the options become the Client's defaults for every call.
func New(nodes []Node, opts ...Option) (*Client, error) {
	s := defaults().with(opts)
	if err := s.validate(); err != nil {
		return nil, err
	}
	cluster, err := core.NewCluster(nodes)
	if err != nil {
		return nil, err
	}
	return &Client{cluster: cluster, opts: s}, nil
}

// TryAcquire makes one attempt to take the lock called name, and returns its Lease.
//
// Errors: ErrHeld if another owner holds it; a *QuorumError (ErrNoQuorum) if too few nodes
// answered; ErrExpired if the nodes answered slower than the TTL; ErrInvalid for an empty
// name or a bad option; ctx's error (errors.Is(err, context.Canceled), say) if ctx ended.
func (c *Client) TryAcquire(ctx context.Context, name string, opts ...Option) (*Lease, error) {
	l, err := c.newLease(name, opts)
	if err != nil {
		return nil, err
	}
	l.lock.Token = core.NewToken()
	g, err := c.cluster.Acquire(ctx, &l.lock)
	if err != nil {
		return nil, err
	}
	l.granted(g)
	return l, nil
}

// Acquire takes the lock called name, waiting while another owner holds it and retrying
// through node failures, until it succeeds or ctx ends. It returns the Lease.
//
// When ctx ends first, the error matches ctx's error (context.DeadlineExceeded, say) and the
// last attempt's error (ErrHeld, ErrNoQuorum...) under errors.Is. It also fails at once with
// ErrInvalid for an empty name or a bad option.
func (c *Client) Acquire(ctx context.Context, name string, opts ...Option) (*Lease, error) {
	l, err := c.newLease(name, opts)
	if err != nil {
		return nil, err
	}
	g, err := c.cluster.AcquireWait(ctx, &l.lock, core.Backoff{Min: l.opts.retryMin, Max: l.opts.retryMax})
	if err != nil {
		return nil, err
	}
	l.granted(g)
	return l, nil
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
		},
	}, nil
}
