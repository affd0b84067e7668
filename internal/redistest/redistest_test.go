package redistest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mustDo runs a command and fails the test unless it returns want.
func mustDo(t *testing.T, s *Server, want any, args ...string) {
	t.Helper()
	got, err := s.Do(args...)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%q = (%#v, %v), want (%#v, nil)", args, got, err, want)
	}
}

// infoField returns a field of the server's INFO server section.
func infoField(t *testing.T, s *Server, field string) string {
	t.Helper()
	info, err := s.Do("INFO", "server")
	if err != nil {
		t.Fatalf("INFO server: %v", err)
	}
	for _, line := range strings.Split(info.(string), "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO server has no %q field", field)
	return ""
}

func isTimeout(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}

func TestStartDo(t *testing.T) {
	s := Start(t)
	if s.Addr() != net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port())) {
		t.Fatalf("Addr() = %q, Port() = %d", s.Addr(), s.Port())
	}
	if !s.Running() {
		t.Fatal("Running() = false after Start")
	}
	mustDo(t, s, "PONG", "PING")
	mustDo(t, s, "OK", "SET", "k", "v with spaces\r\n")
	mustDo(t, s, "v with spaces\r\n", "GET", "k")
	mustDo(t, s, nil, "GET", "missing")
	mustDo(t, s, "", "ECHO", "")
	mustDo(t, s, int64(1), "EXISTS", "k")
	mustDo(t, s, int64(-1), "PTTL", "k")
	mustDo(t, s, []any{"k"}, "KEYS", "*")
	mustDo(t, s, []any{"v with spaces\r\n", nil}, "MGET", "k", "missing")
	mustDo(t, s, []any{"save", ""}, "CONFIG", "GET", "save")
	mustDo(t, s, []any{"appendonly", "no"}, "CONFIG", "GET", "appendonly")
	mustDo(t, s, "OK", "DEBUG", "SLEEP", "0")

	if _, err := s.Do("NOSUCHCOMMAND"); err == nil || !strings.HasPrefix(err.Error(), "ERR unknown command") {
		t.Fatalf("NOSUCHCOMMAND error = %v, want ERR unknown command", err)
	}
	mustDo(t, s, int64(1), "LPUSH", "list", "x")
	if _, err := s.Do("GET", "list"); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatalf("GET list error = %v, want WRONGTYPE", err)
	}
}

func TestExtraArgs(t *testing.T) {
	s := Start(t, "--maxmemory", "10mb")
	mustDo(t, s, []any{"maxmemory", "10485760"}, "CONFIG", "GET", "maxmemory")
	s.Restart()
	mustDo(t, s, []any{"maxmemory", "10485760"}, "CONFIG", "GET", "maxmemory")
}

func TestKill(t *testing.T) {
	s := Start(t)
	s.Kill()
	if s.Running() {
		t.Fatal("Running() = true after Kill")
	}
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("PING succeeded after Kill")
	}
	s.Kill() // idempotent
	s.Pause()
	s.Resume()
}

func TestRestart(t *testing.T) {
	s := Start(t)
	port := s.Port()
	mustDo(t, s, "OK", "SET", "k", "v")
	time.Sleep(1100 * time.Millisecond) // let uptime reach 1 s so a reset shows
	s.Restart()
	if s.Port() != port || !s.Running() {
		t.Fatalf("after Restart: Port() = %d (was %d), Running() = %v", s.Port(), port, s.Running())
	}
	mustDo(t, s, "PONG", "PING")
	mustDo(t, s, nil, "GET", "k")
	if up := infoField(t, s, "uptime_in_seconds"); up != "0" && up != "1" {
		t.Fatalf("uptime_in_seconds = %s after Restart, want 0 or 1", up)
	}

	s.Kill()
	s.Restart() // from the killed state
	mustDo(t, s, "PONG", "PING")
}

func TestPauseResume(t *testing.T) {
	s := Start(t)
	s.Pause()
	if !s.Running() {
		t.Fatal("Running() = false while paused")
	}
	if got, err := s.doTimeout(200*time.Millisecond, "PING"); !isTimeout(err) {
		t.Fatalf("PING while paused = (%v, %v), want timeout", got, err)
	}
	s.Resume()
	mustDo(t, s, "PONG", "PING")

	s.Pause()
	s.Restart() // kills the paused process
	mustDo(t, s, "PONG", "PING")
}

