package fencesql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/fence"
)

// database is one database the statements run on.
type database struct {
	name    string
	dialect fence.Dialect
	open    func(t *testing.T) *sql.DB
	logDDL  string // a table "%s" of (seq, token), seq in insertion order
}

var databases = []database{
	{"postgres", fence.Postgres, postgresDB,
		"CREATE TABLE %s (seq BIGSERIAL PRIMARY KEY, token BIGINT NOT NULL)"},
	{"sqlite", fence.SQLite, sqliteDB,
		"CREATE TABLE %s (seq INTEGER PRIMARY KEY AUTOINCREMENT, token INTEGER NOT NULL)"},
}

// sqliteDB returns a SQLite database in a file of the test's. SQLite lets one writer in at a
// time: with one connection, a second transaction waits for the first in database/sql.
func sqliteDB(t *testing.T) *sql.DB {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "fence.db")+"?_pragma=busy_timeout(30000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

var tables atomic.Int64

// newTokens returns the checks over a new table, created, for db.
func newTokens(t *testing.T, d database, db *sql.DB) *fence.SQL {
	t.Helper()
	tokens, err := fence.NewSQL(d.dialect, fmt.Sprintf("fence_tokens_%d", tables.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // IF NOT EXISTS: twice is fine
		if err := tokens.CreateTable(ctxT(t), db); err != nil {
			t.Fatal(err)
		}
	}
	return tokens
}

// eachDatabase runs f on each database.
func eachDatabase(t *testing.T, f func(t *testing.T, d database, db *sql.DB)) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) { f(t, d, d.open(t)) })
	}
}

// ctxT returns a context that ends with the test, or after two minutes: generous, for a real
// server on a loaded machine.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// check runs Check in a transaction of its own, and commits it if Check accepts.
func check(ctx context.Context, db *sql.DB, tokens *fence.SQL, resource string, token uint64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := tokens.Check(ctx, tx, resource, token); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// TestCheck checks a sequence of tokens on one resource, each in a transaction of its own:
// each is accepted exactly when it is not older than the highest committed before it, a
// refused one says which token is higher, and the table holds the highest.
func TestCheck(t *testing.T) {
	steps := []struct {
		token   uint64
		highest uint64 // 0: accepted; else the higher token that refuses it
	}{
		{999, 0},  // no row: any token
		{1000, 0}, // newer
		{999, 1000},
		{1000, 0}, // the same holder writes again
		{1795305105661725, 0},
		{1795305105661724, 1795305105661725},
		{1<<53 + 1, 0}, // doubles would round it to 2^53
		{1 << 53, 1<<53 + 1},
		{math.MaxInt64, 0},
		{math.MaxInt64 - 1, math.MaxInt64},
		{1, math.MaxInt64},
	}
	eachDatabase(t, func(t *testing.T, d database, db *sql.DB) {
		ctx := ctxT(t)
		tokens := newTokens(t, d, db)
		const resource = "invoice:42"
		highest := uint64(0)
		for _, s := range steps {
			err := check(ctx, db, tokens, resource, s.token)
			if s.highest == 0 {
				if err != nil {
					t.Fatalf("Check(%d): %v, want it accepted", s.token, err)
				}
				highest = s.token
			} else {
				var stale *fence.StaleError
				if !errors.Is(err, fence.ErrStale) || !errors.As(err, &stale) ||
					*stale != (fence.StaleError{Resource: resource, Token: s.token, Highest: s.highest}) {
					t.Fatalf("Check(%d): %v, want ErrStale with highest %d", s.token, err, s.highest)
				}
				if !strings.Contains(err.Error(), `"invoice:42"`) {
					t.Errorf("%q does not name the resource", err)
				}
			}
			if got, err := tokens.Token(ctx, db, resource); err != nil || got != highest {
				t.Fatalf("after Check(%d), Token = %d, %v; want %d", s.token, got, err, highest)
			}
		}
		// Resources are distinct byte for byte: a newer token on one does not refuse another.
		for _, r := range []string{"Invoice:42", "invoice:42 ", "invoice:4", "счёт:42"} {
			if err := check(ctx, db, tokens, r, 1); err != nil {
				t.Errorf("Check(%q, 1): %v, want a resource of its own", r, err)
			}
		}
		if got, err := tokens.Token(ctx, db, "never checked"); err != nil || got != 0 {
			t.Errorf("Token of a resource never checked = %d, %v; want 0, nil", got, err)
		}
	})
}

// TestRollbackRecordsNothing: a token checked in a transaction that rolls back is not
// recorded.
func TestRollbackRecordsNothing(t *testing.T) {
	eachDatabase(t, func(t *testing.T, d database, db *sql.DB) {
		ctx := ctxT(t)
		tokens := newTokens(t, d, db)
		if err := check(ctx, db, tokens, "r", 5); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := tokens.Check(ctx, tx, "r", 9); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if err := check(ctx, db, tokens, "r", 7); err != nil {
			t.Errorf("Check(7) after 9 rolled back: %v, want it accepted", err)
		}
	})
}

// TestConcurrentTransactions: a transaction that has checked a token holds the resource
// until it ends; a transaction checking meanwhile sees its outcome. Whether the second one's
// Check was already waiting when the first ended or came after, the result is the same, so
// the test orders nothing by time.
func TestConcurrentTransactions(t *testing.T) {
	cases := []struct {
		name          string
		first, second uint64
		commitFirst   bool
		wantStale     bool // the second's outcome
	}{
		{"older after a committed newer", 7, 5, true, true},
		{"newer after a committed older", 5, 7, true, false},
		{"older after a rolled back newer", 9, 5, false, false},
		{"the same token", 7, 7, true, false},
	}
	eachDatabase(t, func(t *testing.T, d database, db *sql.DB) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := ctxT(t)
				tokens := newTokens(t, d, db)
				if err := check(ctx, db, tokens, "r", 1); err != nil { // the row exists
					t.Fatal(err)
				}
				tx1, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := tokens.Check(ctx, tx1, "r", c.first); err != nil {
					t.Fatal(err)
				}
				second := make(chan error, 1)
				go func() { second <- check(ctx, db, tokens, "r", c.second) }()
				if c.commitFirst {
					err = tx1.Commit()
				} else {
					err = tx1.Rollback()
				}
				if err != nil {
					t.Fatal(err)
				}
				err = <-second
				if c.wantStale != errors.Is(err, fence.ErrStale) || !c.wantStale && err != nil {
					t.Errorf("the second transaction's Check(%d): %v, want stale %v", c.second, err, c.wantStale)
				}
			})
		}
	})
}

