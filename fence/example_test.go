package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/fence"
)

// A paused holder's late write is refused by the guarded write: B wrote with a newer token.
func ExampleRedis() {
	m, _ := miniredis.Run() // a Redis of your own in production
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	// Records live a day after their last write: far longer than any holding of the lock.
	store, err := fence.NewRedis(goredis.New(rdb), 24*time.Hour)
	if err != nil {
		panic(err)
	}
	const tokenA, tokenB = 1795305105661725, 1795305105661901 // A's lease's Token(), then B's
	fmt.Println("A:", store.Write(ctx, "report:daily", tokenA, "A's report"))
	fmt.Println("B:", store.Write(ctx, "report:daily", tokenB, "B's report"))

	err = store.Write(ctx, "report:daily", tokenA, "A's late report") // A, back from a pause
	fmt.Println("A, late:", errors.Is(err, fence.ErrStale))
	fmt.Println(err)
	fmt.Println("stored:", rdb.HGet(ctx, "report:daily", "value").Val())
	// Output:
	// A: <nil>
	// B: <nil>
	// A, late: true
	// redlock: fence "report:daily": token 1795305105661725 is older than 1795305105661901, the highest written: the writer no longer holds the lock
	// stored: B's report
}

// Write under a lease: the guarded write refuses the token if a newer holder has written.
func ExampleRedis_Write() {
	m, _ := miniredis.Run()
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	node := goredis.New(rdb)
	ctx := context.Background()

	client, err := redlock.New([]redlock.Node{node}) // the lock's nodes
	if err != nil {
		panic(err)
	}
	defer client.Close()
	store, err := fence.NewRedis(node, 24*time.Hour) // here one server is both
	if err != nil {
		panic(err)
	}

	lease, err := client.Acquire(ctx, "report")
	if err != nil {
		panic(err)
	}
	defer lease.Release(ctx)
	err = store.Write(ctx, "report:data", lease.Token(), "the report")
	fmt.Println(err)
	// Output: <nil>
}

// Check the token first in the transaction that writes the data: if a newer holder has
// committed, Check returns ErrStale and nothing commits. The *sql.DB is any driver's.
func ExampleSQL_Check() {
	var db *sql.DB // sql.Open("pgx", dsn), with the driver of your database
	var lease *redlock.Lease
	ctx := context.Background()
	if db == nil || lease == nil {
		return // this example shows the calls; contrib/fencesql runs them on PostgreSQL
	}

	tokens, err := fence.NewSQL(fence.Postgres, "fence_tokens")
	if err != nil {
		panic(err)
	}
	if err := tokens.CreateTable(ctx, db); err != nil { // or add tokens.Schema() to your migrations
		panic(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback()
	if err := tokens.Check(ctx, tx, "invoice:42", lease.Token()); err != nil {
		return // errors.Is(err, fence.ErrStale): this process no longer holds the lock
	}
	if _, err := tx.ExecContext(ctx, "UPDATE invoices SET state = 'sent' WHERE id = 42"); err != nil {
		panic(err)
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}
}

// Do wraps the transaction: it commits fn's writes only under the newest token.
func ExampleSQL_Do() {
	var db *sql.DB // sql.Open with your driver
	var lease *redlock.Lease
	ctx := context.Background()
	if db == nil || lease == nil {
		return // this example shows the calls; contrib/fencesql runs them on PostgreSQL
	}

	tokens, err := fence.NewSQL(fence.Postgres, "fence_tokens")
	if err != nil {
		panic(err)
	}
	err = tokens.Do(ctx, db, "invoice:42", lease.Token(), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE invoices SET state = 'sent' WHERE id = 42")
		return err
	})
	if errors.Is(err, fence.ErrStale) {
		fmt.Println("another holder has written since: nothing committed")
	}
}
