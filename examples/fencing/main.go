// Command fencing shows why a lock's fencing token matters: a lock holder that pauses past
// its lease still believes it holds the lock, and only the resource can stop its late write.
//
// Worker A takes the lock "fencing-demo" (TTL 500ms, no extension) and writes to a store.
// A then pauses, as in a long GC pause, and its lease runs out. Worker B takes the lock and
// writes. A wakes up and writes again with its old token, and the store refuses it, because
// it has already accepted B's larger token. The store is package fence's guarded write
// (fence.Redis): one script, one round trip, and a TTL on every record it writes.
//
// The same story at a SQL database, with fence.SQL's Do refusing A's late write inside A's
// transaction, is examples/fencing/sql, over SQLite; contrib/fencesql's tests run the story
// on PostgreSQL too. Both are modules of their own, so that no SQL driver enters this
// module's go.mod:
//
//	cd examples/fencing/sql && go run .
//
// It runs with no Redis installed, over embedded in-process servers (miniredis), or over
// real servers (the store uses STORAGE_ADDR, by default the first of REDIS_ADDRS):
//
//	go run ./examples/fencing
//	REDIS_ADDRS=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 go run ./examples/fencing
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/examples/internal/exampleservers"
	"github.com/redis/go-redis/v9"
)

const lockName = "fencing-demo"

func main() {
	// Bound the whole demo, so that unreachable servers end it with an error, not a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fencing demo failed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	// The lock's Redis masters and the storage's Redis: REDIS_ADDRS and STORAGE_ADDR (by
	// default the first of REDIS_ADDRS; the store's key differs from the lock's keys), or
	// else 3 + 1 embedded servers.
	srv, err := exampleservers.Start(3, "STORAGE_ADDR")
	if err != nil {
		return err
	}
	defer srv.Stop()
	if srv.Embedded {
		fmt.Fprintln(out, "REDIS_ADDRS is not set: started 3 embedded Redis servers for the lock and 1 for the storage (miniredis)")
	}
	lockAddrs, storageAddr := srv.Lock, srv.Data

	var nodes []redlock.Node
	for _, addr := range lockAddrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, goredis.New(rdb))
	}
	srdb := redis.NewClient(&redis.Options{Addr: storageAddr, ContextTimeoutEnabled: true})
	defer srdb.Close()
	store := &Store{rdb: srdb, key: "fencing-demo:storage"}
	if err := srdb.Del(ctx, store.key).Err(); err != nil { // start from an empty store
		return fmt.Errorf("storage at %s: %w", storageAddr, err)
	}

	// Two clients stand for two processes. A short TTL and no extension make A's lease run
	// out during its pause.
	a, err := redlock.New(nodes, redlock.WithTTL(500*time.Millisecond))
	if err != nil {
		return err
	}
	b, err := redlock.New(nodes, redlock.WithTTL(500*time.Millisecond))
	if err != nil {
		return err
	}

	leaseA, err := a.Acquire(ctx, lockName)
	if err != nil {
		return fmt.Errorf("worker A could not acquire the lock: %w", err)
	}
	fmt.Fprintf(out, "A acquired the lock with token %d, valid for %v\n",
		leaseA.Token(), time.Until(leaseA.Until()).Round(time.Millisecond))
	if err := write(ctx, out, store, "A", leaseA.Token(), "written by A", true); err != nil {
		return err
	}

	// A checks that it still holds the lock before its next write: it does. Then it stops,
	// between the check and the write, for longer than its lease. No check can close that
	// gap; the token can.
	if err := leaseA.Err(); err != nil {
		return fmt.Errorf("worker A lost its lease too early: %w", err)
	}
	fmt.Fprintln(out, "A checks its lease (still held), and pauses before its next write (a long GC pause, say)")
	<-leaseA.Done()
	fmt.Fprintf(out, "While A is paused, its lease runs out (%v)\n", leaseA.Err())

	// B asks for the lock (a real B might have been waiting in Acquire all along), and gets it
	// once A's keys have expired on the nodes.
	leaseB, err := b.Acquire(ctx, lockName)
	if err != nil {
		return fmt.Errorf("worker B could not acquire the lock: %w", err)
	}
	defer leaseB.Release(ctx) // attempted even if ctx has ended
	fmt.Fprintf(out, "B acquired the lock with token %d\n", leaseB.Token())
	if err := write(ctx, out, store, "B", leaseB.Token(), "written by B", true); err != nil {
		return err
	}

	// A wakes up, still believing it holds the lock, and writes with its old token.
	fmt.Fprintln(out, "A wakes up and, not knowing it lost the lock, writes with its old token")
	if err := write(ctx, out, store, "A", leaseA.Token(), "written late by A", false); err != nil {
		return err
	}

	value, token, err := store.Read(ctx)
	if err != nil {
		return fmt.Errorf("read the store: %w", err)
	}
	if value != "written by B" || token != leaseB.Token() {
		return fmt.Errorf("the store holds %q with token %d, want B's write with token %d", value, token, leaseB.Token())
	}
	fmt.Fprintf(out, "A's late write was rejected: token %d < %d\n", leaseA.Token(), token)
	fmt.Fprintf(out, "The store holds %q with token %d: B's write survived\n", value, token)
	fmt.Fprintln(out, "The same check in a SQL transaction (fence.SQL): see examples/fencing/sql")
	return nil
}

// write has worker write value with token, and fails unless the store accepts the write
// exactly when want says it should.
func write(ctx context.Context, out io.Writer, store *Store, worker string, token uint64, value string, want bool) error {
	ok, err := store.Write(ctx, token, value)
	switch {
	case err != nil:
		return fmt.Errorf("worker %s's write: %w", worker, err)
	case ok && !want:
		return fmt.Errorf("the store accepted worker %s's write %q with the stale token %d", worker, value, token)
	case !ok && want:
		return fmt.Errorf("the store rejected worker %s's write %q with token %d", worker, value, token)
	case ok:
		fmt.Fprintf(out, "%s wrote %q with token %d: accepted\n", worker, value, token)
	}
	return nil
}
