package valkey

import (
	"context"
	"crypto/tls"
	"net"
	"runtime"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/valkey-io/valkey-go"
)

// TestLazyCloseDuringAttempt: a call waiting for the attempt to make the client when Close
// is called fails with an error that matches core.ErrClosed, Subscribe included, even when
// the attempt succeeds. The attempt's dial is held until Close has begun; the waiting call
// and Close then race for the new client, so the test runs many rounds.
func TestLazyCloseDuringAttempt(t *testing.T) {
	mr := miniredis.RunT(t)
	for round := range 50 {
		entered, release := make(chan struct{}), make(chan struct{})
		var first sync.Once
		opt := valkey.ClientOption{
			InitAddress: []string{mr.Addr()}, AlwaysRESP2: true, DisableCache: true, ForceSingleClient: true,
			DialCtxFn: func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
				first.Do(func() { close(entered); <-release })
				return d.DialContext(ctx, "tcp", addr)
			},
		}
		l := NewLazy(opt)
		subscribed := make(chan error, 1)
		go func() {
			unsubscribe, err := l.Subscribe(context.Background(), "ch", func(string) {})
			if err == nil {
				unsubscribe()
			}
			subscribed <- err
		}()
		<-entered // the attempt is under way
		closed := make(chan struct{})
		go func() {
			_ = l.Close()
			close(closed)
		}()
		for !l.isClosed() { // Close waits for the attempt now
			runtime.Gosched()
		}
		close(release)
		err := <-subscribed
		<-closed
		if !assert.ErrorIs(t, err, core.ErrClosed, "round %d: Subscribe waiting while Close was called", round) {
			return
		}
	}
}

// isClosed reports whether Close was called.
func (l *Lazy) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}
