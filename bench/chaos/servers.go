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
	"syscall"
	"time"
)

// serverBinary returns the server binary to run: the environment variable
// REDLOCK_TEST_SERVER if set (valkey-server, say), as for the main module's tests
// (internal/redistest), and redis-server otherwise.
func serverBinary() string {
	if b := os.Getenv("REDLOCK_TEST_SERVER"); b != "" {
		return b
	}
	return "redis-server"
}

// server is one redis-server process on 127.0.0.1 without persistence, started by this
// program and signalled only by its PID (never by name). Unlike bench/servers.go, from
// which it is adapted, a server can be killed and started again on the same port (empty,
// as a crash without persistence leaves it), and stopped and continued (SIGSTOP/SIGCONT).
type server struct {
	port int
	dir  string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd exits
	began   time.Time     // when cmd was started (for the restart guard)
	stopped bool          // SIGSTOPped and not yet continued
}

func (s *server) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// all is every server this program started; stopAll kills them by PID.
var (
	serversMu sync.Mutex
	started   []*server
)

// startServers starts n servers in parallel on free loopback ports and waits until each
// answers with its own PID.
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
	dir, err := os.MkdirTemp("", "redlock-chaos-")
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir}
	serversMu.Lock()
	started = append(started, s)
	serversMu.Unlock()
	var last error
	for range 5 { // a port taken between freePort and the bind: try another
		if s.port, err = freePort(); err != nil {
			return nil, err
		}
		if last = s.start(); last == nil {
			return s, nil
		}
	}
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

// start launches redis-server on s.port and waits until it answers.
func (s *server) start() error {
	log, err := os.OpenFile(filepath.Join(s.dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(serverBinary(),
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no")
	cmd.Dir, cmd.Stdout, cmd.Stderr = s.dir, log, log
	cmd.SysProcAttr = childAttr() // dies with this process where the OS allows (Linux)
	exited := make(chan struct{})
	s.mu.Lock()
	err = cmd.Start()
	if err == nil {
		s.cmd, s.exited, s.began, s.stopped = cmd, exited, time.Now(), false
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("start %s: %w", serverBinary(), err)
	}
	go func() { _ = cmd.Wait(); close(exited) }()
	if err := s.awaitReady(cmd.Process.Pid, exited, 10*time.Second); err != nil {
		s.kill()
		return fmt.Errorf("%s on port %d: %w", serverBinary(), s.port, err)
	}
	return nil
}

// awaitReady polls until the server answers INFO server with its own process_id, which
// rules out another process on the same port.
func (s *server) awaitReady(pid int, exited chan struct{}, timeout time.Duration) error {
	want := "process_id:" + strconv.Itoa(pid) + "\r\n"
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited during startup (port taken?)")
		default:
		}
		if info, err := rawCommand(s.addr(), "INFO", "server"); err == nil && strings.Contains(info, want) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("did not answer within %v", timeout)
}

// running reports whether the server process is alive (stopped or not).
func (s *server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// upSince returns when the running process started, and false if none runs.
func (s *server) upSince() (time.Time, bool) {
	if !s.running() {
		return time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.began, true
}

// kill sends SIGKILL to the process by PID and reaps it. It keeps the data directory (a
// restart uses it; there is no data in it).
func (s *server) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.stopped = false
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Kill()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
	}
}

// signal sends SIGSTOP (stop true) or SIGCONT to the running process.
func (s *server) signal(stop bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil || s.stopped == stop {
		return
	}
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	if s.cmd.Process.Signal(sig) == nil {
		s.stopped = stop
	}
}

// stopAll kills every server this program started and removes their directories. It is
// safe to call more than once and from any goroutine.
func stopAll() {
	serversMu.Lock()
	list := started
	started = nil
	serversMu.Unlock()
	for _, s := range list {
		s.kill()
		os.RemoveAll(s.dir)
	}
}

// rawCommand sends one command in RESP and returns the reply as text (bulk string, simple
// string or error), without any driver.
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
