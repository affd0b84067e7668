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
