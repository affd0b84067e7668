package rueidisfamily

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// intMessage is a reply message of scriptedClient's: an integer, or an array of them.
type intMessage struct {
	n     int64
	array []int64
}

func (m *intMessage) ToArray() ([]intMessage, error) {
	out := make([]intMessage, len(m.array))
	for i, v := range m.array {
		out[i] = intMessage{n: v}
	}
	return out, nil
}
func (m *intMessage) IsString() bool            { return false }
func (m *intMessage) ToString() (string, error) { return "", errors.New("not a string") }
func (m *intMessage) IsInt64() bool             { return true }
func (m *intMessage) ToInt64() (int64, error)   { return m.n, nil }
func (m *intMessage) IsNil() bool               { return false }

// scriptedClient answers each Eval with the next of its errors, and with the reply {1, 7}
// once they run out. It counts the calls.
type scriptedClient struct {
	fakeDriver
	mu     sync.Mutex
	errs   []error
	calls  int
	during func() // if not nil, run in each call
}

func (c *scriptedClient) Eval(context.Context, *core.Script, []string, []string) (intMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.during != nil {
		c.during()
	}
	if len(c.errs) > 0 {
		err := c.errs[0]
		c.errs = c.errs[1:]
		return intMessage{}, err
	}
	return intMessage{array: []int64{1, 7}}, nil
}

func (c *scriptedClient) Receive(ctx context.Context, _ string, _ bool, _ func(kind, channel string), _ func(payload string)) error {
	<-ctx.Done()
	return ctx.Err()
}
func (c *scriptedClient) Unsubscribe(context.Context, string, bool) error { return nil }
func (c *scriptedClient) Addrs() []string                                 { return []string{"fake:1"} }
func (c *scriptedClient) Cluster() bool                                   { return false }
func (c *scriptedClient) Close()                                          {}

// TestEvalResendsOnlyWhatTheConnectionFailed checks Eval's one resend: a call that failed
// with a broken connection, or with a context's error while its own ctx lives (another
// call's deadline failed the connection it shared), is sent once more, and only once; a
// server's error reply, and a call whose own ctx ended, are not sent again.
func TestEvalResendsOnlyWhatTheConnectionFailed(t *testing.T) {
	script := core.NewScript("test", "return {1, 7}")
	reset := fmt.Errorf("read: %w", syscall.ECONNRESET)
	reply := errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")
	for _, tc := range []struct {
		name      string
		errs      []error
		cancelled bool // the call's own ctx has ended
		calls     int
		want      error // nil: the reply {1, 7}
	}{
		{name: "answered", calls: 1},
		{name: "connection reset", errs: []error{reset}, calls: 2},
		{name: "EOF", errs: []error{io.EOF}, calls: 2},
		{name: "another call's deadline", errs: []error{context.DeadlineExceeded}, calls: 2},
		{name: "another call's cancellation", errs: []error{context.Canceled}, calls: 2},
		{name: "broken twice", errs: []error{reset, io.EOF}, calls: 2, want: io.EOF},
		{name: "error reply", errs: []error{reply}, calls: 1, want: reply},
		{name: "own ctx ended", errs: []error{context.Canceled}, cancelled: true, calls: 0, want: context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &scriptedClient{errs: tc.errs}
			n := NewNode[intMessage, *intMessage](c, nil)
			ctx := context.Background()
			if tc.cancelled {
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				ctx = cctx
			}
			vals, err := n.Eval(ctx, script, []string{"k"}, "a")
			assert.Equal(t, tc.calls, c.calls, "calls sent")
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []int64{1, 7}, vals)
		})
	}
}

// TestEvalUnderACtxThatCanEndResendsAsWithout checks that a call whose ctx can end, which
// runs in a goroutine of its own, is resent by the same rule.
func TestEvalUnderACtxThatCanEndResendsAsWithout(t *testing.T) {
	c := &scriptedClient{errs: []error{context.DeadlineExceeded}}
	n := NewNode[intMessage, *intMessage](c, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	vals, err := n.Eval(ctx, core.NewScript("test", "return {1, 7}"), []string{"k"}, "a")
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 7}, vals)
	assert.Equal(t, 2, c.calls, "calls sent")
}

// TestEvalDoesNotResendOnceItsCtxEnded checks that a call whose own ctx ended under it is
// not sent again: its context error is its own, not another call's.
func TestEvalDoesNotResendOnceItsCtxEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &scriptedClient{errs: []error{context.Canceled}, during: cancel}
	n := NewNode[intMessage, *intMessage](c, nil)
	_, err := n.eval(ctx, core.NewScript("test", "return {1, 7}"), []string{"k"}, []string{"a"})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, c.calls, "calls sent")
}

// TestEvalRunsACallContextInline checks where Eval runs its call, with a client that
// ignores its ctx and does not return until it is let go: under a context that can end
// otherwise, in a goroutine of its own, so that Eval returns at the context's end while the
// call goes on; under core's call context (core.WithDeadline), which ends only at its
// deadline, in the caller's goroutine, so that Eval returns only with the call (a real
// driver ends it at its deadline).
func TestEvalRunsACallContextInline(t *testing.T) {
	script := core.NewScript("test", "return {1, 7}")
	for _, tc := range []struct {
		name   string
		ctx    func() (context.Context, context.CancelFunc)
		inline bool
	}{
		{"cancellable", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, false},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Second)
		}, false},
		{"call-context", func() (context.Context, context.CancelFunc) {
			return core.WithDeadline(context.Background(), time.Second), func() {}
		}, true},
	} {
		synctest.Test(t, func(t *testing.T) {
			letGo := make(chan struct{})
			c := &scriptedClient{during: func() { <-letGo }}
			n := NewNode[intMessage, *intMessage](c, nil)
			ctx, cancel := tc.ctx()
			returned := make(chan error, 1)
			go func() {
				_, err := n.Eval(ctx, script, []string{"k"}, "a")
				returned <- err
			}()
			synctest.Wait() // the call runs, and waits to be let go
			cancel()
			time.Sleep(2 * time.Second) // past every deadline
			select {
			case err := <-returned:
				assert.False(t, tc.inline, "%s: Eval returned (%v) while its call ran: it did not run in the caller's goroutine", tc.name, err)
				assert.Error(t, err, tc.name)
				close(letGo)
			default:
				assert.True(t, tc.inline, "%s: Eval did not return at its ctx's end", tc.name)
				close(letGo)
				assert.NoError(t, <-returned, tc.name)
			}
		})
	}
}
