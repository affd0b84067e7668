// Package redistest starts real redis-server processes on 127.0.0.1 for
// integration tests, alone or joined into a Redis Cluster (StartCluster).
// Servers run without persistence, are stopped by PID when the test
// finishes, and can be killed, restarted, paused and resumed to simulate
// failures.
//
// The environment variable REDLOCK_TEST_SERVER names the server binary to run instead of
// redis-server: REDLOCK_TEST_SERVER=valkey-server runs every server, cluster node and
// sentinel of the tests on Valkey (see Binary).
package redistest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	defaultBinary = "redis-server"
	binaryEnv     = "REDLOCK_TEST_SERVER" // names another server binary (see Binary)
	startTimeout  = 10 * time.Second      // to answer PING after a launch
	rebindTimeout = 3 * time.Second       // for Restart to re-bind its port
	startAttempts = 5                     // fresh ports tried by Start
	logTailBytes  = 2048                  // log excerpt in failure messages
	installHint   = "install it with `apt-get install -y redis-server` (or run `make test` / .ci/run, which installs it; valkey-server: `make test-valkey`)"
)

// errExited reports that the server exited before answering, typically
// because its port was taken.
var errExited = errors.New("the server exited during startup")

// Binary returns the server binary the package runs: the value of the environment variable
// REDLOCK_TEST_SERVER if it is set and not empty (valkey-server, say: a name on PATH or a
// path), and redis-server otherwise. Every Server, Cluster node and sentinel runs it.
func Binary() string {
	if b := os.Getenv(binaryEnv); b != "" {
		return b
	}
	return defaultBinary
}

// missing is the message of a test skipped because Binary is not installed.
func missing() string {
	return "redistest: " + Binary() + " not found on PATH; " + installHint
}

// Server is one redis-server process listening on 127.0.0.1.
// Its methods are safe for concurrent use.
type Server struct {
	t       testing.TB
	port    int
	busPort int // the Redis Cluster bus port of a cluster node; 0 for a plain server
	// reserved are the lock files that reserve port and busPort (see reservePort), closed
	// once the server is stopped for good.
	reserved []*os.File
	dir      string
	extra    []string

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil when not running
	exited chan struct{} // closed once cmd has exited and been reaped
}

// Available reports whether the server binary (see Binary) is installed.
func Available() bool {
	_, err := exec.LookPath(Binary())
	return err == nil
}

// Start starts one redis-server on a free 127.0.0.1 port with
// `--save "" --appendonly no` (plus extraArgs appended), waits until it
// answers PING (at most 10 s), and registers t.Cleanup to kill it by PID and
// remove its temporary directory. A failed start tries up to 5 fresh ports
// before calling t.Fatalf with the tail of the server log. If the server binary
// (see Binary) is not installed, Start calls t.Skip with installation instructions.
func Start(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	return StartN(t, 1, extraArgs...)[0]
}

// StartN starts n servers in parallel, each as described for Start, and
// returns them in a slice of length n. If any fails to start, StartN calls
// t.Fatalf after registering cleanup for those that did start.
func StartN(t testing.TB, n int, extraArgs ...string) []*Server {
	t.Helper()
	return startN(t, n, false, extraArgs)
}

// startN starts n servers in parallel, as StartN does; cluster makes each a Redis Cluster
// node (see StartCluster).
func startN(t testing.TB, n int, cluster bool, extraArgs []string) []*Server {
	t.Helper()
	if !Available() {
		t.Skip(missing())
	}
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[i], errs[i] = newServer(t, cluster, extraArgs)
		}()
	}
	wg.Wait()
	for _, s := range servers {
		if s != nil {
			t.Cleanup(s.cleanup)
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("redistest: start %s: %v", Binary(), err)
	}
	return servers
}

