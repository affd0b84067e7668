package rueidis_test

import (
	"context"
	"errors"
	"fmt"
	"net"

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

// A Client from the addresses of three masters, one call: Dial makes a Lazy for each, whose
// client has the options redlock needs and is made on first use, so that the Client can be
// made while the servers are down (here, addresses where nothing listens); Client.Close
// closes them.
func ExampleDial() {
	var addrs []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		addrs = append(addrs, ln.Addr().String())
		ln.Close() // nothing listens there now
	}

	client, err := redlock.Dial(addrs, rlrueidis.Dial)
	if err != nil {
		panic(err)
	}
	defer client.Close() // releases its locks and closes the clients Dial's nodes made

	_, err = client.TryAcquire(context.Background(), "reports")
	fmt.Println("no quorum while the servers are down:", errors.Is(err, redlock.ErrNoQuorum))
	// Output: no quorum while the servers are down: true
}
