// Package core is the driver-neutral Redlock engine: the Node interface that each Redis
// driver backend implements, the Lua scripts, and the quorum fan-out that acquires, extends,
// raises the fence of, and releases a lock over N independent Redis masters.
//
// Most programs use the root package redlock instead; core is what a backend author and the
// root package build on. Lock semantics live here once: a backend only translates Node.Eval
// and Node.EvalStrings into its driver's calls.
//
// # Invariants
//
// What each script keeps on its node, whatever the order in which calls land, and however
// often one lands (a driver may send a call twice):
//
//  1. One owner. The lock key holds one owner's token, or the readers' marker, or nothing.
//     A script sets it only when it is free or already the caller's (its token, or an
//     earlier attempt's of the same waiter), or when a release hands it to the first live
//     waiter; a release deletes it only when it is the caller's.
//  2. No barging. A free lock goes to the first live waiter in the queue, or to a caller
//     when no live waiter queues, or back to its holder's extension (see Across 1).
//  3. Resends are harmless. A script run twice with the same arguments leaves the state of one
//     run, and replies as the first run did, or "gone" for a release whose lock a first
//     run handed on, or "not ours" for a release whose first run freed a lock that no
//     waiter queued for and another caller took before the second run (that node then
//     counts as a refusal of the release: state safe, reply pessimistic).
//  4. Every key expires. The lock key has its owner's TTL, the queue's keys lapse when no
//     waiter calls, the fence counter FenceIdle after it was last written.
//  5. Counters go up. A node's fence counter never decreases while it lives, and an
//     acquisition leaves it at least the server's time in microseconds and at least the
//     attempt's floor (which counts for at most 2 s past the server's clock).
//  6. A restarted node abstains. A server up for less than the restart guard grants no
//     lock and no permit; one that refuses to say its uptime (INFO) grants none either.
//  7. A leave is final. For 10 s after a waiter left, no call of its queues it or takes
//     the lock in its name.
//
// What the Cluster keeps across the nodes, from those:
//
//  1. Exclusion. A Grant is returned only when a quorum (N/2+1) of the nodes granted the
//     attempt, or handed it over, and time is left of its validity, start + TTL - drift,
//     counted from before the first request. Two quorums share a node, which (1) held one
//     owner at a time; so no two Grants' validities overlap while the servers' clocks run
//     within the drift allowance and the restart guard covers the longest TTL. An extension
//     takes the free key only on a node that never held the lock for this owner, and counts
//     it only if that node answered before the lease's validity ended, when no other owner
//     could hold a quorum: so the key was no one's, and the argument stands for the new
//     validity, counted from before the extension's first request.
//  2. Fencing. A fenced Grant's token stands on a quorum before it is returned (a quorum
//     agreed on it, or it was raised there), so every later quorum meets a counter at
//     least that large and (5) grants a larger one, while the restart guard exceeds 2 s
//     plus the largest difference between the servers' clocks.
//  3. Hand-over. A waiter takes a hand-over only from a quorum of nodes whose refusal of
//     that same attempt it saw, and only while half the TTL is left of the validity
//     counted from that attempt's start, which came before every hand-over of it.
//  4. One server, one vote. While some node is unidentified, a win counts only once every
//     node that is not suspected has said which server it reaches.
//  5. Nothing left behind. A failed attempt is released on every node that may hold it,
//     a straggler once it answers; a release follows the acquisition's and every
//     extension's calls still under way; a waiter that gives up leaves every queue.
//  6. Progress. A crashed holder blocks the others for its TTL at most, a crashed waiter
//     for a place's lifetime (placeKept); a waiter that keeps calling keeps its place.
//  7. At most K. A semaphore's holder holds one permit, which a quorum granted or handed
//     over to that same attempt: (1) per permit, so at most K hold at once.
//
// The tables below state what each script does, per node; docs/design.md argues the
// invariants from them.
//
// # Tokens
//
// An owner's token (Held.Token) is random. A waiter's is "<waiter id>.<attempt>", the id a
// fresh random token and the attempt a decimal counter from 1: the scripts treat a lock held
// by an earlier attempt of the same waiter as the waiter's own (a retry after a lost reply,
// or a lock handed to an attempt since superseded), and never a later attempt's lock as an
// earlier one's, so a late release of an abandoned attempt cannot delete a later one's
// lock. So no token contains a space (the queue records it in a space-separated entry),
// and other tokens contain no "." (NewToken's are base64url), so that each matches only
// itself.
//
// # The waiter queue, per node
//
// A node keeps, per lock, the queue of its waiters: Keys.Queue (ids by ticket, the time the
// waiter began, so that the nodes order alike), Keys.Alive (ids by the server time at which
// their place lapses) and Keys.Waiters (each id's latest attempt: "<token> <ttl ms> <fence
// floor> <guard s>[ r]"). A waiter's place lapses placeKept after its last call landed (a
// refresh interval and two node timeouts: 450ms at a 100ms node timeout), and each key
// expires when no waiter calls for one to two places' time (Keys.Alive no sooner than 10 s
// after the last leave marked there: see below). One waiter W, on one node:
//
//	state       event                                   effect                                  reply / message
//	----------  --------------------------------------  --------------------------------------  -----------------------
//	any         acquire, lock held by another            queue W (or keep its place), record     {0, pttl}
//	                                                     the attempt
//	any         acquire, lock free, a live waiter        queue W, record the attempt             {0, 0}
//	            ahead of W
//	any         acquire, lock free or W's, W first       SET lock to W's token; W's place        {1, fence}
//	            (or no queue)                            lapses with the lock
//	queued      W's call stops (crash)                   place lapses after placeKept            -
//	holding     TTL runs out (crash)                     lock and place lapse together           -
//	holding     release "leave" (W unlocks)              DEL lock, dequeue W, mark W left;       {1, woken}
//	                                                     hand over
//	holding     release "stay" (W's attempt failed       DEL lock, keep W's place; hand over     {1, woken}
//	            elsewhere)                               if another waiter is first
//	queued      release "leave" (W gives up)             dequeue W, mark W left; hand over if    {0, woken}
//	                                                     the lock is free
//	left        acquire or release "stay" (a call        - (for 10 s after the leave)            {0, pttl} or {0, 0}
//	            sent before W left, landing late)
//	first       another's release frees the lock         SET lock to W's recorded token, fence   "<token> <fence>[ u]"
//	                                                     to its floor; W's place lapses with it  on W's channel
//	first       same, but W recorded no attempt here,    -                                       "" (wake-up)
//	            or the restart guard abstains
//
// A script forgets at most 64 lapsed waiters at the head of a queue per call; if it finds
// more, it reads as if a live waiter came first (it refuses, and hands nothing), and the
// next call forgets on. "Mark W left" (where the queue exists, or W is past its first
// attempt) adds "!<W>" to Keys.Alive, lapsing 10 s later, and drops what has lapsed there:
// W's calls never come after its leave, but a call sent before it can land after it (held
// up by a partition, or in a stopped server's socket), and would otherwise queue a waiter
// that is gone, or take the free lock in its name. A release that lets go of a holding
// where the queue exists marks its token left so ("!<token>", a stay's "!<token> stay"):
// the same release run again finds it, and replies "gone" though a hand-over gave the lock
// to another.
//
// # Readers, per node
//
// A Lock with Read asks for a reader's share. Readers' shares are entries in Keys.Readers
// (tokens by the server time at which each ends); while any is live the lock key holds the
// marker "(readers)", with a TTL that covers every entry, so that a writer's acquisition
// (or its plain SET NX) finds the lock held, and only the readers' scripts look at the
// entries. A reader R queues as a waiter does, its attempt recorded with a trailing " r".
//
//	state       event                                   effect                                  reply / message
//	----------  --------------------------------------  --------------------------------------  -----------------------
//	any         rlock, a writer holds the lock          queue R, record the attempt             {0, pttl}
//	any         rlock, a live waiter (reader or         queue R, record the attempt             {0, pttl} or {0, 0}
//	            writer) ahead of R
//	any         rlock, lock free or readers', R first   add R's entry, marker's TTL to cover    {1, 0}
//	            (or no queue)                           it; R leaves the queue
//	holding     rextend                                 renew R's entry and the marker's TTL    {1}
//	holding     runlock                                 delete R's entry (and an earlier        {1, woken}
//	                                                    attempt's); the last one deletes the
//	                                                    marker and hands the lock over
//	holding     TTL runs out (crash)                    the entry lapses; the marker with the   -
//	                                                    last entry
//	first       a release frees the lock                add R's entry, and those of the         "<token> 0[ u]" to each
//	                                                    readers queued right behind R, up to
//	                                                    the next writer or a reader set that
//	                                                    cannot have its other names (see Sets
//	                                                    of names); each leaves the queue
//
// A writer waiting in the queue thus blocks the readers that queue after it.
//
// # Semaphores, per node
//
// A semaphore of K permits (NewSemaphoreKeys) is K lock keys, Keys.Permits, under one queue
// and one fence counter, and a record of K (Keys.Readers, kept FenceIdle after the last
// acquisition). Its waiters queue, record attempts and are woken as a lock's; the rows of
// the lock's table hold with "a permit" for "the lock", but for these:
//
//	state       event                                   effect                                  reply / message
//	----------  --------------------------------------  --------------------------------------  -----------------------
//	any         acquire, the record says n != K, and a  -                                       {-2, n}
//	            permit of n or K is held or a waiter's
//	            place is live (a scan that runs out
//	            reads as one)
//	any         acquire, the record says n != K, and    the record says K; then as below        as below
//	            neither
//	W holds p   acquire (a resend, a later attempt)     renew p                                 {1, fence, u, free, p}
//	any         acquire, f permits free, fewer than f   SET the hinted permit if free, else     {1, fence, u, free, p}
//	            live waiters ahead of W                 the first free one, p; W leaves the
//	                                                    queue (a permit's holder does not queue)
//	any         acquire, every permit held, or f free   queue W, record the attempt             {0, pttl or 0, u, 0, -1}
//	            and f live waiters ahead
//	holding     release                                 DEL every permit of W's here            {1, woken}
//	first       a release frees permit p (or finds      SET p to W's recorded token, fence to   "<token> <fence> #<p>[ u]"
//	            one free)                               its floor; W leaves the queue           on W's channel
//
// free is the set of permits free to W (a bit each; none where live waiters go first), its
// own included. So a node grants a caller one permit at most. Across the nodes a caller
// hears every node that is not suspected (a grant it did not see would sit unused), wins
// the permit that a quorum granted, or handed over, to that same attempt, and once that
// grant is final (not ErrExpired, nor a failed raise: those keep the places for the next
// attempt) on every other node lets go at once of the permit it was given there and, a
// waiter, leaves the queue (marked left: no later release hands it a permit it would not
// use). With none, if
// a permit was free on a quorum, it calls again at once asking for it (a split vote); if
// not, it waits as for a held lock.
//
// # Sets of names, per node
//
// A lock over several names at once (NewSetKeys) is each name's own keys: a name held by a
// set holds the set's token in its lock key, as a single-name owner's would. The acquire and
// release scripts take each name's six keys, name after name (a lock is a set of one). Its
// waiter W queues in every name's queue under one id and ticket, with the same attempt
// recorded in each, followed by " s" and the set's lock keys (" <length> <key>" each), from
// which a release finds the other names' keys (NewKeys's layout). The rows of the lock's
// table hold per name, but for these:
//
//	state       event                                   effect                                  reply / message
//	----------  --------------------------------------  --------------------------------------  -----------------------
//	any         acquire, each name free (no live         SET every name to W's token, each       {1, fence}
//	            waiter ahead of W) or W's                counter to the set's fence
//	any         acquire, some name held by another, or   queue W in every name's queue, record   {0, longest pttl} or
//	            a live waiter ahead in some queue        the attempt and the set in each         {0, 0}
//	holding     release                                  DEL each name that is W's; per name,    {1, woken}
//	                                                     as release (leave or stay, hand over)
//	first       a release frees name a; each of W's      SET every name to W's recorded token,   "<token> <fence>[ u]"
//	            names free (or W's), W first in each     each counter to the set's fence         on the first name's
//	            queue                                                                            channel
//	first       same, another name held, or a live       - (a stays free: W is first in its      -
//	            waiter ahead of W in another queue       queue, so no one else takes it)
//
// A reader set R (Read with NewSetKeys) takes a share of every name or of none, by the
// readers' rules per name; its attempt is recorded followed by " r" and the set's lock keys.
// The rows of the readers' table hold per name, but for these:
//
//	state       event                                   effect                                  reply / message
//	----------  --------------------------------------  --------------------------------------  -----------------------
//	any         rlock, a writer holds some name, or a   queue R in every name's queue, record   {0, longest pttl} or
//	            live waiter ahead of R in some queue    the attempt and the set in each         {0, 0}
//	            where R has no share
//	any         rlock, each name free or readers', R    add R's entry to every name; R leaves   {1, 0}
//	            first in each queue (or none)           every queue
//	holding     rextend                                 renew R's entry of every name, or none  {1} or {0}
//	                                                    if one is gone
//	first       a release frees name a (or hands it to  add R's entry to every name; R leaves   "<token> 0[ u]" on the
//	            readers); each of R's names free or     every queue; then the readers right     first name's channel
//	            readers', R first in each queue         behind R in its other names' queues
//	first       same, a writer holds another name, or   - (a stays as it is: R is first in its  -
//	            a live waiter ahead of R in another     queue, so no writer takes it)
//	            queue
//
// The set's fence is the largest of every name's advanced counter, and each counter is
// raised to it: larger than every name's earlier token, and every name's next one is
// larger still. Waiters of every name are ordered by (ticket, id), alike in every queue and
// on every node; a waiter waits only for holders, which wait for nothing, and for waiters
// ahead of it in that order, so no waiter waits for itself: sets of overlapping names
// never deadlock.
//
// # The waiter, across nodes (AcquireWait)
//
// W takes a ticket, subscribes to its own channel (Keys.Wake) once it finds the lock held,
// and calls again as soon as a quorum of the nodes confirmed the subscription. Then it
// waits, without polling, for one of:
//
//   - a hand-over of its latest attempt from a quorum of the nodes that refused that
//     attempt: it then holds the lock, its validity counted from that attempt's start, if
//     at least half the TTL is left (else it calls again, and the nodes renew it);
//   - a wake-up: it calls again;
//   - hand-overs from fewer than a quorum that the rest do not follow within about twice
//     its attempt's time, or at once if too few nodes refused its attempt (or had not
//     answered) for a quorum of hand-overs to come: one release handed the lock to
//     different waiters, and it calls again, as after a split vote;
//   - the holder's remaining TTL, or its refresh interval (2.5 node timeouts, at least
//     50 ms, counted from its last attempt's start): it calls again, which keeps its place.
//
// An attempt that a quorum refused returns without waiting for the rest; their refusals,
// when they come, count for a hand-over too. When its context ends W leaves the queue
// (release "leave" on every node, each once the calls of its earlier attempts still under
// way there answered), letting go of any lock handed to it meanwhile.
package core
