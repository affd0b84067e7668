package backendtest

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Late is the state of a driver client whose first command is built late: the backend's
// wrapper of its client calls Hold when the client's command builder is asked for (B(), in
// the rueidis family) and Built with each command it sends (Do).
type Late struct {
	entered chan struct{} // closed when Hold is first called
	release chan struct{} // closed to let it go on
	first   sync.Once
	built   chan []string
}

// Hold waits, the first time it is called, until the test releases it.
func (l *Late) Hold() {
	l.first.Do(func() {
		close(l.entered)
		<-l.release
	})
}

// Built reports a command the client sends, its words.
func (l *Late) Built(cmd []string) { l.built <- slices.Clone(cmd) }

// EvalKeepsNoArguments: under a context that can be cancelled and has no deadline, Eval
// (and EvalStrings) runs the call on a goroutine of its own and returns when the context
// ends. That goroutine may build its command only afterwards (here it is held until then):
// it must not read keys and args, which the caller owns again once Eval returned. newNode
// builds the Node over a client of miniredis at addr that late holds.
func EvalKeepsNoArguments(t *testing.T, newNode func(t *testing.T, addr string, late *Late) core.Node) {
	for _, strs := range []bool{false, true} {
		s := Start(t, Miniredis)
		late := &Late{entered: make(chan struct{}), release: make(chan struct{}), built: make(chan []string, 4)}
		node := newNode(t, s.Addr, late)
		ctx, cancel := context.WithCancel(context.Background())
		keys, args := []string{"lock"}, []string{"token", "1000", "w"}
		returned := make(chan error, 1)
		go func() {
			var err error
			if strs {
				_, err = node.EvalStrings(ctx, Script(t, "extend"), keys, args...)
			} else {
				_, err = node.Eval(ctx, Script(t, "extend"), keys, args...)
			}
			returned <- err
		}()
		<-late.entered // the call's goroutine is about to build its command
		cancel()
		require.ErrorIs(t, <-returned, context.Canceled)
		keys[0], args[0], args[1] = "other", "mine", "9" // the caller's again
		close(late.release)
		cmd := <-late.built
		assert.Contains(t, cmd, "lock", "EvalStrings %v: %q", strs, cmd)
		assert.Contains(t, cmd, "token", "EvalStrings %v: %q", strs, cmd)
		assert.NotContains(t, cmd, "other", "EvalStrings %v: %q", strs, cmd)
	}
}
