// Command custombackend takes a lock through a redlock backend written from scratch (see
// node.go): a core.Node over plain TCP connections that speak RESP, with no Redis driver at
// all. main_test.go proves it with the shared conformance suite:
//
//	conformance.Run(t, conformance.Harness{
//		NewNode: func(t testing.TB, addr string) core.Node {
//			n := NewNode(addr)
//			t.Cleanup(n.Close)
//			return n
//		},
//	})
//
// It runs with no Redis installed, over 3 embedded in-process servers (miniredis), or over
// real servers:
//
//	go run ./examples/custombackend
//	go test ./examples/custombackend   # the conformance suite
//	REDIS_ADDRS=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 go run ./examples/custombackend
//
// Node has no Redis Cluster client: it does not follow MOVED redirections, so it reaches a
// Redis Cluster only if one master serves all 16384 slots, and its conformance run has no
// Harness.NewClusterNode (the suite's "redis-cluster" subtest skips, saying so). For a
// cluster of several masters, use the go-redis or rueidis backend with that driver's
// cluster client.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/examples/internal/exampleservers"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "custombackend failed:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	srv, err := exampleservers.Start(3, "")
	if err != nil {
		return err
	}
	defer srv.Stop()
	if srv.Embedded {
		fmt.Println("REDIS_ADDRS is not set: started 3 embedded Redis servers (miniredis)")
	}

	// One Node of the custom backend per Redis master: redlock takes any core.Node.
	var nodes []redlock.Node
	for _, addr := range srv.Lock {
		n := NewNode(addr)
		defer n.Close()
		nodes = append(nodes, n)
	}
	client, err := redlock.New(nodes, redlock.WithTTL(10*time.Second))
	if err != nil {
		return err
	}

	lease, err := client.Acquire(ctx, "custombackend")
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	fmt.Printf("acquired %q over %d nodes through the custom backend: fencing token %d\n",
		lease.Name(), len(nodes), lease.Token())
	if err := lease.Release(ctx); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	fmt.Println("released it")
	return nil
}
