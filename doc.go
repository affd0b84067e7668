// Package redlock is a distributed mutex over Redis: the Redlock algorithm over N
// independent Redis masters (N = 1 is the plain single-instance lock), with fencing tokens.
//
// A Client is built from Nodes, one per Redis master, each from a driver backend such as
// github.com/go-redlock/redlock/backends/goredis. Client.Acquire waits for a lock and
// returns a Lease; Client.TryAcquire makes one attempt. A lease holds its lock until
// Release, or until its validity (Lease.Until) runs out unless Extend pushes it further.
//
// A lock is granted when a majority of nodes (the quorum, N/2+1) accept it within its
// validity: TTL - elapsed - (TTL*DriftFactor + 2ms). Lease.Token is a fencing token that
// strictly increases from one holder of a name to the next; pass it to the storage you
// write, and have the storage reject tokens older than the newest it has seen. That is what
// keeps a holder that paused past its lease from corrupting data.
//
// Like every lease-based lock, mutual exclusion holds under timing assumptions: process
// pauses, network delays and clock-rate drift stay small compared to the TTL, and a node
// that loses its data does not take part again before every lock it granted has expired.
package redlock
