package fencesql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/fence"
)

// pausedHolder runs the story of examples/fencing at a SQL database: worker A takes the lock
// and writes, pauses past its lease, B takes the lock and writes, and A's late write is
// refused by SQL.Check in A's transaction. The lock runs on embedded servers (miniredis).
// It fails unless the table ends with B's write.
func pausedHolder(ctx context.Context, out io.Writer, db *sql.DB, dialect fence.Dialect, table string) error {
	var nodes []redlock.Node
	var servers []*miniredis.Miniredis
	for range 3 {
		m, err := miniredis.Run()
		if err != nil {
			return err
		}
		defer m.Close()
		servers = append(servers, m)
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		defer rdb.Close()
		nodes = append(nodes, goredis.New(rdb))
	}
	tokens, err := fence.NewSQL(dialect, table+"_tokens")
	if err != nil {
		return err
	}
	if err := tokens.CreateTable(ctx, db); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" (id INTEGER PRIMARY KEY, body TEXT NOT NULL)"); err != nil {
		return err
	}
	upsert := "INSERT INTO " + table + " (id, body) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET body = excluded.body"
	if dialect == fence.SQLite {
		upsert = strings.Replace(upsert, "$1", "?", 1)
	}
	write := func(worker string, lease *redlock.Lease, body string) error {
		err := tokens.Do(ctx, db, "report", lease.Token(), func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, upsert, body)
			return err
		})
		switch {
		case err == nil:
			fmt.Fprintf(out, "%s wrote %q: committed\n", worker, body)
		case errors.Is(err, fence.ErrStale):
			fmt.Fprintf(out, "%s's write %q was refused: ErrStale\n", worker, body)
		}
		return err
	}

	// A short TTL and no extension make A's lease run out during its pause.
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

	leaseA, err := a.Acquire(ctx, "report")
	if err != nil {
		return err
	}
	if err := write("A", leaseA, "A's report"); err != nil {
		return err
	}
	fmt.Fprintln(out, "A pauses; its lease runs out")
	<-leaseA.Done()
	for _, m := range servers { // miniredis counts TTLs down only when told: the keys expire
		m.FastForward(500 * time.Millisecond)
	}
	leaseB, err := b.Acquire(ctx, "report")
	if err != nil {
		return err
	}
	defer leaseB.Release(context.Background())
	if err := write("B", leaseB, "B's report"); err != nil {
		return err
	}
	if err := write("A", leaseA, "A's late report"); !errors.Is(err, fence.ErrStale) {
		return fmt.Errorf("A's late write: %v, want ErrStale", err)
	}
	var body string
	if err := db.QueryRowContext(ctx, "SELECT body FROM "+table+" WHERE id = 1").Scan(&body); err != nil {
		return err
	}
	fmt.Fprintf(out, "The table holds %q\n", body)
	if body != "B's report" {
		return fmt.Errorf("the table holds %q, want B's report", body)
	}
	return nil
}

// A holder that paused past its lease writes late, in a SQL transaction, and SQL.Check
// refuses it: the newer holder's write stays. Here over SQLite (modernc.org/sqlite, no cgo);
// TestPausedHolder runs it on PostgreSQL too.
func Example() {
	dir, err := os.MkdirTemp("", "fencesql-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pausedHolder(ctx, os.Stdout, db, fence.SQLite, "reports"); err != nil {
		fmt.Println("failed:", err)
	}
	// Output:
	// A wrote "A's report": committed
	// A pauses; its lease runs out
	// B wrote "B's report": committed
	// A's write "A's late report" was refused: ErrStale
	// The table holds "B's report"
}

// TestPausedHolder runs the paused holder's story on each database.
func TestPausedHolder(t *testing.T) {
	eachDatabase(t, func(t *testing.T, d database, db *sql.DB) {
		var out strings.Builder
		table := fmt.Sprintf("reports_%d", tables.Add(1))
		if err := pausedHolder(ctxT(t), &out, db, d.dialect, table); err != nil {
			t.Fatalf("%v\noutput:\n%s", err, out.String())
		}
	})
}
