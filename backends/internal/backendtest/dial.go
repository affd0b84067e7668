package backendtest

import (
	"context"
	"io"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/require"
)

// Dial runs the tests of a backend's Dial (func(addr string) (*Node, error), or a Lazy's)
// on real servers: a Client made by redlock.Dial locks and excludes, its Close closes the
// connections Dial's nodes made, a URL's password is used and never shown, and a bad
// address is refused with an error that matches core.ErrInvalid and names it. badURLs are
// URLs this backend refuses, besides the ones every backend does.
func Dial[N core.Node](t *testing.T, dial func(addr string) (N, error), badURLs ...string) {
	t.Run("locks-and-closes", func(t *testing.T) { dialLocks(t, dial) })
	t.Run("url", func(t *testing.T) { dialURL(t, dial) })
	t.Run("closed", func(t *testing.T) { dialClosed(t, dial) })
	t.Run("bad-address", func(t *testing.T) {
		for _, addr := range append([]string{"", "127.0.0.1", "127.0.0.1:", "no-port", "http://127.0.0.1:6379"}, badURLs...) {
			n, err := dial(addr)
			require.ErrorIs(t, err, core.ErrInvalid, "address %q", addr)
			require.Contains(t, err.Error(), `"`+addr+`"`, "the error names the address")
			require.True(t, isZero(n), "a node for %q", addr)
		}
	})
}

// isZero reports whether n is its type's zero value (a nil pointer).
func isZero[N core.Node](n N) bool {
	var zero N
	return any(n) == any(zero)
}

// dialLocks makes two Clients with redlock.Dial over three servers, locks through one, sees
// the other refused, unlocks, closes both and waits for the servers to see every connection
// of theirs closed.
func dialLocks[N core.Node](t *testing.T, dial func(addr string) (N, error)) {
	servers := redistest.StartN(t, 3)
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	// The servers are fresh: without the restart guard the first lock does not wait 30 s.
	a, err := redlock.Dial(addrs, dial, redlock.WithRestartGuard(0), redlock.WithNodeTimeout(2*time.Second))
	require.NoError(t, err)
	b, err := redlock.Dial(addrs, dial, redlock.WithRestartGuard(0), redlock.WithNodeTimeout(2*time.Second))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mu := a.NewMutex("dial")
	require.NoError(t, mu.LockContext(ctx))
	require.False(t, b.NewMutex("dial").TryLock(), "a second Client locks what the first holds")
	mu.Unlock()
	other := b.NewMutex("dial")
	require.NoError(t, other.LockContext(ctx), "the second Client locks it once it is free")
	other.Unlock()
	for _, s := range servers {
		require.Greater(t, connected(t, s), 1, "the Clients' connections on %s", s.Addr())
	}

	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	for _, s := range servers {
		// Only the connection that asks is left once Dial's nodes have closed their clients.
		require.Eventually(t, func() bool { return connected(t, s) == 1 }, 10*time.Second, 20*time.Millisecond,
			"connections left open on %s after Client.Close: %d", s.Addr(), connected(t, s))
	}
}

// dialURL locks through a node dialled by a URL with a password, on a server that requires
// it, and checks that the node's name does not show the password.
func dialURL[N core.Node](t *testing.T, dial func(addr string) (N, error)) {
	s := redistest.Start(t)
	_, err := s.Do("CONFIG", "SET", "requirepass", "s3cret")
	require.NoError(t, err)
	n, err := dial("redis://:s3cret@" + s.Addr())
	require.NoError(t, err)
	require.NotContains(t, n.String(), "s3cret", "a node's name shows the URL's password")
	c, err := redlock.New([]redlock.Node{n}, redlock.WithRestartGuard(0), redlock.WithNodeTimeout(2*time.Second))
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := c.Acquire(ctx, "dial-url")
	require.NoError(t, err, "the URL's password is not sent")
	require.NoError(t, lease.Release(ctx))
}

// dialClosed runs a script through a dialled node, closes the node, and sees the next call
// fail with an error that matches core.ErrClosed.
func dialClosed[N core.Node](t *testing.T, dial func(addr string) (N, error)) {
	s := redistest.Start(t)
	n, err := dial(s.Addr())
	require.NoError(t, err)
	closer, ok := any(n).(io.Closer)
	require.True(t, ok, "a dialled node is an io.Closer, for redlock.Client.Close")
	script := core.NewScript("one", "return {1}")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := n.Eval(ctx, script, []string{"k"})
	require.NoError(t, err)
	require.Equal(t, []int64{1}, got)
	require.NoError(t, closer.Close())
	require.NoError(t, closer.Close(), "Close is idempotent")
	_, err = n.Eval(ctx, script, []string{"k"})
	require.ErrorIs(t, err, core.ErrClosed, "a call after Close")
}

var connectedClients = regexp.MustCompile(`connected_clients:(\d+)`)

// connected returns the server's count of connected clients, counting the one that asks.
func connected(t *testing.T, s *redistest.Server) int {
	info, err := s.Do("INFO", "clients")
	require.NoError(t, err)
	text, _ := info.(string)
	m := connectedClients.FindStringSubmatch(text)
	require.NotNil(t, m, "INFO clients: %q", text)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}
