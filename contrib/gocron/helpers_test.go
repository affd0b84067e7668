package redlockgocron_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/redis/go-redis/v9"
)

// redisServers starts n redis-server processes on free 127.0.0.1 ports, without
// persistence, and returns their addresses; t.Cleanup kills each by its PID. It skips the
// test if redis-server is not installed.
func redisServers(t *testing.T, n int) []string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (apt-get install -y redis-server): this test needs real Redis servers")
	}
	addrs := make([]string, 0, n)
	for range n {
		addrs = append(addrs, startRedis(t, bin))
	}
	return addrs
}

// startRedis starts one redis-server and waits until it answers PING, trying fresh ports
// if one was taken in between.
func startRedis(t *testing.T, bin string) string {
	t.Helper()
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", dir+"/redis.log")
		cmd.SysProcAttr = childAttr()
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		pid := cmd.Process.Pid
		t.Cleanup(func() {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
			<-exited
		})
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = waitPing(addr, exited); lastErr == nil {
			return addr
		}
		log, _ := os.ReadFile(dir + "/redis.log")
		lastErr = fmt.Errorf("%w; log:\n%s", lastErr, log)
	}
	t.Fatalf("redis-server did not start: %v", lastErr)
	return ""
}

// waitPing waits up to 10 s for the server at addr to answer PING.
func waitPing(addr string, exited <-chan struct{}) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("redis-server exited during startup")
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// miniRedis starts an embedded Redis (miniredis) and returns its address.
func miniRedis(t *testing.T) (*miniredis.Miniredis, string) {
	t.Helper()
	srv := miniredis.NewMiniRedis()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, srv.Addr()
}

// newClient returns a redlock Client of its own over addrs, as another process would
// have: its own go-redis clients. The restart guard is off, as the test's servers are
// fresh (they would abstain for 30 s otherwise) and nothing restarts them.
func newClient(t *testing.T, addrs []string, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	nodes := make([]redlock.Node, 0, len(addrs))
	for _, addr := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		nodes = append(nodes, goredis.New(rdb))
	}
	client, err := redlock.New(nodes, append([]redlock.Option{redlock.WithRestartGuard(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// flushAll deletes every key of the servers at addrs, behind the locks' backs.
func flushAll(t *testing.T, addrs []string) {
	t.Helper()
	for _, addr := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		err := rdb.FlushAll(context.Background()).Err()
		_ = rdb.Close()
		if err != nil {
			t.Fatalf("FLUSHALL %s: %v", addr, err)
		}
	}
}

// eventually polls cond every 10 ms until it holds, and fails the test after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFor waits for ch to yield, and fails the test after timeout.
func waitFor[T any](t *testing.T, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("after %v: %s", timeout, what)
		var zero T
		return zero
	}
}
