// Package conformance is the test suite every core.Node must pass: the backends of
// this module run it, and so can a backend of your own, with one call from a test:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{
//			NewNode: func(t testing.TB, addr string) core.Node {
//				client := mydriver.Dial(addr)
//				t.Cleanup(func() { client.Close() })
//				return mybackend.New(client)
//			},
//			CloseClient: func(t testing.TB, n core.Node) { /* close n's client */ },
//		})
//	}
//
// Run starts its own servers on 127.0.0.1: miniredis in-process always, real redis-server
// processes when the binary is on PATH (those checks skip, saying so, otherwise), and, when
// the Harness has a NewClusterNode, a real Redis Cluster of 3 masters, reached through the
// backend's cluster client (without one, a "redis-cluster" subtest skips, saying that no
// check ran on a cluster and how to set NewClusterNode). Each check gets fresh servers of its own; on the cluster, the
// checks take turns on one cluster, each with keys of its own. The suite prepares and inspects the
// servers through its own small RESP client, never through the Node under test, and makes a
// server "accept and never reply" (or drop its connections) with a TCP proxy in front of
// it, so that a driver that connects eagerly can be checked as well as a lazy one.
//
// The checks, each a subtest named "<server>/<group>/<check>":
//
//   - scripts: every core script (core.Scripts: acquire, extend, release, the election's
//     proclaim and leader, and status) through Node.Eval (leader and status, whose replies
//     hold bulk strings, through Node.EvalStrings, as core reads them), with the reply and
//     the effect on the server checked. acquire takes ten ARGV, the mode ninth ("w" a
//     writer, "r" a reader, a semaphore's K); extend and release take the mode as ARGV[3]
//     and ARGV[2]. A writer's: acquire of a free lock, of a held one, of one readers hold,
//     retried with our own token, the fence counter advancing exactly past 2^32, waiters
//     taking it in ticket order (one that takes it leaves the queue) and asked to identify
//     the server; extend of our lock, another's, a missing one, and raising the fence
//     counter (never lowering it, never for another's lock); release of ours (deleted, and
//     only the first of two waiters woken, with an empty message on its channel, whose own
//     acquire then takes it), of ours by a waiter that keeps its place, of another's, of a
//     missing one, and of ours with readers first in the queue (both readers woken, the
//     writer behind them not; the woken readers then share it). A reader's (mode "r"):
//     acquire of a free lock (the readers' marker in the lock key, an entry in the readers
//     key ending TTL from now), shared by two readers, refused while a writer holds the
//     lock (a reader waiter queued, recorded as "r <channel>") and while a writer waits;
//     extend of our share, of one gone or expired, of an entry the lock key no longer
//     backs; release of the last share (the waiting writer woken, whose acquire then takes
//     the lock), of one of two, while a writer holds the lock. acquire and release take
//     six keys, the readers key last. A semaphore of K permits (core.NewSemaphoreKeys) runs
//     acquire and release with its K permits after those six keys: acquire of a free
//     semaphore (the first permit taken, K recorded), of one of 40 permits (46 KEYS) with
//     only the last free, hinting at a permit, of one whose permits are all held (the reply
//     ends with -1, the waiter queued), against a record of another K ({-2, n}), retried
//     with our own token (the same permit), the fence advancing exactly, and asked to
//     identify the server (the run_id, then the permit last); release of our permit with
//     two waiters (the permit freed, the first woken on its channel, the second not; the
//     woken one's acquire takes the permit), of our permit found among 40 when KEYS[1]
//     names another's, of another's, and on an empty server. status reads a held lock's
//     key, PTTL and fence counter, a queue with its scores, the waiters hash and a leader
//     record's bytes, and writes nothing.
//   - sets: a lock over three names (core.NewSetKeys, under a prefix with a hash tag) runs
//     acquire and release with each name's six KEYS, name after name (18): acquire of free
//     names (each lock key our token with the TTL; {1, fence} with the fence one past the
//     largest of the names' far-apart counters, 5, none and past 2^32, and every counter
//     raised to it), of names one of which another holds ({0, pttl}, none taken, the waiter
//     queued once in every name's queue, recorded as "w" and the set's first name's
//     channel), and that call again with the same token (the same reply, still one entry
//     each); release of our names (every lock key deleted, {1, 0}), and with a waiter
//     queued for the last name (every name freed, the waiter woken on that name's own
//     channel only, {1, 1}, and its acquire takes it). A reader set runs acquire and release
//     in mode "r" with the same 18 KEYS, and extend with each name's lock key and readers
//     key: acquire of free names (each lock key the readers' marker and each readers key
//     our entry, with the TTL), and by a second set overlapping the first (two entries on
//     the shared names); of names one of which a writer holds, each in turn ({0, pttl}, no
//     share, the waiter queued once in every name's queue, recorded as "r" and the set's
//     first name's channel), and that call again; of free names with a writer waiting
//     ahead in one queue ({0, 0}); extend of every share ({1}, each renewed), and with one
//     name's share gone, each in turn ({0}, none renewed); release of our shares (every key
//     freed), and with another reader on one name (its marker and entry kept); a writer's
//     release of a name a queued reader set waits for (the set woken on its first name's
//     channel only; its acquire then takes a share of every name and leaves every queue),
//     with a reader that shares past it in another name's queue and a writer queued behind
//     it in a third (neither woken; the writer refused once the set reads), and while
//     another name is held or has a writer waiting ahead (the set woken, its acquire
//     refused, no share taken, still queued everywhere). On a cluster, a set whose names
//     share one hash tag (one slot) is acquired and released; one whose names are in
//     different slots is an error that core.Permanent knows, never a panic, and takes
//     nothing.
//   - noscript: each script right after SCRIPT FLUSH, three times: Eval (EvalStrings for
//     leader and status) falls back from EVALSHA to EVAL, and the script replies as it must on an empty
//     server.
//   - errors: a server error (WRONGTYPE, redis.error_reply) is an error that keeps the
//     server's message, with no reply, and WRONGTYPE is one that core.Permanent knows (a
//     backend that puts its own text in front of the server's hides it); so is a reply that
//     is not an array of integers (a string or an integer alone, or an array holding text,
//     even "7", a nil element or an array). On a cluster, keys of different slots are an error that
//     core.Permanent knows, never a panic (through Eval and EvalStrings). closed-client: once
//     Harness.CloseClient closed the driver client, Eval and EvalStrings fail with an
//     error that matches core.ErrClosed (skipped, saying so, without CloseClient).
//   - replies: integer replies keep their sign ({0, -1} for a lock held without expiry, the
//     restart guard's {-1, wait} on a fresh redis-server); a nil reply is an error, not an
//     empty array; a reply of 700 integers comes back whole; a reply is memory of its
//     caller's own, unchanged by later calls.
//   - strings: EvalStrings returns bulk strings byte for byte (empty, 0x00, CR LF, non-UTF-8,
//     64 KiB), integers in decimal with their sign, mixed arrays, a nil element (Lua false)
//     as "", an empty array, 1000 elements whole; a nil reply, a string or integer alone, a
//     nested array and an error reply are errors with no reply (the error keeps the server's
//     message); each call runs the script once, and once the server has the script sends
//     EVALSHA only (INFO commandstats, redis-server); a script that wrote and then replied
//     with an error ran once; a reply is the caller's own; 100 goroutines at once each get
//     their own reply, and a call made while another waits for its reply (held back by a
//     proxy) gets its own reply, not an error; and it honours ctx as the context checks
//     below ask of Eval.
//   - arguments: every argument arrives, empty ones included, in order; every key arrives,
//     in order (all six of acquire's and release's, and the 46 of a semaphore of 40 permits); the caller's keys and args slices are
//     unchanged after later calls on the same Node (the Node keeps nothing of them).
//   - evalsha: each Eval runs the script exactly once (a script that counts its runs); once
//     the server has the script, Eval sends EVALSHA only (INFO commandstats, redis-server).
//     Nothing sends a call again but a broken connection: a script that wrote and then
//     replied with an error ran once, and so did one whose reply came 1.2 s late (held back
//     by a proxy on the connection, which stays open; on a cluster, CLIENT PAUSE WRITE, where
//     the server drops a paused command whose connection closed, so a backend that resends
//     on a new connection is caught on the other servers only).
//   - string: String() is non-empty, and differs for Nodes of different servers (on a
//     cluster, for the Nodes of two separate clusters: the shared one and one of one master).
//   - context: against a server that accepts and never replies, Eval returns within 1 s of
//     a 50 ms deadline with an error, within 1 s of a cancellation with an error matching
//     context.Canceled, and as soon for an already cancelled context; on a connection
//     opened before the server stopped answering and on a new one; and an Eval made while
//     100 others wait for that server (more than a pool of connections holds) returns
//     within 1 s of its own 50 ms deadline. late-reply: an Eval whose context ended while a
//     proxy held back its reply, and then a second Eval, on whatever connection the Node
//     chooses, before the held reply is let through: the second gets its own reply, never
//     the first's late one. Those two need a proxy, so not on a cluster, whose masters
//     stop answering by CLIENT PAUSE WRITE, which lets a new connection's handshake through.
//   - names: binary-safe lock names (spaces, unicode, braces, control bytes, invalid UTF-8,
//     1 KiB) through acquire, extend and release over core.Cluster.
//   - concurrency: 100 goroutines at once on one Node, each on its own lock (every reply
//     reaches its own caller) and all on one lock (exactly one wins).
//   - pubsub, for a Node that implements core.Subscriber: delivery of a notification
//     published right after Subscribe returned; Subscribe does not return while the server's
//     confirmation is held back by a proxy (ready means confirmed), for a Node's first
//     subscription (held from its first SUBSCRIBE on: a new connection's handshake passes)
//     and on an open pub/sub connection; a handler never gets
//     another channel's message; unsubscribe stops delivery and is idempotent, and once no
//     subscription to a channel is left the server no longer counts one (PUBSUB NUMSUB or
//     SHARDNUMSUB); two subscriptions to one channel; one pub/sub connection for many
//     channels (counted at a proxy, and by CLIENT LIST on redis-server: at most one per
//     master of a cluster); recovery after the server kills the pub/sub connection
//     (re-subscribe, one onMessage call, later messages delivered), with every one of three
//     channels woken, and only once subscribed again (no call while a proxy holds back the
//     new SUBSCRIBE's confirmation; on a cluster, the server counts the subscription at
//     each call); Subscribe honours its context's deadline and its cancellation against a
//     server that never replies, and one that timed out while its confirmation was held
//     back leaves nothing subscribed once the server answers; the channels of two waiters
//     of one lock (one hash tag) get their own messages only; a semaphore's wake-up, which
//     the release script run through the Node publishes (SPUBLISH for a sharded Node),
//     reaches the Node's own subscription to the waiter's channel as the empty message.
//     And: of two subscriptions to one channel, the first unsubscribed twice leaves the
//     second delivering (and counted by the server); a second Subscribe to a channel whose
//     first Subscribe's confirmation a proxy holds back returns only once it comes; after
//     the server was unreachable for 3 s (a proxy closes every connection, new ones too),
//     the backend re-subscribes by itself, calls onMessage and delivers again; and with 200
//     messages published at once (one script) and onMessage's first call held up until
//     unsubscribe returned, no call starts after it returned.
//   - independent-nodes: a whole lock life over 3 Nodes, each on a server of its own, through
//     core.Cluster, with fencing tokens that increase from one holder to the next.
//
// On the Redis Cluster, the checks that put a proxy in front of a server (subscribe
// deadlines and cancellation, ready means confirmed, a second Subscribe while the first is
// confirmed, an outage, a call behind others, a late reply, overlapping EvalStrings) or need
// several independent servers skip, saying so: a cluster client dials the addresses the
// cluster announces.
//
// A failure message names the part of the core.Node or core.Subscriber contract that was
// broken. The whole suite takes a few seconds per server.
package conformance
