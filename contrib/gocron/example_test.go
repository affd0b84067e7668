package redlockgocron_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-co-op/gocron/v2"
	"github.com/redis/go-redis/v9"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	redlockgocron "github.com/go-redlock/redlock/contrib/gocron"
)

// exampleClient returns a redlock Client over an embedded Redis (miniredis), and a function
// that stops both; a program gives redlock.New one Node per Redis master.
func exampleClient() (*redlock.Client, func()) {
	srv := miniredis.NewMiniRedis()
	if err := srv.Start(); err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	client, err := redlock.New([]redlock.Node{goredis.New(rdb)})
	if err != nil {
		panic(err)
	}
	return client, func() { _ = client.Close(); _ = rdb.Close(); srv.Close() }
}

// Every process runs the same scheduler; the Locker lets one of them run each tick of the
// job, and ends the job's context if its lock is lost while it runs.
func Example() {
	client, stop := exampleClient()
	defer stop()

	// WithMinHold: keep each run's lock a while, so that a scheduler whose tick comes a
	// little later skips that tick instead of running it again.
	locker, err := redlockgocron.NewLocker(client, redlockgocron.WithMinHold(time.Second))
	if err != nil {
		panic(err)
	}
	defer locker.Close()
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	_, err = s.NewJob(
		gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		gocron.NewTask(locker.Job(func(ctx context.Context) error {
			defer close(done)
			// ctx ends if the lock is lost; the lease's token fences the job's writes.
			lease, _ := redlockgocron.LeaseFromContext(ctx)
			fmt.Println("report runs under the lock", lease.Name())
			return nil
		})),
		gocron.WithName("report"), // the same name in every process: it names the lock
	)
	if err != nil {
		panic(err)
	}
	s.Start()
	<-done
	_ = s.Shutdown()
	// Output: report runs under the lock gocron:report
}

// Only the scheduler whose candidate leads runs jobs; Close resigns, and another takes over.
func ExampleNewElector() {
	client, stop := exampleClient()
	defer stop()
	ctx := context.Background()

	elector, err := redlockgocron.NewElector(ctx, client, "scheduler", "host-a:8080")
	if err != nil {
		panic(err)
	}
	for elector.IsLeader(ctx) != nil { // a scheduler need not wait: gocron asks before each run
		time.Sleep(10 * time.Millisecond)
	}
	leader, _ := elector.Leader(ctx) // what every process reads
	fmt.Println("leader:", leader)

	s, err := gocron.NewScheduler(gocron.WithDistributedElector(elector))
	if err != nil {
		panic(err)
	}
	_ = s // add jobs, wrapped with elector.Job for their context to end with leadership
	_ = elector.Close()
	fmt.Println("after Close:", errors.Is(elector.IsLeader(ctx), redlockgocron.ErrNotLeader))
	// Output:
	// leader: host-a:8080
	// after Close: true
}
