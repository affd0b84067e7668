// Package simnet runs Redis servers inside a testing/synctest bubble, for tests that time
// something: a lock's TTL, a hand-over, a backoff, the restart guard. Each Server is a
// miniredis whose keys expire on the bubble's clock (miniredis's ClockTTL), reached over
// buffered in-memory connections (Pipe) through Server.Dial, which fits go-redis's
// Options.Dialer. Inside a bubble the clock moves only when every goroutine is blocked, so
// a test's timing is exact: a 30 s TTL lapses at exactly 30 s of virtual time, whatever the
// machine's load.
//
// A Server answers INFO server as redis-server does, with uptime_in_seconds and run_id,
// which the restart guard and the identity check read (from Lua, too); it can crash, losing
// its data, and restart with uptime 0 and a new run_id.
//
// Everything here must be made and used inside the bubble (synctest.Test): a Server or a
// connection made outside it blocks the bubble's goroutines non-durably, and go-redis
// resolves a host name on a goroutine outside the bubble, so addresses are IP addresses
// (Addr).
package simnet
