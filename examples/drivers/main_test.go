package main

import "testing"

// TestRun takes the lock through every driver, over embedded servers.
func TestRun(t *testing.T) {
	t.Setenv("REDIS_ADDRS", "")
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
