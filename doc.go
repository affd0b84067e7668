// Package redlock is a distributed mutex over Redis: the Redlock algorithm over N
// independent Redis masters (N = 1 is the plain single-instance lock), with fencing tokens.
//
// Dial builds a Client from the addresses of the Redis masters, with a driver backend's
// Dial, such as that of github.com/go-redlock/redlock/backends/goredis:
//
//	client, err := redlock.Dial([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}, goredis.Dial)
//	if err != nil { ... }
//	defer client.Close()
//	mu := client.NewMutex("jobs:nightly")
//	mu.Lock()
//	defer mu.Unlock()
//
// New builds one from Nodes, one per Redis master, each a backend's wrapper of a driver
// client of your own. A Client hands out a lock in three forms:
//
//   - Client.NewMutex returns a Mutex, a sync.Locker shared by every process that uses the
//     same name over the same nodes. Lock waits as long as it takes, LockContext until its
//     context ends, TryLock makes one attempt. A held Mutex extends its lock by itself;
//     Lost closes if the lock is lost all the same. Made WithFencing(true), a Mutex
//     hands out a fencing token (Mutex.Token), as a Lease does.
//   - Client.Acquire waits for the lock and returns a Lease; Client.TryAcquire makes one
//     attempt. A Lease holds its lock until Release, or until its validity (Lease.Until)
//     runs out unless Extend (or WithAutoExtend) pushes it further.
//   - Client.Do acquires the lock as Acquire does, runs a function while the lease extends
//     itself, and releases it, also when the function panics. The function's context
//     ends when the lease does, never later than its Until.
//
// Client.AcquireAll, TryAcquireAll, DoAll, NewMutexAll and NewRWMutexAll take one lock over
// several names at once: every name or none (a reader: a share of each), with one fencing
// token, queued as one waiter on every name.
// Client.NewRWMutex, Client.NewSemaphore and Client.NewElection build a reader/writer lock,
// a counting semaphore and a leader election from such locks.
//
// A lock is granted when a majority of nodes (the quorum, N/2+1) accept it within its
// validity: TTL - elapsed - (TTL*f + 2ms), f the drift factor (WithDriftFactor).
// Lease.Token is a fencing token that strictly increases from one holder of a name to the
// next; pass it to the storage you write, and have the storage reject tokens older than the
// newest it has seen. That is what keeps a holder that paused past its lease from
// corrupting data.
//
// Like every lease-based lock, mutual exclusion holds under timing assumptions: process
// pauses, network delays and clock-rate drift stay small compared to the TTL, and a node
// that loses its data (a restart without persistence, or a failover to a replica) does not
// take part again before every lock it granted has expired.
package redlock
