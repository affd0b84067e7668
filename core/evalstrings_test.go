package core_test

import (
	"context"
	"errors"

	"github.com/go-redlock/redlock/core"
)

// The EvalStrings of this package's test nodes: a wrapper of a Node passes it on, as it
// does Eval, and a node whose every call fails fails it too.

func (failingNode) EvalStrings(context.Context, *core.Script, []string, ...string) ([]string, error) {
	return nil, errors.New("dial tcp: connection refused")
}

// EvalStrings runs each script twice too, as Eval does (see twice).
func (n *twice) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	if _, err := n.Node.EvalStrings(ctx, s, keys, args...); err != nil {
		return nil, err
	}
	if f := n.between[s.Name()]; f != nil {
		f()
	}
	return n.Node.EvalStrings(ctx, s, keys, args...)
}