// TestDoOrdersCommits: many writers, with distinct tokens in a random order, write a log
// through Do at once. The log's rows, in the order they were inserted, have increasing
// tokens: no transaction with an older token committed after a newer one. The last row is
// the highest token's.
func TestDoOrdersCommits(t *testing.T) {
	eachDatabase(t, func(t *testing.T, d database, db *sql.DB) {
		ctx := ctxT(t)
		tokens := newTokens(t, d, db)
		logTable := fmt.Sprintf("fence_log_%d", tables.Add(1))
		if _, err := db.ExecContext(ctx, fmt.Sprintf(d.logDDL, logTable)); err != nil {
			t.Fatal(err)
		}
		insert := "INSERT INTO " + logTable + " (token) VALUES ($1)"
		if d.dialect != fence.Postgres {
			insert = strings.Replace(insert, "$1", "?", 1)
		}
		const writers = 16
		order := rand.Perm(writers)
		var wg sync.WaitGroup
		var accepted atomic.Int64
		errs := make(chan error, writers)
		for _, i := range order {
			token := uint64(1000 + i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := tokens.Do(ctx, db, "log", token, func(tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, insert, int64(token))
					return err
				})
				switch {
				case err == nil:
					accepted.Add(1)
				case !errors.Is(err, fence.ErrStale):
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		rows, err := db.QueryContext(ctx, "SELECT token FROM "+logTable+" ORDER BY seq")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var logged []int64
		for rows.Next() {
			var tok int64
			if err := rows.Scan(&tok); err != nil {
				t.Fatal(err)
			}
			logged = append(logged, tok)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if int64(len(logged)) != accepted.Load() || len(logged) == 0 {
			t.Fatalf("%d rows logged, %d writes accepted", len(logged), accepted.Load())
		}
		for i := 1; i < len(logged); i++ {
			if logged[i] <= logged[i-1] {
				t.Fatalf("token %d committed after %d: %v", logged[i], logged[i-1], logged)
			}
		}
		if last := logged[len(logged)-1]; last != 1000+writers-1 {
			t.Errorf("the last token logged is %d, want the highest, %d", last, 1000+writers-1)
		}
	})
}

// TestDo: Do commits fn's writes only if Check accepts and fn succeeds, returns fn's error as
// it is, and rolls back when fn panics.
func TestDo(t *testing.T) {
	errFn := errors.New("fn failed")
	cases := []struct {
		name      string
		token     uint64
		fn        func() error
		panics    bool
		want      error // matched with errors.Is; nil for success
		committed bool
	}{
		{"accepted", 10, func() error { return nil }, false, nil, true},
		{"stale", 5, func() error { return nil }, false, fence.ErrStale, false},
		{"fn fails", 11, func() error { return errFn }, false, errFn, false},
		{"fn panics", 12, func() error { panic("boom") }, true, nil, false},
	}
	eachDatabase(t, func(t *testing.T, d database, db *sql.DB) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := ctxT(t)
				tokens := newTokens(t, d, db)
				if err := check(ctx, db, tokens, "r", 10); err != nil {
					t.Fatal(err)
				}
				ran := false
				err := func() (err error) {
					defer func() {
						if r := recover(); r != nil {
							if !c.panics {
								panic(r)
							}
							err = nil
						}
					}()
					return tokens.Do(ctx, db, "r", c.token, func(tx *sql.Tx) error {
						ran = true
						return c.fn()
					})
				}()
				if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
					t.Errorf("Do: %v, want %v", err, c.want)
				}
				if ran == errors.Is(err, fence.ErrStale) {
					t.Errorf("fn ran: %v, with %v", ran, err)
				}
				want := uint64(10)
				if c.committed {
					want = c.token
				}
				if got, err := tokens.Token(ctx, db, "r"); err != nil || got != want {
					t.Errorf("Token = %d, %v; want %d", got, err, want)
				}
				// Nothing is left open: a connection-limited pool (SQLite's has one) still works.
				if err := check(ctx, db, tokens, "other", 1); err != nil {
					t.Error(err)
				}
			})
		}
	})
}

