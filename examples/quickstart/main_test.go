package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/go-redlock/redlock/internal/redistest"
)

// TestRun runs the demo over embedded servers, as `go run ./examples/quickstart` does.
func TestRun(t *testing.T) {
	t.Setenv("REDIS_ADDRS", "")
	var out bytes.Buffer
	if err := run(&out, &out); err != nil {
		t.Fatalf("%v\n%s", err, &out)
	}
	if !strings.Contains(out.String(), "B released the lock") {
		t.Fatalf("the demo did not run to its end:\n%s", &out)
	}
}

// TestRunOnFreshServers runs the demo over real servers that have just started: it says
// that the restart guard holds the first lock back, waits it out (30 s), and succeeds.
func TestRunOnFreshServers(t *testing.T) {
	servers := redistest.StartN(t, 3)
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	t.Setenv("REDIS_ADDRS", strings.Join(addrs, ","))
	var out, logs bytes.Buffer
	start := time.Now()
	if err := run(&out, &logs); err != nil {
		t.Fatalf("%v\n%s%s", err, &out, &logs)
	}
	t.Logf("took %v:\n%s%s", time.Since(start).Round(time.Millisecond), &out, &logs)
	for _, want := range []string{"restart guard", "waiting for it to pass", "A acquired", "B released the lock"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	if !strings.Contains(logs.String(), "still waiting") {
		t.Errorf("the library did not say why the lock was slow to come:\n%s", &logs)
	}
}
