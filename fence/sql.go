package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Dialect names the SQL database whose statements SQL uses. Its zero value is no dialect:
// NewSQL refuses it.
type Dialect int

// The dialects. The tests run Postgres against PostgreSQL 15 and SQLite against SQLite 3
// (modernc.org/sqlite); MySQL's statements are written for MySQL 5.7 and 8 and MariaDB, and
// are not run by the tests.
const (
	// Postgres is PostgreSQL 9.5 or later ($1 placeholders, INSERT ... ON CONFLICT).
	Postgres Dialect = iota + 1
	// MySQL is MySQL 5.7 or later, or MariaDB (? placeholders, ON DUPLICATE KEY UPDATE).
	MySQL
	// SQLite is SQLite 3.35 or later (? placeholders, INSERT ... ON CONFLICT ... RETURNING).
	SQLite
)

// String returns the dialect's name: "postgres", "mysql", "sqlite", or "Dialect(n)" for an
// unknown one.
func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case MySQL:
		return "mysql"
	case SQLite:
		return "sqlite"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// MaxResourceLen is the longest resource name SQL accepts, in bytes: the resource column is
// a VARBINARY(255) on MySQL.
const MaxResourceLen = 255

// tableName is an unquoted table name, optionally qualified by its schema (or, on SQLite, its
// database).
var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

// SQL records the highest fencing token per resource in a table, inside the caller's
// transactions, and refuses an older token. Make one with NewSQL; it is safe for concurrent
// use, and keeps no state of its own between calls. It imports no driver: open the database
// with yours.
//
// The table has two columns: resource (the resource's name, the primary key) and token (the
// highest token checked and committed for it, a BIGINT). Create it with CreateTable, or
// with the statement Schema returns.
type SQL struct {
	dialect Dialect
	table   string
	schema  string // CREATE TABLE IF NOT EXISTS
	record  string // records the token; on Postgres and SQLite, returns it if recorded
	read    string // reads the recorded token, on MySQL with FOR UPDATE
}

// Execer runs a statement: *sql.DB, *sql.Tx and *sql.Conn are Execers.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Querier runs a query for one row: *sql.DB, *sql.Tx and *sql.Conn are Queriers.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// NewSQL returns the checks for dialect over the table called table: a name of letters,
// digits and underscores (not starting with a digit), at most 63 bytes, optionally qualified
// as schema.table. It is written into the statements unquoted, so PostgreSQL folds it to
// lower case, as it does in your own statements. There is no default table.
//
// Errors: one matching redlock.ErrInvalid for an unknown dialect or a table name that is not
// as described.
func NewSQL(dialect Dialect, table string) (*SQL, error) {
	if !tableName.MatchString(table) {
		return nil, invalid("NewSQL: table name %s: want letters, digits and underscores, not starting with a digit, at most 63 bytes, optionally schema.table", quoted(table))
	}
	s := &SQL{dialect: dialect, table: table}
	switch dialect {
	case Postgres:
		s.schema = "CREATE TABLE IF NOT EXISTS " + table + " (resource TEXT PRIMARY KEY, token BIGINT NOT NULL)"
		// ON CONFLICT locks the row even when the WHERE refuses the update, and RETURNING
		// returns a row only if the token was recorded.
		s.record = "INSERT INTO " + table + " AS f (resource, token) VALUES ($1, $2) " +
			"ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token RETURNING f.token"
		s.read = "SELECT token FROM " + table + " WHERE resource = $1"
	case MySQL:
		// VARBINARY: resource names compare byte for byte, trailing spaces included. A
		// VARCHAR under a PAD SPACE collation (utf8mb4_bin too) would take "a" and "a " for
		// one row.
		s.schema = "CREATE TABLE IF NOT EXISTS " + table +
			" (resource VARBINARY(255) NOT NULL PRIMARY KEY, token BIGINT NOT NULL)"
		// No RETURNING: the upsert keeps the larger token and locks the row; the read, a
		// locking read, sees the latest committed token whatever the isolation level.
		s.record = "INSERT INTO " + table + " (resource, token) VALUES (?, ?) ON DUPLICATE KEY UPDATE token = GREATEST(token, ?)"
		s.read = "SELECT token FROM " + table + " WHERE resource = ? FOR UPDATE"
	case SQLite:
		s.schema = "CREATE TABLE IF NOT EXISTS " + table + " (resource TEXT PRIMARY KEY NOT NULL, token INTEGER NOT NULL)"
		s.record = "INSERT INTO " + table + " AS f (resource, token) VALUES (?, ?) " +
			"ON CONFLICT (resource) DO UPDATE SET token = excluded.token WHERE f.token <= excluded.token RETURNING token"
		s.read = "SELECT token FROM " + table + " WHERE resource = ?"
	default:
		return nil, invalid("NewSQL: unknown dialect %v", dialect)
	}
	return s, nil
}

