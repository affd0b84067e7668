// Command quickstart shows a Redlock lock over several Redis masters: one client takes it,
// a second is refused, then gets it once the first lets go.
//
// It runs with no Redis installed, over 5 embedded in-process servers (miniredis), or over
// real servers:
//
//	go run ./examples/quickstart
//	REDIS_ADDRS=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/redis/go-redis/v9"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart failed:", err)
		os.Exit(1)
	}
}

func run() error {
	// Bound the whole demo, so that unreachable servers end it with an error, not a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	// One address per independent Redis master.
	addrs, stop, err := servers()
	if err != nil {
		return err
	}
	defer stop()

	// One go-redis client per master, each wrapped as a redlock Node.
	var nodes []redlock.Node
	for _, addr := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, goredis.New(rdb))
	}

	// Two clients stand for two processes competing for one lock.
	a, err := redlock.New(nodes, redlock.WithTTL(10*time.Second))
	if err != nil {
		return err
	}
	b, err := redlock.New(nodes, redlock.WithTTL(10*time.Second))
	if err != nil {
		return err
	}
	fmt.Printf("Using %d Redis masters: %s\n", len(addrs), strings.Join(addrs, ", "))

	leaseA, err := a.Acquire(ctx, "quickstart")
	if err != nil {
		return fmt.Errorf("client A could not acquire the lock: %w", err)
	}
	fmt.Printf("A acquired %q: fencing token %d, valid for %v\n",
		leaseA.Name(), leaseA.Token(), time.Until(leaseA.Until()).Round(time.Millisecond))

	_, err = b.TryAcquire(ctx, "quickstart")
	if !errors.Is(err, redlock.ErrHeld) {
		return fmt.Errorf("client B's TryAcquire should have been refused with ErrHeld, got: %v", err)
	}
	fmt.Println("B tried to acquire it and was refused: the lock is held (redlock.ErrHeld)")

	if err := leaseA.Release(ctx); err != nil {
		return fmt.Errorf("client A could not release the lock: %w", err)
	}
	fmt.Println("A released the lock")

	leaseB, err := b.TryAcquire(ctx, "quickstart")
	if err != nil {
		return fmt.Errorf("client B could not acquire the free lock: %w", err)
	}
	if leaseB.Token() <= leaseA.Token() {
		return fmt.Errorf("client B's token %d is not larger than A's %d", leaseB.Token(), leaseA.Token())
	}
	fmt.Printf("B acquired it: fencing token %d, larger than A's %d\n", leaseB.Token(), leaseA.Token())

	if err := leaseB.Release(ctx); err != nil {
		return fmt.Errorf("client B could not release the lock: %w", err)
	}
	fmt.Println("B released the lock")

	return nil
}

// servers returns the addresses in REDIS_ADDRS, or else starts 5 embedded miniredis
// servers. stop shuts down whatever servers it started.
func servers() (addrs []string, stop func(), err error) {
	if env := os.Getenv("REDIS_ADDRS"); env != "" {
		for _, addr := range strings.Split(env, ",") {
			if addr = strings.TrimSpace(addr); addr != "" {
				addrs = append(addrs, addr)
			}
		}
		return addrs, func() {}, nil
	}
	var started []*miniredis.Miniredis
	stop = func() {
		for _, m := range started {
			m.Close()
		}
	}
	for range 5 {
		m, err := miniredis.Run()
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("start embedded Redis: %w", err)
		}
		started = append(started, m)
		addrs = append(addrs, m.Addr())
	}
	fmt.Println("REDIS_ADDRS is not set: started 5 embedded Redis servers (miniredis)")
	return addrs, stop, nil
}