// TestPostgresRepeatableRead: under REPEATABLE READ, a transaction whose snapshot predates
// a newer committed token is refused, by Check (ErrStale) or by the server (a serialization
// failure, 40001, to retry): it never commits under the older token.
func TestPostgresRepeatableRead(t *testing.T) {
	db := postgresDB(t)
	ctx := ctxT(t)
	tokens := newTokens(t, databases[0], db)
	if err := check(ctx, db, tokens, "r", 5); err != nil {
		t.Fatal(err)
	}
	for _, token := range []uint64{6, 8} { // older, then newer, than the 7 committed below
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "SELECT 1"); err != nil { // takes the snapshot
			t.Fatal(err)
		}
		if err := check(ctx, db, tokens, "r", 7); err != nil {
			t.Fatal(err)
		}
		err = tokens.Check(ctx, tx, "r", token)
		var pgErr *pgconn.PgError
		serialization := errors.As(err, &pgErr) && pgErr.Code == "40001"
		t.Logf("Check(%d) under REPEATABLE READ after 7 committed: %v", token, err)
		switch {
		case token < 7 && !errors.Is(err, fence.ErrStale) && !serialization:
			t.Errorf("Check(%d) under REPEATABLE READ after 7 committed: %v, want it refused", token, err)
		case token > 7 && err != nil && !serialization:
			t.Errorf("Check(%d) under REPEATABLE READ after 7 committed: %v, want nil or a serialization failure", token, err)
		}
		_ = tx.Rollback()
	}
}

// TestPostgresSchemaQualifiedTable: a table named schema.table works.
func TestPostgresSchemaQualifiedTable(t *testing.T) {
	db := postgresDB(t)
	ctx := ctxT(t)
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS fencing"); err != nil {
		t.Fatal(err)
	}
	tokens, err := fence.NewSQL(fence.Postgres, "fencing.Tokens")
	if err != nil {
		t.Fatal(err)
	}
	if err := tokens.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := check(ctx, db, tokens, "r", 2); err != nil {
		t.Fatal(err)
	}
	if err := check(ctx, db, tokens, "r", 1); !errors.Is(err, fence.ErrStale) {
		t.Errorf("Check(1) after 2: %v, want ErrStale", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM fencing.tokens").Scan(&n); err != nil || n != 1 {
		t.Errorf("fencing.tokens has %d rows (%v), want 1", n, err)
	}
}

// TestInvalidTokenTouchesNothing: bad input is refused before any statement, so the
// transaction stays usable.
func TestInvalidTokenTouchesNothing(t *testing.T) {
	eachDatabase(t, func(t *testing.T, d database, db *sql.DB) {
		ctx := ctxT(t)
		tokens := newTokens(t, d, db)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		for _, token := range []uint64{0, math.MaxInt64 + 1, math.MaxUint64} {
			if err := tokens.Check(ctx, tx, "r", token); !errors.Is(err, redlock.ErrInvalid) {
				t.Errorf("Check(%d): %v, want ErrInvalid", token, err)
			}
		}
		if err := tokens.Check(ctx, tx, "r", 3); err != nil {
			t.Errorf("Check(3) after refused input: %v", err)
		}
	})
}