// Dialect returns the dialect given to NewSQL.
func (s *SQL) Dialect() Dialect {
	if s == nil {
		return 0
	}
	return s.dialect
}

// Table returns the table name given to NewSQL.
func (s *SQL) Table() string {
	if s == nil {
		return ""
	}
	return s.table
}

// Schema returns the statement that creates the table if it does not exist, for your
// migrations.
func (s *SQL) Schema() string {
	if s == nil {
		return ""
	}
	return s.schema
}

// CreateTable creates the table, if it does not exist, through db (a *sql.DB, *sql.Tx or
// *sql.Conn).
//
// Errors: one matching redlock.ErrInvalid if db is nil or s was not made by NewSQL;
// otherwise the database's error, naming the table.
func (s *SQL) CreateTable(ctx context.Context, db Execer) error {
	if s == nil || s.schema == "" {
		return invalid("SQL.CreateTable: a SQL made without NewSQL")
	}
	if db == nil || isNilValue(db) {
		return invalid("SQL.CreateTable %s: nil database", s.table)
	}
	if _, err := db.ExecContext(ctx, s.schema); err != nil {
		return fmt.Errorf("redlock: fence: create table %s: %w", s.table, err)
	}
	return nil
}

// Check records token as the highest for resource in the transaction tx, if no higher
// token is recorded for it, and returns nil: then write your data in tx, and commit. Until
// tx ends, the resource's row is locked, so another transaction's Check on the resource
// waits for tx's commit or rollback, and then sees its token. A transaction whose writes
// commit after a Check that returned nil is therefore the only one for that token: no
// transaction with an older token commits after it, if all of them call Check first. The
// same token is accepted again (its holder may write many times).
//
// Errors: a *StaleError (matching ErrStale) if a higher token is recorded: the writer no
// longer holds the lock; roll tx back. One matching redlock.ErrInvalid if tx is nil, s was
// not made by NewSQL, resource is empty, longer than MaxResourceLen, not valid UTF-8 or holds
// a NUL byte, or token is 0 (the zero Lease's) or above math.MaxInt64 (the column is a
// BIGINT; a Lease's tokens never are: they are Redis integers). Otherwise the database's
// error (a serialization failure under REPEATABLE READ or SERIALIZABLE, say: roll back and
// retry), naming the resource. After an error, roll tx back: on PostgreSQL a failed
// statement aborts the transaction.
func (s *SQL) Check(ctx context.Context, tx *sql.Tx, resource string, token uint64) error {
	if err := s.valid("Check", resource, token); err != nil {
		return err
	}
	if tx == nil {
		return invalid("SQL.Check %s: nil transaction", quoted(resource))
	}
	highest, err := s.record1(ctx, tx, resource, int64(token))
	if err != nil {
		return fmt.Errorf("redlock: fence %s in table %s: %w", quoted(resource), s.table, err)
	}
	if highest > token {
		return &StaleError{Resource: resource, Token: token, Highest: highest}
	}
	return nil
}

