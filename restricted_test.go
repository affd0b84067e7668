package redlock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// aclServers starts n real servers, each with the user "app" (password "pw") made by
// ACL SETUSER with rules, and returns a Node per server that logs in as that user.
func aclServers(t *testing.T, n int, rules ...string) ([]redlock.Node, []*redistest.Server) {
	t.Helper()
	servers := realServers(t, n)
	nodes := make([]redlock.Node, n)
	for i, s := range servers {
		_, err := s.Do(append([]string{"ACL", "SETUSER", "app", "reset", "on", ">pw"}, rules...)...)
		require.NoError(t, err, "ACL SETUSER on %s", s.Addr())
		nodes[i] = userNode(t, s.Addr(), "app", "pw")
	}
	return nodes, servers
}

// userNode returns a Node over a go-redis client that logs in to addr as user.
func userNode(t testing.TB, addr, user, password string) redlock.Node {
	c := redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: password})
	t.Cleanup(func() { _ = c.Close() })
	n := goredis.New(c)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// defaultLog makes slog.Default() write to the returned buffer until the test ends.
func defaultLog(t *testing.T) *logBuf {
	logger, b := logBuffer()
	old := slog.Default()
	slog.SetDefault(logger)
	t.Cleanup(func() { slog.SetDefault(old) })
	return b
}

// logBuffer returns a logger that writes to the returned buffer.
func logBuffer() (*slog.Logger, *logBuf) {
	b := new(logBuf)
	return slog.New(slog.NewTextHandler(b, nil)), b
}

// logBuf is a buffer that a logger writes to while a test reads it.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestRestartGuardRefusedInfo: a user that may not run INFO (the common hardened ACL,
// +@all -@dangerous) cannot give the restart guard its uptime. With the guard on (the
// default), every acquisition fails at once, naming the node, INFO and the two ways out,
// and nothing is granted unguarded; with the guard off, locks work, and the nodes that
// cannot be told apart by their run_id are logged.
func TestRestartGuardRefusedInfo(t *testing.T) {
	nodes, servers := aclServers(t, 3, "~*", "&*", "+@all", "-@dangerous")
	guardLogs := defaultLog(t)
	c, err := redlock.New(nodes, patient) // the default guard
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	for _, try := range []bool{false, true} {
		var err error
		if try {
			_, err = c.TryAcquire(ctxT(t, time.Minute), "guarded")
		} else {
			_, err = c.Acquire(ctxT(t, time.Minute), "guarded") // a retry fixes nothing: at once
		}
		require.Error(t, err)
		assert.False(t, errors.Is(err, context.DeadlineExceeded), "retried until the deadline: %v", err)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		for _, s := range servers {
			assert.Contains(t, err.Error(), s.Addr())
		}
		for _, want := range []string{"INFO", "+info", "WithRestartGuard(0)", "second owner"} {
			assert.Contains(t, err.Error(), want)
		}
	}
	assert.Empty(t, c.Unguarded(), "no node may take part unguarded where the user did not choose it")
	for _, s := range servers { // the slowest node may answer after the outcome
		require.Eventually(t, func() bool { return strings.Contains(guardLogs.String(), s.Addr()) }, time.Minute, time.Millisecond)
		assert.Equal(t, 1, strings.Count(guardLogs.String(), s.Addr()), "each node's failure is logged once: %s", guardLogs)
	}
	for _, s := range servers {
		v, err := s.Do("EXISTS", "redlock:guarded")
		require.NoError(t, err)
		assert.Equal(t, int64(0), v, "%s granted the lock", s.Addr())
	}

	logs := defaultLog(t) // no logger given: the notices go to slog's
	off, err := redlock.New(nodes, patient, redlock.WithRestartGuard(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = off.Close() })
	l, err := off.Acquire(ctxT(t, time.Minute), "unguarded")
	require.NoError(t, err, "the guard off: INFO is not needed for the lock")
	require.NoError(t, l.Release(ctxT(t, time.Minute)))
	for _, s := range servers { // the last node may answer after the outcome
		require.Eventually(t, func() bool { return strings.Contains(logs.String(), s.Addr()) }, time.Minute, time.Millisecond,
			"a node that cannot be told apart from the others is logged: %s", logs)
	}
	assert.Contains(t, logs.String(), "refuses INFO")
}
