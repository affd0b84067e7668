// Package fence checks fencing tokens at the storage a lock protects, so that a holder that
// lost its lock without knowing it (a long GC pause, a stalled VM, a slow network) cannot
// overwrite the work of the holder after it.
//
// A redlock.Lease carries a token, Lease.Token, that grows from one holder of a name to the
// next. Pass it with every write, and have the storage refuse a token older than the highest
// it has seen: the lock alone cannot stop a late write, but the storage can. This package
// does that for the two stores most programs have:
//
//   - Redis: Redis.Write writes a record (a hash with the value and its token) in one
//     script, in one round trip, only if the token is not older than the record's, and
//     gives the record a TTL. It runs over any redlock.Node, so with any of the four
//     backends (go-redis, redigo, rueidis, valkey-go).
//   - SQL through database/sql: SQL.Check records the highest token per resource in a table
//     you name, inside your *sql.Tx, and refuses an older one; your own statements in the
//     same transaction then commit only under the newest token. Statements for PostgreSQL,
//     MySQL and SQLite; the package imports no driver.
//
// A refused write is an error that matches ErrStale (a *StaleError says which token was
// refused and which one is higher). Equal tokens are accepted: a lease keeps one token, so
// its holder may write many times, and a newer holder always has a larger token. Bad input
// (an empty resource, a zero token, a nil node) is an error matching redlock.ErrInvalid,
// never a panic.
//
// # The Redis record and its TTL
//
// Redis.Write keeps the value and its token together, in one hash (fields "value" and
// "token"), and every accepted write sets the record's TTL (NewRedis's ttl): no record, and
// no token, outlives its last write by more than the TTL, so tokens are not left behind for
// resources that are gone. Value and token expire as one key, at one time, so the guarantee
// needs no clock: a value written with token t is never overwritten by a token older than
// t. What the TTL bounds is how long the record lives unwritten: once it has expired, the
// resource is empty, and the next write re-creates it whatever its token. Choose the TTL
// longer than the lock's longest possible holding (its TTL times the extensions, or
// redlock.WithMaxHold) plus the longest pause you plan for, and longer than the value must
// live unwritten. Then, while a holder holds the lock and after its first write, the record
// stays, and a paused former holder's write is refused; only a write that comes more than
// the TTL after the resource's last write lands in an empty record.
//
// # The SQL table
//
// SQL.Check keeps one row per resource, (resource, token), in the table you name; create it
// with SQL.CreateTable, or from SQL.Schema. Check locks the row until your transaction
// ends, so transactions on one resource take turns, and one that checks an older token than
// a committed one gets ErrStale: roll it back. Rows do not expire (the table has one per
// resource, as your data does); if you delete a resource's data for good, delete its row in
// the same transaction, knowing that a late write with any token may then re-create it, as
// after a Redis record's expiry.
package fence
