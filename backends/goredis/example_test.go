package goredis_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/redis/go-redis/v9"
)

// One go-redis client per Redis master, each wrapped by New, makes the nodes of a
// redlock Client. Here a single in-process server (miniredis) stands in for Redis.
func ExampleNew() {
	server, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer server.Close()

	rdb := redis.NewClient(&redis.Options{Addr: server.Addr()})
	defer rdb.Close()

	client, err := redlock.New([]redlock.Node{goredis.New(rdb)})
	if err != nil {
		panic(err)
	}

	ctx := context.Background()
	lease, err := client.TryAcquire(ctx, "reports")
	if err != nil {
		panic(err)
	}
	fmt.Println("acquired", lease.Name())

	_, err = client.TryAcquire(ctx, "reports")
	fmt.Println("second attempt refused:", errors.Is(err, redlock.ErrHeld))

	if err := lease.Release(ctx); err != nil {
		panic(err)
	}
	fmt.Println("released")
	// Output:
	// acquired reports
	// second attempt refused: true
	// released
}

// A Client from the addresses of three Redis masters, one call: Dial makes each master's
// client, with the options redlock needs, and the Client closes them. Here three in-process
// servers (miniredis) stand in for the masters.
func ExampleDial() {
	var addrs []string
	for range 3 {
		server, err := miniredis.Run()
		if err != nil {
			panic(err)
		}
		defer server.Close()
		addrs = append(addrs, server.Addr())
	}

	client, err := redlock.Dial(addrs, goredis.Dial)
	if err != nil {
		panic(err)
	}
	defer client.Close() // releases its locks and closes the clients Dial made

	mu := client.NewMutex("reports")
	mu.Lock()
	fmt.Println("locked")
	mu.Unlock()
	fmt.Println("unlocked")
	// Output:
	// locked
	// unlocked
}