// newServer creates a temporary directory and launches a server in it,
// retrying on a fresh port when the server exits early. A cluster node gets a free
// cluster bus port too (the default, port+10000, may be taken or past 65535).
func newServer(t testing.TB, cluster bool, extra []string) (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	s := &Server{t: t, dir: dir, extra: extra}
	deadline := time.Now().Add(startTimeout)
	for attempt := 1; ; attempt++ {
		s.unreserve()
		if s.port, err = s.reserve(); err == nil && cluster {
			s.busPort, err = s.reserve()
		}
		if err == nil {
			err = s.launch(deadline)
		}
		if err == nil {
			return s, nil
		}
		if attempt == startAttempts || !errors.Is(err, errExited) {
			s.unreserve()
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// reserve reserves a port for s (see reservePort).
func (s *Server) reserve() (int, error) {
	port, f, err := reservePort()
	if f != nil {
		s.reserved = append(s.reserved, f)
	}
	return port, err
}

// unreserve frees the ports s reserved.
func (s *Server) unreserve() {
	for _, f := range s.reserved {
		f.Close()
	}
	s.reserved = nil
}

// Addr returns the server address, "127.0.0.1:PORT".
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Port returns the TCP port the server listens on. It never changes,
// including across Restart.
func (s *Server) Port() int { return s.port }

// Kill stops the process with SIGKILL and waits for it to exit. It is
// idempotent and works on a paused server.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
}

// Restart kills the process if it is still running, then starts a fresh one
// on the same port with the same arguments and waits until it answers PING.
// No data survives and uptime restarts at 0. Binding the port is retried
// for up to 3 s; on failure Restart calls t.Fatalf.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
	deadline := time.Now().Add(startTimeout)
	rebind := time.Now().Add(rebindTimeout)
	for {
		err := s.launch(deadline)
		if err == nil {
			return
		}
		if !errors.Is(err, errExited) || time.Now().After(rebind) {
			s.t.Fatalf("redistest: restart %s on %s: %v", Binary(), s.Addr(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Pause sends SIGSTOP: the server stops answering but keeps its socket
// open, so clients connect and then time out. It does nothing if the server
// is not running.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume sends SIGCONT to a paused server. It does nothing if the server is
// not running.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

// Running reports whether the process is up: started, not killed, and not
// exited on its own. A paused server counts as running.
func (s *Server) Running() bool {
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

// pid returns the process ID, or 0 if the server is not running.
func (s *Server) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// cleanup kills the server, frees its ports and removes its directory.
func (s *Server) cleanup() {
	s.Kill()
	s.mu.Lock()
	s.unreserve()
	s.mu.Unlock()
	os.RemoveAll(s.dir)
}

// launch starts redis-server and waits until it answers or deadline passes.
// The caller holds s.mu or has not yet shared s.
func (s *Server) launch(deadline time.Time) error {
	logPath := filepath.Join(s.dir, "redis.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child keeps its own descriptor
	cmd := exec.Command(Binary(), s.args()...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// It dies with the test process where the OS allows (Linux; strictly, with the thread
	// that starts it, which Go ends only when a goroutine locked to it exits).
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	if err := s.awaitReady(deadline); err != nil {
		s.kill()
		return fmt.Errorf("port %d: %w\n--- tail of %s ---\n%s", s.port, err, logPath, logTail(logPath))
	}
	return nil
}

// args returns the redis-server command line.
func (s *Server) args() []string {
	args := []string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no",
	}
	if version7() {
		args = append(args, "--enable-debug-command", "local")
	}
	if s.busPort != 0 {
		args = append(args, "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(s.busPort), "--cluster-announce-ip", "127.0.0.1",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"))
	}
	return append(args, s.extra...)
}

// version7 reports whether the server binary is version 7 or later (any valkey-server is),
// and so accepts --enable-debug-command, --cluster-port and CLUSTER ADDSLOTSRANGE.
func version7() bool {
	out, err := exec.Command(Binary(), "--version").Output()
	if err != nil {
		return false
	}
	_, version, _ := strings.Cut(string(out), " v=")
	major, _, _ := strings.Cut(version, ".")
	n, err := strconv.Atoi(major)
	return err == nil && n >= 7
}

// awaitReady polls until the server started by launch answers PING and
// INFO reports its PID, which rules out another process on the same port.
func (s *Server) awaitReady(deadline time.Time) error {
	pid := strconv.Itoa(s.cmd.Process.Pid)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("%w (%v)", errExited, s.cmd.ProcessState)
		default:
		}
		if pong, err := s.doTimeout(time.Second, "PING"); err == nil && pong == "PONG" {
			info, _ := s.doTimeout(time.Second, "INFO", "server")
			if str, _ := info.(string); strings.Contains(str, "\nprocess_id:"+pid+"\r\n") {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer PING within %v", Binary(), startTimeout)
}

// kill sends SIGKILL and reaps the process. The caller holds s.mu.
func (s *Server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill() // fails only if it already exited
	<-s.exited
	s.cmd, s.exited = nil, nil
}

// signal sends sig to the process if it is running.
func (s *Server) signal(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// logTail returns the end of the log file at path.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > logTailBytes {
		b = b[len(b)-logTailBytes:]
	}
	return string(b)
}

// ReservePort returns a 127.0.0.1 port for a server the test starts itself (a miniredis it
// closes and starts again on the same address, say), reserved as a Server's port is (see
// reservePort) until the test ends. t.Fatalf if none is free.
func ReservePort(t testing.TB) int {
	t.Helper()
	port, f, err := reservePort()
	if err != nil {
		t.Fatalf("redistest: reserve a port: %v", err)
	}
	if f != nil {
		t.Cleanup(func() { f.Close() })
	}
	return port
}
