package fence_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/fence"
)

// The statements run against PostgreSQL and SQLite in contrib/fencesql, a module of its own
// for the drivers. These tests need no database: bad input is refused before any statement.

// TestNewSQL: the dialects and table names NewSQL takes, and those it refuses with an
// error matching redlock.ErrInvalid.
func TestNewSQL(t *testing.T) {
	cases := []struct {
		dialect fence.Dialect
		table   string
		ok      bool
	}{
		{fence.Postgres, "fence_tokens", true},
		{fence.MySQL, "app.fence_tokens", true},
		{fence.SQLite, "_T1", true},
		{fence.Postgres, strings.Repeat("a", 63), true},
		{fence.Postgres, strings.Repeat("a", 64), false},
		{fence.Postgres, "", false},
		{fence.Postgres, "1table", false},
		{fence.Postgres, "tokens; DROP TABLE users", false},
		{fence.Postgres, `"quoted"`, false},
		{fence.Postgres, "a.b.c", false},
		{fence.Postgres, "a.", false},
		{0, "fence_tokens", false},
		{fence.SQLite + 1, "fence_tokens", false},
	}
	for _, c := range cases {
		s, err := fence.NewSQL(c.dialect, c.table)
		if c.ok {
			if err != nil || s.Table() != c.table || s.Dialect() != c.dialect || !strings.Contains(s.Schema(), c.table) {
				t.Errorf("NewSQL(%v, %q) = %v, %v", c.dialect, c.table, s, err)
			}
			continue
		}
		if s != nil || !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("NewSQL(%v, %q) = %v, %v; want ErrInvalid", c.dialect, c.table, s, err)
		}
	}
}

// TestSQLInvalidInput: a bad resource, token, transaction or SQL is an error matching
// redlock.ErrInvalid that says what is wrong, never a panic.
func TestSQLInvalidInput(t *testing.T) {
	good, err := fence.NewSQL(fence.Postgres, "fence_tokens")
	if err != nil {
		t.Fatal(err)
	}
	var nilSQL *fence.SQL
	cases := []struct {
		name     string
		s        *fence.SQL
		resource string
		token    uint64
		text     string
	}{
		{"empty resource", good, "", 1, "empty resource"},
		{"long resource", good, strings.Repeat("r", fence.MaxResourceLen+1), 1, "longer than 255"},
		{"not UTF-8", good, "r\xff", 1, "not valid UTF-8"},
		{"NUL byte", good, "r\x00", 1, "NUL"},
		{"token 0", good, "r", 0, "token 0"},
		{"token above int64", good, "r", math.MaxInt64 + 1, "above the largest BIGINT"},
		{"nil transaction", good, "r", 1, "nil transaction"},
		{"nil SQL", nilSQL, "r", 1, "without NewSQL"},
		{"zero SQL", &fence.SQL{}, "r", 1, "without NewSQL"},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.s.Check(ctx, nil, c.resource, c.token)
			if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), c.text) {
				t.Errorf("Check: %v, want ErrInvalid saying %q", err, c.text)
			}
			if err := c.s.Do(ctx, nil, c.resource, c.token, nil); !errors.Is(err, redlock.ErrInvalid) {
				t.Errorf("Do: %v, want ErrInvalid", err)
			}
		})
	}
	if _, err := good.Token(ctx, nil, "r"); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("Token with a nil database: %v, want ErrInvalid", err)
	}
	if err := good.CreateTable(ctx, nil); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("CreateTable with a nil database: %v, want ErrInvalid", err)
	}
	if err := nilSQL.CreateTable(ctx, nil); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("CreateTable of a nil SQL: %v, want ErrInvalid", err)
	}
	if nilSQL.Schema() != "" || nilSQL.Table() != "" || nilSQL.Dialect() != 0 {
		t.Error("a nil SQL describes a table")
	}
}

// TestDialectString names each dialect.
func TestDialectString(t *testing.T) {
	for d, want := range map[fence.Dialect]string{fence.Postgres: "postgres", fence.MySQL: "mysql", fence.SQLite: "sqlite", 0: "Dialect(0)"} {
		if d.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(d), d.String(), want)
		}
	}
}

// TestStaleError: the message names the resource and both tokens, and the error matches
// ErrStale.
func TestStaleError(t *testing.T) {
	err := error(&fence.StaleError{Resource: "orders:42", Token: 5, Highest: 7})
	want := `redlock: fence "orders:42": token 5 is older than 7, the highest written: the writer no longer holds the lock`
	if err.Error() != want || !errors.Is(err, fence.ErrStale) || errors.Is(err, fence.ErrCorrupt) {
		t.Errorf("%q, want %q matching ErrStale", err, want)
	}
}

// TestMySQLResourceIsBinary: on MySQL the resource column compares byte for byte, trailing
// spaces included. A VARCHAR under a PAD SPACE collation (utf8mb4_bin among them, on MySQL
// and MariaDB) ignores trailing spaces, so "orders" and "orders " would share one row: the
// primary key refuses the second, and each resource's Check would see the other's token.
func TestMySQLResourceIsBinary(t *testing.T) {
	s, err := fence.NewSQL(fence.MySQL, "fence_tokens")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.Schema(), "resource VARBINARY(255) NOT NULL PRIMARY KEY") {
		t.Errorf("MySQL schema %q: want the resource column VARBINARY(255), which compares bytes with no padding", s.Schema())
	}
}
