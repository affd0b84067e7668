package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// StartSentinel starts the server binary (see Binary) in sentinel mode on a free 127.0.0.1 port, watching
// the master at master (host:port) under the name "mymaster" with a quorum of 1, and
// returns its address once it names that master. It stops the sentinel by PID when the
// test ends, and skips the test if the server binary is not installed.
func StartSentinel(t testing.TB, master string) string {
	t.Helper()
	if !Available() {
		t.Skip(missing())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: sentinel port: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	host, masterPort, err := net.SplitHostPort(master)
	if err != nil {
		t.Fatalf("redistest: sentinel of %q: %v", master, err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf") // sentinel mode needs a file it can rewrite
	text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster %s %s 1\n", port, dir, host, masterPort)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatalf("redistest: sentinel config: %v", err)
	}
	logPath := filepath.Join(dir, "sentinel.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("redistest: sentinel log: %v", err)
	}
	defer logFile.Close()
	cmd := exec.Command(Binary(), conf, "--sentinel")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("redistest: start sentinel: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	addr := fmt.Sprintf("127.0.0.1:%d", port)
	want := []any{host, masterPort}
	for deadline := time.Now().Add(startTimeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got, err := DoTimeout(addr, time.Second, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")
		if err == nil && fmt.Sprint(got) == fmt.Sprint(want) {
			return addr
		}
	}
	t.Fatalf("redistest: the sentinel at %s did not name master %s within %v\n--- tail of %s ---\n%s", addr, master, startTimeout, logPath, logTail(logPath))
	return ""
}
