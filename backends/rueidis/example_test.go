package rueidis_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock"
	rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
	"github.com/redis/rueidis"
)

// One rueidis client per Redis master (or per Redis Cluster), each wrapped by New, makes the
// nodes of a redlock Client. Here a single in-process server (miniredis) stands in for
// Redis; it needs the three options below, which real servers do not.
func ExampleNew() {
	server, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer server.Close()

	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{server.Addr()},
		AlwaysRESP2:       true,
		DisableCache:      true,
		ForceSingleClient: true,
	})
	if err != nil {
		panic(err)
	}
	defer rc.Close()
	node := rlrueidis.New(rc)
	defer node.Close() // ends the node's subscriptions, if it made any

	client, err := redlock.New([]redlock.Node{node})
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
