package core

import (
	"context"
	"errors"
)

// errNoStrings is the EvalStrings error of the fake nodes below: none of them runs the
// leader script, the one core reads with EvalStrings.
var errNoStrings = errors.New("fake node: no EvalStrings")

func (*fakeNode) EvalStrings(context.Context, *Script, []string, ...string) ([]string, error) {
	return nil, errNoStrings
}

func (*lateNode) EvalStrings(context.Context, *Script, []string, ...string) ([]string, error) {
	return nil, errNoStrings
}

func (*scriptedNode) EvalStrings(context.Context, *Script, []string, ...string) ([]string, error) {
	return nil, errNoStrings
}

func (instantNode) EvalStrings(context.Context, *Script, []string, ...string) ([]string, error) {
	return nil, errNoStrings
}