// record1 records token for resource, if it is not older than the recorded one, and returns
// the highest token recorded afterwards.
func (s *SQL) record1(ctx context.Context, tx *sql.Tx, resource string, token int64) (uint64, error) {
	var highest int64
	if s.dialect == MySQL {
		if _, err := tx.ExecContext(ctx, s.record, resource, token, token); err != nil {
			return 0, err
		}
		if err := tx.QueryRowContext(ctx, s.read, resource).Scan(&highest); err != nil {
			return 0, err
		}
		return uint64(highest), nil
	}
	err := tx.QueryRowContext(ctx, s.record, resource, token).Scan(&highest)
	if errors.Is(err, sql.ErrNoRows) { // refused: a higher token is recorded
		err = tx.QueryRowContext(ctx, s.read, resource).Scan(&highest)
	}
	if err != nil {
		return 0, err
	}
	return uint64(highest), nil
}

// Token returns the highest token recorded for resource, read through q (a *sql.DB, *sql.Tx
// or *sql.Conn), or 0 if none is. It changes nothing; on MySQL, inside a transaction, it
// locks the row (a locking read) until the transaction ends.
//
// Errors: one matching redlock.ErrInvalid if q is nil, s was not made by NewSQL, or resource
// is not one Check accepts; otherwise the database's error, naming the resource.
func (s *SQL) Token(ctx context.Context, q Querier, resource string) (uint64, error) {
	if err := s.valid("Token", resource, 1); err != nil {
		return 0, err
	}
	if q == nil || isNilValue(q) {
		return 0, invalid("SQL.Token %s: nil database", quoted(resource))
	}
	var highest int64
	err := q.QueryRowContext(ctx, s.read, resource).Scan(&highest)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("redlock: fence %s in table %s: %w", quoted(resource), s.table, err)
	}
	return uint64(highest), nil
}

// Do runs fn in a transaction of db that commits only under token: it begins the
// transaction, calls Check for resource and token, then fn, and commits. It rolls back if
// Check, fn or the commit fails, and if fn panics (the panic goes on). fn must not commit or
// roll back the transaction itself.
//
// Errors: Check's (a *StaleError, matching ErrStale, if a higher token is recorded; fn does
// not run then), fn's error as it returned it, or the database's error from Begin or Commit,
// naming the resource. db nil matches redlock.ErrInvalid.
func (s *SQL) Do(ctx context.Context, db *sql.DB, resource string, token uint64, fn func(tx *sql.Tx) error) error {
	if err := s.valid("Do", resource, token); err != nil {
		return err
	}
	if db == nil || fn == nil {
		return invalid("SQL.Do %s: nil database or function", quoted(resource))
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("redlock: fence %s: begin: %w", quoted(resource), err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	if err := s.Check(ctx, tx, resource, token); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	committed = true // a failed Commit has ended the transaction too
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("redlock: fence %s: commit: %w", quoted(resource), err)
	}
	return nil
}

// valid validates a call's resource and token, and s.
func (s *SQL) valid(op, resource string, token uint64) error {
	switch {
	case s == nil || s.record == "":
		return invalid("SQL.%s: a SQL made without NewSQL", op)
	case resource == "":
		return invalid("SQL.%s: empty resource", op)
	case len(resource) > MaxResourceLen:
		return invalid("SQL.%s %s: resource longer than %d bytes", op, quoted(resource), MaxResourceLen)
	case !utf8.ValidString(resource):
		return invalid("SQL.%s %s: resource is not valid UTF-8", op, quoted(resource))
	case strings.IndexByte(resource, 0) >= 0:
		return invalid("SQL.%s %s: resource holds a NUL byte", op, quoted(resource))
	case token == 0:
		return invalid("SQL.%s %s: token 0 is the zero Lease's, which holds no lock", op, quoted(resource))
	case token > math.MaxInt64:
		return invalid("SQL.%s %s: token %d is above the largest BIGINT, %d", op, quoted(resource), token, int64(math.MaxInt64))
	}
	return nil
}

// isNilValue reports whether v, an interface value, holds a nil pointer.
func isNilValue(v any) bool {
	switch x := v.(type) {
	case *sql.DB:
		return x == nil
	case *sql.Tx:
		return x == nil
	case *sql.Conn:
		return x == nil
	}
	return false
}
