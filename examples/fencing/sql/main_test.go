package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRun runs the demo over embedded servers: A's late write must be refused with
// fence.ErrStale and B's value must be the one in the table (run checks both, and fails
// otherwise).
func TestRun(t *testing.T) {
	t.Setenv("REDIS_ADDRS", "")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	for _, want := range []string{
		`B wrote "written by B"`,
		"A's late write was rejected",
		"the writer no longer holds the lock",
		`The table holds "written by B"`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), `A wrote "written late by A"`) {
		t.Errorf("A's late write was committed:\n%s", out.String())
	}
}
