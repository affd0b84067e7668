package redlock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
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
		v, err := s.Do("EXISTS", "redlock:{guarded}")
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

// restrictedRules are the ACL rules of the ready ACL SETUSER line of docs/restricted.md
// (and of the README): exactly what the library needs, for the default prefix.
var restrictedRules = func() []string {
	doc, err := os.ReadFile("docs/restricted.md")
	if err != nil {
		panic(err)
	}
	const line = "ACL SETUSER locker on >password "
	_, rules, ok := strings.Cut(string(doc), "\n"+line)
	if !ok {
		panic("docs/restricted.md has no line " + line)
	}
	rules, _, _ = strings.Cut(rules, "\n")
	return strings.Fields(rules)
}()

// useEverything uses every feature through two Clients over the same nodes (two processes):
// a Lease with its fencing token (the fence counter set ahead of the clock, so that the
// next token comes from INCR), under the restart guard, another Client's wait for it in
// Redis and its hand-over, a Mutex, an RWMutex's reader, a Semaphore and an Election. It
// returns the first error.
func useEverything(ctx context.Context, t *testing.T, servers []*redistest.Server, a, b *redlock.Client) error {
	for _, s := range servers {
		if _, err := s.Do("SET", "redlock:{lease}:fence", "9000000000000000", "PX", "60000"); err != nil {
			return err
		}
	}
	l, err := a.Acquire(ctx, "lease")
	if err != nil {
		return err
	}
	if l.Token() <= 9000000000000000 {
		return fmt.Errorf("token %d is not above the counter", l.Token())
	}
	waited := make(chan error, 1)
	go func() {
		l, err := b.Acquire(ctx, "lease") // waits in Redis: queued, then handed the lock
		if err == nil {
			err = l.Release(ctx)
		}
		waited <- err
	}()
	for queued := false; !queued; { // b has queued on the first server, or failed
		select {
		case err := <-waited:
			_ = l.Release(ctx)
			return fmt.Errorf("the wait ended before the release: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		v, err := servers[0].Do("EXISTS", "redlock:{lease}:queue")
		if err != nil {
			return err
		}
		queued = v == int64(1)
		time.Sleep(time.Millisecond)
	}
	if err := l.Release(ctx); err != nil {
		return err
	}
	if err := <-waited; err != nil {
		return err
	}
	mu := a.NewMutex("mutex")
	if err := mu.LockContext(ctx); err != nil {
		return err
	}
	if err := mu.UnlockContext(ctx); err != nil {
		return err
	}
	rw := a.NewRWMutex("rwmutex")
	if err := rw.RLockContext(ctx); err != nil {
		return err
	}
	if err := rw.RUnlockContext(ctx); err != nil {
		return err
	}
	p, err := a.NewSemaphore("permits", 2).Acquire(ctx)
	if err != nil {
		return err
	}
	if err := p.Release(ctx); err != nil {
		return err
	}
	e := a.NewElection("leader")
	lead, err := e.Campaign(ctx, "me")
	if err != nil {
		return err
	}
	if v, err := e.Leader(ctx); err != nil || v != "me" {
		return fmt.Errorf("leader %q: %w", v, err)
	}
	st, err := a.Status(ctx, "leader")
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if st.Leader == nil || st.Leader.Value != "me" {
		return fmt.Errorf("status says the leader is %+v, want one that proclaimed me", st.Leader)
	}
	return lead.Release(ctx)
}

// restrictedClients returns two Clients (two processes) over one real server whose user
// has the ACL rules, with the restart guard on (1 s), and the buffer of their notices.
func restrictedClients(t *testing.T, rules []string) ([]*redistest.Server, *redlock.Client, *redlock.Client, *logBuf) {
	nodes, servers := aclServers(t, 1, rules...)
	nodes2 := []redlock.Node{userNode(t, servers[0].Addr(), "app", "pw")}
	logger, logs := logBuffer()
	opts := []redlock.Option{redlock.WithTTL(time.Second), redlock.WithRestartGuard(time.Second), redlock.WithNodeTimeout(500 * time.Millisecond),
		redlock.WithLogger(logger)}
	a, err := redlock.New(nodes, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	b, err := redlock.New(nodes2, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return servers, a, b, logs
}

// TestRestrictedUser: a user with exactly the README's ACL rules can use every feature; a
// user without one of them gets an error that matches ErrInvalid and names what is refused,
// at once (a retry would run to the deadline).
func TestRestrictedUser(t *testing.T) {
	t.Parallel() // see bubble_test.go
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	assert.Contains(t, string(readme), "\nACL SETUSER locker on >password "+strings.Join(restrictedRules, " ")+"\n",
		"the README's line is docs/restricted.md's")
	servers, a, b, logs := restrictedClients(t, restrictedRules)
	require.NoError(t, useEverything(ctxT(t, time.Minute), t, servers, a, b), "with exactly the README's rules")
	assert.NotContains(t, logs.String(), "no retry can fix")

	for _, tc := range []struct{ drop, says string }{
		{"+evalsha", "EVALSHA"}, {"+eval", "EVAL"}, {"+get", "GET"}, {"+set", "SET"}, {"+exists", "EXISTS"},
		{"+time", "TIME"}, {"+info", "INFO"}, {"+incr", "INCR"}, {"+zadd", "ZADD"}, {"+hset", "HSET"},
		{"+publish", "PUBLISH"}, {"+hgetall", "HGETALL"}, {"~redlock:*", "keys"}, {"&redlock:*", "channel"},
	} {
		t.Run(tc.drop, func(t *testing.T) {
			var rules []string
			for _, r := range restrictedRules {
				if r != tc.drop {
					rules = append(rules, r)
				}
			}
			servers, a, b, _ := restrictedClients(t, rules)
			err := useEverything(ctxT(t, 30*time.Second), t, servers, a, b)
			require.Error(t, err)
			assert.False(t, errors.Is(err, context.DeadlineExceeded), "retried until the deadline: %v", err)
			require.ErrorIs(t, err, redlock.ErrInvalid)
			assert.Contains(t, strings.ToUpper(err.Error()), strings.ToUpper(tc.says))
		})
	}
}
