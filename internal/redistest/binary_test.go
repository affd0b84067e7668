package redistest

import (
	"os/exec"
	"strings"
	"testing"
)

// serverName returns the server_name field of addr's INFO server section ("valkey" on
// Valkey), or "redis" if it has none (redis-server 7.0 reports none).
func serverName(t *testing.T, addr string) string {
	t.Helper()
	info, err := DoTimeout(addr, doDefaultTimeout, "INFO", "server")
	if err != nil {
		t.Fatalf("INFO server of %s: %v", addr, err)
	}
	for _, line := range strings.Split(info.(string), "\r\n") {
		if v, ok := strings.CutPrefix(line, "server_name:"); ok {
			return v
		}
	}
	return "redis"
}

// TestBinaryFromEnvironment: REDLOCK_TEST_SERVER=valkey-server makes Start, StartCluster
// and StartSentinel run valkey-server, and redis-server is the default.
func TestBinaryFromEnvironment(t *testing.T) {
	for _, tc := range []struct{ env, binary, name string }{
		{"valkey-server", "valkey-server", "valkey"},
		{"", "redis-server", "redis"},
	} {
		t.Run(tc.binary, func(t *testing.T) {
			t.Setenv(binaryEnv, tc.env)
			if got := Binary(); got != tc.binary {
				t.Fatalf("Binary() = %q with %s=%q, want %q", got, binaryEnv, tc.env, tc.binary)
			}
			if _, err := exec.LookPath(tc.binary); err != nil {
				t.Skipf("%s is not installed", tc.binary)
			}
			s := Start(t)
			if got := serverName(t, s.Addr()); got != tc.name {
				t.Errorf("Start ran a %q server, want %q", got, tc.name)
			}
			c := StartCluster(t, 1)
			if got := serverName(t, c.Addrs()[0]); got != tc.name {
				t.Errorf("StartCluster ran a %q server, want %q", got, tc.name)
			}
			if got := serverName(t, StartSentinel(t, s.Addr())); got != tc.name {
				t.Errorf("StartSentinel ran a %q server, want %q", got, tc.name)
			}
		})
	}
}
