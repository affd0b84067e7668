package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/redis/go-redis/v9"
)

// exampleNodes starts n in-process Redis servers (miniredis) and returns a Node for each,
// and a function that stops them. In production each Node wraps a client of its own
// independent Redis master.
func exampleNodes(n int) ([]redlock.Node, func()) {
	var nodes []redlock.Node
	var stops []func()
	for range n {
		srv := miniredis.NewMiniRedis()
		if err := srv.Start(); err != nil {
			panic(err)
		}
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		_ = rdb.Ping(context.Background()).Err() // dialled, as a running program's client is
		nodes = append(nodes, goredis.New(rdb))
		stops = append(stops, func() { _ = rdb.Close(); srv.Close() })
	}
	return nodes, func() {
		for _, stop := range stops {
			stop()
		}
	}
}

func ExampleNew() {
	nodes, stop := exampleNodes(5)
	defer stop()

	client, err := redlock.New(nodes, redlock.WithTTL(30*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = client

	_, err = redlock.New(nil)
	fmt.Println(err)
	// Output: redlock: invalid argument: no nodes
}

func ExampleClient_Acquire() {
	nodes, stop := exampleNodes(3)
	defer stop()
	client, _ := redlock.New(nodes)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := client.Acquire(ctx, "reports:daily") // waits while someone else holds it
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	defer lease.Release(context.Background())

	// Pass lease.Token() with every write to the protected resource, which rejects tokens
	// older than the newest it has seen.
	fmt.Println("held:", lease.Name(), lease.Token() > 0, time.Until(lease.Until()) > 9*time.Second)
	// Output: held: reports:daily true true
}

func ExampleClient_TryAcquire() {
	nodes, stop := exampleNodes(3)
	defer stop()
	client, _ := redlock.New(nodes)
	ctx := context.Background()

	first, _ := client.TryAcquire(ctx, "cache:rebuild")
	_, err := client.TryAcquire(ctx, "cache:rebuild")
	fmt.Println("second owner refused:", errors.Is(err, redlock.ErrHeld))

	_ = first.Release(ctx)
	second, err := client.TryAcquire(ctx, "cache:rebuild")
	fmt.Println("after release:", err == nil, second.Token() > first.Token())
	_ = second.Release(ctx)
	// Output:
	// second owner refused: true
	// after release: true true
}

func ExampleLease_Extend() {
	nodes, stop := exampleNodes(3)
	defer stop()
	client, _ := redlock.New(nodes, redlock.WithTTL(2*time.Second))
	ctx := context.Background()

	lease, _ := client.TryAcquire(ctx, "migration")
	before := lease.Until()
	time.Sleep(10 * time.Millisecond)
	if err := lease.Extend(ctx); err != nil {
		fmt.Println("lost:", err) // errors.Is(err, redlock.ErrNotHeld): stop the work
		return
	}
	fmt.Println("extended:", lease.Until().After(before))
	_ = lease.Release(ctx)
	// Output: extended: true
}

func ExampleClient_NewMutex() {
	nodes, stop := exampleNodes(3)
	defer stop()
	client, _ := redlock.New(nodes)
	defer client.Close()

	// Every process that makes a Mutex of this name over these nodes shares one lock: here,
	// 4 goroutines of one process stand in for them.
	var mu sync.Locker = client.NewMutex("jobs:counter")
	counter := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				mu.Lock() // waits as long as it takes; the lock extends itself while held
				counter++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Println("counter:", counter)
	// Output: counter: 20
}

func ExampleMutex_TryLock() {
	nodes, stop := exampleNodes(3)
	defer stop()
	client, _ := redlock.New(nodes)
	defer client.Close()

	mu := client.NewMutex("cache:warm")
	other := client.NewMutex("cache:warm") // the same lock, as another process would make it
	mu.Lock()
	fmt.Println("other while held:", other.TryLock())
	mu.Unlock()
	fmt.Println("other after Unlock:", other.TryLock())
	other.Unlock()
	// Output:
	// other while held: false
	// other after Unlock: true
}

func ExampleClient_NewRWMutex() {
	nodes, stop := exampleNodes(3)
	defer stop()
	client, _ := redlock.New(nodes)
	defer client.Close()

	// Readers share the lock; a writer has it alone. Two RWMutexes of one name stand in
	// for two processes.
	config := client.NewRWMutex("config")
	other := client.NewRWMutex("config")
	config.RLock()
	other.RLock() // readers in other processes hold it too
	fmt.Println("writer while read:", other.TryLock())
	other.RUnlock()
	config.RUnlock()

	config.Lock() // alone now; the write holding carries a fencing token
	fmt.Println("reader while written:", other.TryRLock(), config.Token() > 0)
	config.Unlock()
	// Output:
	// writer while read: false
	// reader while written: false true
}

func ExampleClient_NewSemaphore() {
	nodes, stop := exampleNodes(3)
	defer stop()
	client, _ := redlock.New(nodes)
	defer client.Close()
	ctx := context.Background()

	// At most 2 holders at once, across every process that uses this name with 2 permits.
	pool := client.NewSemaphore("render-workers", 2)
	a, _ := pool.Acquire(ctx) // waits while both permits are held
	b, _ := pool.Acquire(ctx)
	_, err := pool.TryAcquire(ctx)
	fmt.Println("third holder refused:", errors.Is(err, redlock.ErrHeld))
	_ = a.Release(ctx) // a permit is a Lease, with a fencing token of its own
	c, err := pool.TryAcquire(ctx)
	fmt.Println("after a release:", err == nil)
	_ = b.Release(ctx)
	_ = c.Release(ctx)
	// Output:
	// third holder refused: true
	// after a release: true
}

func ExampleClient_NewElection() {
	nodes, stop := exampleNodes(3)
	defer stop()
	client, _ := redlock.New(nodes)
	defer client.Close()
	ctx := context.Background()

	election := client.NewElection("scheduler")
	_, err := election.Leader(ctx)
	fmt.Println("before:", errors.Is(err, redlock.ErrNoLeader))

	lease, _ := election.Campaign(ctx, "10.0.0.7:8080") // waits until this candidate leads
	leader, _ := election.Leader(ctx)                   // what any process reads
	fmt.Println("leader:", leader)
	// Lead until lease.Done() closes; lease.Token() fences the leader's writes.
	_ = lease.Release(ctx) // resign
	// Output:
	// before: true
	// leader: 10.0.0.7:8080
}

func ExampleClient_Do() {
	nodes, stop := exampleNodes(3)
	defer stop()
	client, _ := redlock.New(nodes)
	defer client.Close()
	ctx := context.Background()

	// Do waits for the lock, runs fn while the lease extends itself, and releases it.
	err := client.Do(ctx, "reports:weekly", func(ctx context.Context) error {
		// ctx ends if the lease does: then stop touching the shared resource.
		_, err := client.TryAcquire(ctx, "reports:weekly")
		fmt.Println("held during fn:", errors.Is(err, redlock.ErrHeld))
		return nil
	})
	fmt.Println("Do:", err)

	// fn's error is Do's error; the lock is released all the same.
	err = client.Do(ctx, "reports:weekly", func(ctx context.Context) error {
		return errors.New("report failed")
	})
	fmt.Println("Do:", err)
	lease, err := client.TryAcquire(ctx, "reports:weekly")
	fmt.Println("free afterwards:", err == nil)
	_ = lease.Release(ctx)
	// Output:
	// held during fn: true
	// Do: <nil>
	// Do: report failed
	// free afterwards: true
}

// Moving money between two accounts: every transfer locks both of its accounts at once, in
// one call, so two transfers in opposite directions never deadlock, and a transfer never
// holds one account while it waits for the other.
func ExampleClient_DoAll() {
	nodes, stop := exampleNodes(3)
	defer stop()
	client, _ := redlock.New(nodes)
	defer client.Close()
	ctx := context.Background()

	// balances stands in for a database that several processes update; mu only tells the
	// race detector what the lock ensures here.
	var mu sync.Mutex
	balances := map[string]int{"account:alice": 100, "account:bob": 50}
	transfer := func(from, to string, amount int) error {
		return client.DoAll(ctx, []string{from, to}, func(ctx context.Context) error {
			// Both accounts are held here, on a quorum of nodes, until fn returns.
			mu.Lock()
			defer mu.Unlock()
			if balances[from] < amount {
				return fmt.Errorf("%s: insufficient funds", from)
			}
			balances[from] -= amount
			balances[to] += amount
			return nil
		})
	}

	var wg sync.WaitGroup
	wg.Go(func() { _ = transfer("account:alice", "account:bob", 30) })
	wg.Go(func() { _ = transfer("account:bob", "account:alice", 20) })
	wg.Wait()
	fmt.Println(balances["account:alice"], balances["account:bob"])

	// While a transfer holds both accounts, a lock of either one is refused.
	lease, _ := client.TryAcquireAll(ctx, []string{"account:alice", "account:bob"})
	_, err := client.TryAcquire(ctx, "account:bob")
	fmt.Println("bob held:", errors.Is(err, redlock.ErrHeld))
	_ = lease.Release(ctx)

	fmt.Println(transfer("account:bob", "account:alice", 500))
	// Output:
	// 90 60
	// bob held: true
	// account:bob: insufficient funds
}

// A report that reads two accounts at once: it holds both for reading, together with other
// readers of either, while a transfer that writes either waits; so it never sees one
// account before a transfer and the other after it.
func ExampleClient_NewRWMutexAll() {
	nodes, stop := exampleNodes(3)
	defer stop()
	client, _ := redlock.New(nodes)
	defer client.Close()

	report := client.NewRWMutexAll([]string{"account:alice", "account:bob"})
	other := client.NewRWMutexAll([]string{"account:bob", "account:carol"})
	report.RLock()
	fmt.Println("another reader of bob:", other.TryRLock())
	fmt.Println("a writer of bob:", client.NewMutex("account:bob").TryLock())
	other.RUnlock()
	report.RUnlock()

	report.Lock() // both accounts alone now, under one fencing token
	fmt.Println("a reader of alice while written:", client.NewRWMutex("account:alice").TryRLock(), report.Token() > 0)
	report.Unlock()
	// Output:
	// another reader of bob: true
	// a writer of bob: false
	// a reader of alice while written: false true
}

func ExampleLease_HandOff() {
	nodes, stop := exampleNodes(3)
	defer stop()
	ctx := context.Background()

	// One process takes the lock and hands it to a worker...
	dispatcher, _ := redlock.New(nodes)
	lease, err := dispatcher.Acquire(ctx, "job:42")
	if err != nil {
		fmt.Println(err)
		return
	}
	handle, _ := lease.HandOff() // send it to the worker: whoever has it owns the lock
	_ = dispatcher.Close()       // the lock stays held

	// ...which takes it up, with the same fencing token, and releases it when done.
	worker, _ := redlock.New(nodes)
	defer worker.Close()
	taken, err := worker.TakeOver(ctx, handle, redlock.WithAutoExtend(true))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(taken.Name(), taken.Token() == lease.Token())
	fmt.Println(taken.Release(ctx))
	// Output:
	// job:42 true
	// <nil>
}
