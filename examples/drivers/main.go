// Command drivers takes the same lock through each of the four Redis drivers redlock
// supports: go-redis, redigo, rueidis and valkey-go. Only the line that wraps a driver's client as a
// redlock.Node differs; the lock, its keys and its fencing counter are the same, so the
// tokens keep increasing from one driver to the next.
//
// It runs with no Redis installed, over 3 embedded in-process servers (miniredis), or over
// real servers:
//
//	go run ./examples/drivers
//	REDIS_ADDRS=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 go run ./examples/drivers
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/backends/redigo"
	rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
	rlvalkey "github.com/go-redlock/redlock/backends/valkey"
	"github.com/go-redlock/redlock/examples/internal/exampleservers"
	redigolib "github.com/gomodule/redigo/redis"
	goredislib "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"
)

// A driver turns one server address into a redlock Node, and says how to close it.
type driver struct {
	name string
	node func(addr string) (redlock.Node, func(), error)
}

var drivers = []driver{
	{"go-redis", func(addr string) (redlock.Node, func(), error) {
		rdb := goredislib.NewClient(&goredislib.Options{Addr: addr, ContextTimeoutEnabled: true})
		node := goredis.New(rdb)
		return node, func() { node.Close(); rdb.Close() }, nil
	}},
	{"redigo", func(addr string) (redlock.Node, func(), error) {
		pool := &redigolib.Pool{MaxIdle: 4, DialContext: func(ctx context.Context) (redigolib.Conn, error) {
			return redigolib.DialContext(ctx, "tcp", addr)
		}}
		node := redigo.New(pool, addr)
		return node, func() { node.Close(); pool.Close() }, nil
	}},
	{"rueidis", func(addr string) (redlock.Node, func(), error) {
		// One standalone master per address. miniredis needs all three options; real servers none.
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, AlwaysRESP2: true, DisableCache: true, ForceSingleClient: true})
		if err != nil {
			return nil, nil, err
		}
		node := rlrueidis.New(rc)
		return node, func() { node.Close(); rc.Close() }, nil
	}},
	{"valkey-go", func(addr string) (redlock.Node, func(), error) {
		// valkey-go is a fork of rueidis, with the same options.
		vc, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, AlwaysRESP2: true, DisableCache: true, ForceSingleClient: true})
		if err != nil {
			return nil, nil, err
		}
		node := rlvalkey.New(vc)
		return node, func() { node.Close(); vc.Close() }, nil
	}},
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "drivers failed:", err)
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
	for _, d := range drivers {
		if err := lockWith(ctx, d, srv.Lock); err != nil {
			return fmt.Errorf("%s: %w", d.name, err)
		}
	}
	return nil
}

// lockWith takes and releases the lock "drivers-demo" over addrs through driver d.
func lockWith(ctx context.Context, d driver, addrs []string) error {
	var nodes []redlock.Node
	for _, addr := range addrs {
		node, closeNode, err := d.node(addr)
		if err != nil {
			return err
		}
		defer closeNode()
		nodes = append(nodes, node)
	}
	// A generous node timeout, for a demo that may run on a busy machine (the default is
	// 100ms; a node slower than it counts as failed).
	client, err := redlock.New(nodes, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		return err
	}
	// Acquire retries until it holds the lock (a new client's first calls can miss the node
	// timeout while its connections are made), within ctx.
	lease, err := client.Acquire(ctx, "drivers-demo")
	if err != nil {
		return err
	}
	fmt.Printf("%-9s acquired %q with fencing token %d\n", d.name, lease.Name(), lease.Token())
	return lease.Release(ctx)
}
