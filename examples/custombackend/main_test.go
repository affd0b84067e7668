package main

import (
	"testing"

	"github.com/go-redlock/redlock/conformance"
	"github.com/go-redlock/redlock/core"
)

// TestConformance proves Node with the shared suite, on miniredis and, when it is
// installed, on real redis-server processes.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewNode: func(t testing.TB, addr string) core.Node {
			n := NewNode(addr)
			t.Cleanup(n.Close)
			return n
		},
		// The Node is its own client: closing it closes its connections.
		CloseClient: func(_ testing.TB, n core.Node) { n.(*Node).Close() },
	})
}

// TestRun runs the example program over embedded servers.
func TestRun(t *testing.T) {
	t.Setenv("REDIS_ADDRS", "")
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
