package goredis_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/backends/internal/backendtest"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refusedAddr returns an address on 127.0.0.1 where nothing listens: a connection to it is
// refused.
func refusedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestRefusedConnectionIsTheCause: a call to a server that refuses connections fails with
// an error that says so (it matches syscall.ECONNREFUSED), not with the context's deadline
// alone, which core reports as a bare "node timed out": go-redis retries the dial until
// the deadline and then returns only the context's error. With and without
// ContextTimeoutEnabled; and through core, whose error then names the cause.
func TestRefusedConnectionIsTheCause(t *testing.T) {
	t.Parallel()
	script := core.NewScript("one", "return {1}")
	for _, ctxTimeouts := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", ctxTimeouts), func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: refusedAddr(t), ContextTimeoutEnabled: ctxTimeouts})
			node := goredis.New(rdb)
			t.Cleanup(func() { _ = node.Close(); _ = rdb.Close() })
			for range 3 { // the first call dials, later ones may meet go-redis's record of it
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				_, err := node.Eval(ctx, script, []string{"k"})
				cancel()
				require.Error(t, err)
				assert.ErrorIs(t, err, syscall.ECONNREFUSED, "Eval on a refused connection: %v", err)
			}

			cl, err := core.NewCluster([]core.Node{node})
			require.NoError(t, err)
			l := &core.Lock{Keys: core.NewKeys("test:", "refused"), TTL: time.Second, NodeTimeout: 100 * time.Millisecond, DriftFactor: 0.01}
			_, err = cl.Acquire(context.Background(), l)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "connection refused", "core's error for a node that refuses connections must give the cause")
			var q *core.QuorumError
			assert.True(t, errors.As(err, &q), "%v", err)
		})
	}
}

// recorder is a go-redis logger that keeps the messages about failed dials, and passes the
// others on to the standard logger.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Printf(_ context.Context, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !strings.Contains(msg, "failed to dial") {
		log.Print("redis: " + msg)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msg)
}

// logged reports whether a message that contains part was logged.
func (r *recorder) logged(part string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.msgs, func(m string) bool { return strings.Contains(m, part) })
}

// goredisLog is the go-redis logger of this package's tests, set once by TestMain, before
// any client is used: redis.SetLogger is not safe while clients dial.
var goredisLog recorder

func TestMain(m *testing.M) {
	redis.SetLogger(&goredisLog)
	os.Exit(m.Run())
}

// TestSetLoggerTakesDialFailures: go-redis's failed dials go to the logger given to
// redis.SetLogger (here, by TestMain), as the package doc says, and not to standard error.
func TestSetLoggerTakesDialFailures(t *testing.T) {
	t.Parallel()
	addr := refusedAddr(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	node := goredis.New(rdb)
	t.Cleanup(func() { _ = node.Close(); _ = rdb.Close() })
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := node.Eval(ctx, core.NewScript("one", "return {1}"), []string{"k"})
		require.Error(t, err)
		return goredisLog.logged(addr)
	}, 10*time.Second, 10*time.Millisecond, "go-redis logged no failed dial to %s to the logger given to redis.SetLogger", addr)
}

// TestStartsWithAServerDown: a go-redis client connects on first use, so its Node is made
// while its server is down (see backendtest.StartsWithAServerDown).
func TestStartsWithAServerDown(t *testing.T) {
	t.Parallel()
	backendtest.StartsWithAServerDown(t, func(t *testing.T, addr string) core.Node {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		node := goredis.New(rdb)
		t.Cleanup(func() { _ = node.Close(); _ = rdb.Close() })
		return node
	})
}

// TestDial: a Client made by redlock.Dial over goredis.Dial locks, and its Close closes the
// go-redis clients Dial made; a URL's password is used; a bad address is refused.
func TestDial(t *testing.T) { backendtest.Dial(t, goredis.Dial) }
