package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// server is one redis-server process on 127.0.0.1, started by this program and stopped by
// its PID (never by name).
type server struct {
	port   int
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

func (s *server) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// servers is every server this program started; stopAll kills them by PID.
var (
	serversMu sync.Mutex
	started   []*server
)

// startServers starts n redis-server processes in parallel on free loopback ports, without
// persistence, and waits until each answers PING with its own PID.
func startServers(n int) ([]*server, error) {
	out := make([]*server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = startServer()
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func startServer() (*server, error) {
	dir, err := os.MkdirTemp("", "redlock-bench-")
	if err != nil {
		return nil, err
	}
	var last error
	for range 5 { // a port taken between freePort and the bind: try another
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &server{port: port, dir: dir, exited: make(chan struct{})}
		if last = s.launch(); last == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, last
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (s *server) launch() error {
	log, err := os.Create(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	s.cmd = exec.Command("redis-server",
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no")
	s.cmd.Dir, s.cmd.Stdout, s.cmd.Stderr = s.dir, log, log
	s.cmd.SysProcAttr = childAttr() // dies with this process where the OS allows (Linux)
	serversMu.Lock()
	err = s.cmd.Start()
	if err == nil {
		started = append(started, s)
	}
	serversMu.Unlock()
	if err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	if err := s.awaitReady(10 * time.Second); err != nil {
		s.kill()
		return fmt.Errorf("redis-server on port %d: %w", s.port, err)
	}
	return nil
}

// awaitReady polls until the server answers INFO server with its own process_id, which
// rules out another process on the same port.
func (s *server) awaitReady(timeout time.Duration) error {
	want := "process_id:" + strconv.Itoa(s.cmd.Process.Pid) + "\r\n"
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return errors.New("exited during startup (port taken?)")
		default:
		}
		if info, err := rawCommand(s.addr(), "INFO", "server"); err == nil && strings.Contains(info, want) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("did not answer within %v", timeout)
}

// kill stops the server by PID with SIGKILL and reaps it.
func (s *server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
	}
	os.RemoveAll(s.dir)
}

// stopAll kills every server this program started. It is safe to call more than once and
// from any goroutine.
func stopAll() {
	serversMu.Lock()
	list := started
	started = nil
	serversMu.Unlock()
	for _, s := range list {
		s.kill()
	}
}

// rawCommand sends one command in RESP and returns the reply as text (bulk string, simple
// string or error). It is used only to check readiness, without any driver.
func rawCommand(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case strings.HasPrefix(line, "-"):
		return "", errors.New(line[1:])
	}
	return line[1:], nil
}

// commandCalls returns, summed over addrs, how many times each command ran (INFO
// commandstats: cmdstat_<name>:calls=N), commands run by scripts included, and under
// usecPrefix+name the server's time in them in µs (a script's includes its commands').
func commandCalls(addrs []string) map[string]int64 {
	out := map[string]int64{}
	for _, a := range addrs {
		info, err := rawCommand(a, "INFO", "commandstats")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
			if !ok || !strings.HasPrefix(name, "cmdstat_") {
				continue
			}
			calls, rest, _ := strings.Cut(rest, ",usec=")
			n, _ := strconv.ParseInt(calls, 10, 64)
			out[strings.TrimPrefix(name, "cmdstat_")] += n
			usec, _, _ := strings.Cut(rest, ",")
			u, _ := strconv.ParseInt(usec, 10, 64)
			out[usecPrefix+strings.TrimPrefix(name, "cmdstat_")] += u
		}
	}
	return out
}

const usecPrefix = "usec:"

// callsDelta returns after - before, without the INFO calls themselves.
func callsDelta(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		if k == "info" {
			continue
		}
		if v -= before[k]; v != 0 {
			d[k] = v
		}
	}
	return d
}
