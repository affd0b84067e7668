package backendtest

import (
	"context"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
)

// SetNXHonoursContext: a node that accepts connections and never replies must not hold
// SetNX past its context's deadline or cancellation. hung builds such a node, a
// core.Setter.
func SetNXHonoursContext(t *testing.T, hung func(t *testing.T) core.Node) {
	for _, c := range honourCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			setter := hung(t).(core.Setter)
			ctx, cancel := c.ctx()
			defer cancel()
			start := time.Now()
			set, err := setter.SetNX(ctx, "lock", "token", time.Second)
			elapsed := time.Since(start)
			assert.False(t, set)
			assert.ErrorIs(t, err, c.wantIs)
			assert.Less(t, elapsed, 500*time.Millisecond, "SetNX returned after %v: %v", elapsed, err)
		})
	}
}

// honourCase is a context that ends while a call waits for a server that never replies:
// by its deadline or by a cancellation.
type honourCase struct {
	name   string
	ctx    func() (context.Context, context.CancelFunc)
	wantIs error
}

func honourCases() []honourCase {
	return []honourCase{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancelled while waiting", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	}
}
