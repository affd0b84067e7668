package goredis_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startSentinel starts a redis-server in sentinel mode on a free 127.0.0.1 port, watching
// the master at addr as "mymaster", and stops it by PID when the test ends.
func startSentinel(t *testing.T, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	dir := t.TempDir()
	host, masterPort, _ := net.SplitHostPort(addr)
	conf := filepath.Join(dir, "sentinel.conf")
	require.NoError(t, os.WriteFile(conf, fmt.Appendf(nil, "port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster %s %s 1\n", port, dir, host, masterPort), 0o600))
	cmd := exec.Command("redis-server", conf, "--sentinel")
	cmd.Stdout, cmd.Stderr = nil, nil
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sentinel := fmt.Sprintf("127.0.0.1:%d", port)
	c := redis.NewSentinelClient(&redis.Options{Addr: sentinel})
	defer c.Close()
	require.Eventually(t, func() bool {
		got, err := c.GetMasterAddrByName(context.Background(), "mymaster").Result()
		return err == nil && len(got) == 2 && got[0]+":"+got[1] == addr
	}, 10*time.Second, 20*time.Millisecond, "the sentinel does not name the master")
	return sentinel
}

// TestFailoverClient: a go-redis failover client (through Sentinel) is a Node: a lock is
// taken and released through it, and a waiter is handed the lock over its pub/sub.
func TestFailoverClient(t *testing.T) {
	master := redistest.StartN(t, 1)[0]
	sentinel := startSentinel(t, master.Addr())
	client := func() *redlock.Client {
		fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{sentinel}, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = fc.Close() })
		n := goredis.New(fc)
		t.Cleanup(func() { _ = n.Close() })
		c, err := redlock.New([]redlock.Node{n}, redlock.WithNodeTimeout(time.Second))
		require.NoError(t, err)
		return c
	}
	a, b := client(), client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := a.Acquire(ctx, "failover")
	require.NoError(t, err)
	assert.Positive(t, l.Token())

	got := make(chan error, 1)
	go func() {
		m := b.NewMutex("failover")
		err := m.LockContext(ctx)
		if err == nil {
			err = m.UnlockContext(ctx)
		}
		got <- err
	}()
	require.Eventually(t, func() bool {
		n, err := master.Do("ZCARD", "redlock:{failover}:queue")
		return err == nil && n == int64(1)
	}, 10*time.Second, time.Millisecond, "the waiter did not queue")
	require.NoError(t, l.Release(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not handed the lock")
	}
}
