package rueidisfamily

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeMessage is a reply message of fakeClient's; no test here reads one.
type fakeMessage struct{}

func (*fakeMessage) ToArray() ([]fakeMessage, error) { return nil, errors.New("fake") }
func (*fakeMessage) IsString() bool                  { return false }
func (*fakeMessage) ToString() (string, error)       { return "", errors.New("fake") }
func (*fakeMessage) IsInt64() bool                   { return false }
func (*fakeMessage) ToInt64() (int64, error)         { return 0, errors.New("fake") }
func (*fakeMessage) IsNil() bool                     { return false }

// fakeDriver is a driver whose errors are none of its own.
type fakeDriver struct{}

func (fakeDriver) Names() Names {
	return Names{Driver: "fake", Option: "fake.Option", Backend: "rlfake"}
}
func (fakeDriver) Closing(error) bool         { return false }
func (fakeDriver) Nil(error) bool             { return false }
func (fakeDriver) Reply(error) (string, bool) { return "", false }

// fakeClient is a client that connects to nothing: a Lazy's tests only make and close it.
type fakeClient struct {
	fakeDriver
	cluster bool
	closed  atomic.Bool
}

func (*fakeClient) Eval(context.Context, *core.Script, []string, []string) (fakeMessage, error) {
	return fakeMessage{}, errors.New("fake")
}
func (*fakeClient) Receive(context.Context, string, bool, func(string, string), func(string)) error {
	return errors.New("fake")
}
func (*fakeClient) Unsubscribe(context.Context, string, bool) error { return nil }
func (*fakeClient) Addrs() []string                                 { return []string{"fake:1"} }
func (c *fakeClient) Cluster() bool                                 { return c.cluster }
func (c *fakeClient) Close()                                        { c.closed.Store(true) }

// isClosed reports whether Close was called.
func (l *Lazy[M, P]) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// TestLazyCloseDuringAttempt: a call waiting for the attempt to make the client when Close
// is called fails with an error that matches core.ErrClosed, Subscribe included, even when
// the attempt succeeds, and the client the attempt made is closed. The attempt is held
// until Close has begun; the waiting call and Close then race for the new client, so the
// test runs many rounds.
func TestLazyCloseDuringAttempt(t *testing.T) {
	for round := range 50 {
		entered, release := make(chan struct{}), make(chan struct{})
		c := &fakeClient{}
		l := NewLazy(fakeDriver{}, []string{"fake:1"}, nil, func() (*Node[fakeMessage, *fakeMessage], error) {
			close(entered)
			<-release
			return NewNode[fakeMessage](c, c), nil
		})
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
		if !assert.ErrorIs(t, err, core.ErrClosed, "round %d: Subscribe waiting while Close was called", round) ||
			!assert.True(t, c.closed.Load(), "round %d: the client the attempt made was left open", round) {
			return
		}
	}
}

// TestLazyRefusesACluster: a Lazy whose attempt makes a cluster client closes it, and
// fails this call and every later one with an error that matches core.ErrInvalid and names
// the backend's New, without dialling again.
func TestLazyRefusesACluster(t *testing.T) {
	c := &fakeClient{cluster: true}
	dials := 0
	l := NewLazy(fakeDriver{}, []string{"fake:1"}, nil, func() (*Node[fakeMessage, *fakeMessage], error) {
		dials++
		return NewNode[fakeMessage](c, c), nil
	})
	t.Cleanup(func() { _ = l.Close() })
	for range 2 {
		_, err := l.Eval(context.Background(), core.NewScript("one", "return {1}"), []string{"k"})
		require.ErrorIs(t, err, core.ErrInvalid)
		assert.ErrorContains(t, err, "rlfake.New")
	}
	assert.Equal(t, 1, dials)
	assert.True(t, c.closed.Load(), "the cluster client was left open")
}
