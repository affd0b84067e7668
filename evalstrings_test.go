package redlock_test

import (
	"context"
	"errors"
	"time"

	"github.com/go-redlock/redlock/core"
)

// The EvalStrings of this package's test nodes, each with the fault or count of its Eval.

func (instantNode) EvalStrings(context.Context, *core.Script, []string, ...string) ([]string, error) {
	return []string{"0"}, nil // no leader
}

func (n slowNode) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	select {
	case <-time.After(n.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return n.Node.EvalStrings(ctx, s, keys, args...)
}

func (n goneNode) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	if n.gone.Load() {
		return nil, errors.New("the process has exited")
	}
	return n.Node.EvalStrings(ctx, s, keys, args...)
}

func (n downNode) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	if n.down.Load() {
		n.failed.Add(1)
		return nil, errors.New("dial tcp: connect: connection refused")
	}
	return n.Node.EvalStrings(ctx, s, keys, args...)
}

func (closedNode) EvalStrings(context.Context, *core.Script, []string, ...string) ([]string, error) {
	return nil, core.ErrClosed
}

func (n *countingNode) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	n.calls.Add(1)
	return n.Node.EvalStrings(ctx, s, keys, args...)
}
