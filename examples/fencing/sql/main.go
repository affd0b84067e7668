// Command sql is examples/fencing at a SQL database: a lock holder that pauses past its lease
// writes late, inside a transaction, and package fence's SQL check refuses it there.
//
// Worker A takes the lock "fencing-demo" (TTL 500ms, no extension) and writes a row of the
// table "records" in fence.SQL's Do, which records A's token in the table "fence_tokens" in
// the same transaction. A then pauses, as in a long GC pause, and its lease runs out. Worker
// B takes the lock and writes the row in Do, with its larger token. A wakes up and writes
// again in Do with its old token: Do's Check returns fence.ErrStale before A's statements
// run, and the transaction rolls back, so the row keeps B's write.
//
// The database is SQLite (modernc.org/sqlite, no cgo) in a temporary file. This directory is
// a module of its own, so that the SQL driver never enters the main module's go.mod. The
// lock runs over embedded in-process Redis servers (miniredis), or over real ones:
//
//	cd examples/fencing/sql && go run .
//	REDIS_ADDRS=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 go run .
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/examples/internal/exampleservers"
	"github.com/go-redlock/redlock/fence"
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
	// The lock's Redis masters: REDIS_ADDRS, or else 3 embedded servers.
	srv, err := exampleservers.Start(3, "")
	if err != nil {
		return err
	}
	defer srv.Stop()
	if srv.Embedded {
		fmt.Fprintln(out, "REDIS_ADDRS is not set: started 3 embedded Redis servers for the lock (miniredis)")
	}
	var nodes []redlock.Node
	for _, addr := range srv.Lock {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, goredis.New(rdb))
	}

	// The storage: a SQLite database in a temporary file. SQLite lets one writer in at a
	// time; with one connection, a second transaction waits for the first in database/sql.
	dir, err := os.MkdirTemp("", "fencing-sql-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tokens, err := fence.NewSQL(fence.SQLite, "fence_tokens")
	if err != nil {
		return err
	}
	if err := tokens.CreateTable(ctx, db); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE records (id INTEGER PRIMARY KEY, value TEXT NOT NULL)"); err != nil {
		return err
	}
	fmt.Fprintf(out, "Created the SQLite tables %s and records in %s\n", tokens.Table(), dir)

	// Two clients stand for two processes. A short TTL and no extension make A's lease run
	// out during its pause.
	a, err := redlock.New(nodes, redlock.WithTTL(500*time.Millisecond))
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := redlock.New(nodes, redlock.WithTTL(500*time.Millisecond))
	if err != nil {
		return err
	}
	defer b.Close()

	leaseA, err := a.Acquire(ctx, lockName)
	if err != nil {
		return fmt.Errorf("worker A could not acquire the lock: %w", err)
	}
	fmt.Fprintf(out, "A acquired the lock with token %d, valid for %v\n",
		leaseA.Token(), time.Until(leaseA.Until()).Round(time.Millisecond))
	if err := write(ctx, out, db, tokens, "A", leaseA.Token(), "written by A"); err != nil {
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

	// B asks for the lock, and gets it once A's keys have expired on the nodes.
	leaseB, err := b.Acquire(ctx, lockName)
	if err != nil {
		return fmt.Errorf("worker B could not acquire the lock: %w", err)
	}
	defer leaseB.Release(ctx) // attempted even if ctx has ended
	fmt.Fprintf(out, "B acquired the lock with token %d\n", leaseB.Token())
	if err := write(ctx, out, db, tokens, "B", leaseB.Token(), "written by B"); err != nil {
		return err
	}

	// A wakes up, still believing it holds the lock, and writes with its old token.
	fmt.Fprintln(out, "A wakes up and, not knowing it lost the lock, writes with its old token")
	err = write(ctx, out, db, tokens, "A", leaseA.Token(), "written late by A")
	if !errors.Is(err, fence.ErrStale) {
		return fmt.Errorf("worker A's late write: %v, want fence.ErrStale", err)
	}
	fmt.Fprintf(out, "A's late write was rejected, and its transaction rolled back: %v\n", err)

	var value string
	if err := db.QueryRowContext(ctx, "SELECT value FROM records WHERE id = 1").Scan(&value); err != nil {
		return fmt.Errorf("read the table: %w", err)
	}
	highest, err := tokens.Token(ctx, db, lockName)
	if err != nil {
		return err
	}
	if value != "written by B" || highest != leaseB.Token() {
		return fmt.Errorf("the table holds %q with token %d, want B's write with token %d", value, highest, leaseB.Token())
	}
	fmt.Fprintf(out, "The table holds %q with token %d: B's write survived\n", value, highest)
	return nil
}

// write has worker write value to the record in a transaction that commits only under
// token: fence.SQL's Do checks the token first, and runs the statement only if no larger
// token is recorded. It returns Do's error: one matching fence.ErrStale for a refused write.
func write(ctx context.Context, out io.Writer, db *sql.DB, tokens *fence.SQL, worker string, token uint64, value string) error {
	err := tokens.Do(ctx, db, lockName, token, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			"INSERT INTO records (id, value) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET value = excluded.value", value)
		return err
	})
	if err == nil {
		fmt.Fprintf(out, "%s wrote %q with token %d: committed\n", worker, value, token)
	}
	return err
}