func TestHung(t *testing.T) {
	addr := Hung(t)
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("Read = (%d, %v), want timeout", n, err)
	}
}

func TestStartN(t *testing.T) {
	servers := StartN(t, 3)
	if len(servers) != 3 {
		t.Fatalf("StartN(3) returned %d servers", len(servers))
	}
	ports := map[int]bool{}
	for _, s := range servers {
		ports[s.Port()] = true
		mustDo(t, s, "PONG", "PING")
	}
	if len(ports) != 3 {
		t.Fatalf("StartN(3) ports not distinct: %v", ports)
	}
}

func TestCleanup(t *testing.T) {
	var pids []int
	var hungAddr string
	var client net.Conn // left open so Hung's cleanup must close its side
	t.Run("sub", func(t *testing.T) {
		running, paused, killed := Start(t), Start(t), Start(t)
		paused.Pause()
		killed.Kill()
		pids = []int{running.pid(), paused.pid()}
		hungAddr = Hung(t)
		var err error
		if client, err = net.Dial("tcp", hungAddr); err != nil {
			t.Fatal(err)
		}
	})
	if client != nil {
		defer client.Close()
	}
	for _, pid := range pids {
		if pid == 0 {
			t.Fatal("pid() = 0 for a running server")
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after cleanup (kill -0: %v)", pid, err)
		}
	}
	if conn, err := net.DialTimeout("tcp", hungAddr, time.Second); err == nil {
		conn.Close()
		t.Errorf("Hung listener %s still accepts after cleanup", hungAddr)
	}
}

func TestReadReplyErrorInArray(t *testing.T) {
	s := Start(t)
	// Each Do uses a fresh connection, so MULTI/EXEC cannot be used;
	// EVAL returns an array holding an error reply instead.
	got, err := s.Do("EVAL", "return {1, redis.error_reply('boom')}", "0")
	if err != nil {
		t.Fatal(err)
	}
	arr, ok := got.([]any)
	if !ok || len(arr) != 2 || arr[0] != int64(1) {
		t.Fatalf("EVAL = %#v", got)
	}
	if e, ok := arr[1].(error); !ok || !strings.HasSuffix(e.Error(), "boom") {
		t.Fatalf("EVAL element 1 = %#v, want error ending in boom", arr[1])
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the message instead of
// stopping the test.
type fatalRecorder struct {
	*testing.T
	msg string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
}

func TestStartFailureReportsLog(t *testing.T) {
	r := &fatalRecorder{T: t}
	if s := Start(r, "--no-such-option", "1"); s != nil {
		t.Fatalf("Start with a bad option returned %v", s)
	}
	if !strings.Contains(r.msg, "exited during startup") || !strings.Contains(r.msg, "no-such-option") {
		t.Fatalf("Fatalf message lacks exit reason or log tail:\n%s", r.msg)
	}
}

// TestServerDiesWithItsProcess: a test process that dies before its cleanups run (a crash,
// os.Exit, a kill) leaves no redis-server behind, on Linux.
func TestServerDiesWithItsProcess(t *testing.T) {
	if os.Getenv("REDISTEST_DIE") == "1" { // the child: start a server, say its pid, die
		s := Start(t)
		fmt.Printf("pid %d\n", s.pid())
		os.Exit(3)
	}
	if runtime.GOOS != "linux" {
		t.Skip("only Linux ties a child's life to its parent's")
	}
	if !Available() {
		t.Skip("redis-server not found: " + installHint)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithItsProcess$")
	cmd.Env = append(os.Environ(), "REDISTEST_DIE=1")
	out, _ := cmd.Output() // it exits with status 3
	var pid int
	if _, err := fmt.Sscanf(string(out), "pid %d", &pid); err != nil || pid <= 0 {
		t.Fatalf("the child said %q, want its server's pid", out)
	}
	gone := func() bool {
		if syscall.Kill(pid, 0) != nil {
			return true
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		// A killed orphan may wait as a zombie for init to reap it: it runs no more.
		_, after, _ := strings.Cut(string(stat), ") ")
		return strings.HasPrefix(after, "Z")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !gone() {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("redis-server (pid %d) outlived the test process that started it", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
