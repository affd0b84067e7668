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
//  1. One owner, three writers. The lock key holds one owner's token, or the readers'
//     marker, or nothing. Only three scripts write it: acquire sets it only when it is free
//     or already the caller's (its token, or an earlier attempt's of the same waiter); extend
//     renews it only where it is the caller's; release deletes it only where it is the
//     caller's. The queue never writes it: it may refuse a caller, and it may wake a waiter,
//     which then takes the lock itself with acquire.
//  2. No barging. acquire refuses a free lock to a caller that a live waiter goes before in
//     the queue (every waiter goes before a caller that does not wait).
//  3. Resends are harmless. A script run twice with the same arguments leaves the state of one
//     run, and replies as the first run did, or "gone" for a release whose first run let go,
//     or "not ours" for a release whose first run freed a lock that another caller took before
//     the second run where no queue marked the release (that node then counts as a refusal of
//     the release: state safe, reply pessimistic).
//  4. Every key expires. The lock key has its owner's TTL, the queue's keys lapse when no
//     waiter calls, the fence counter FenceIdle after it was last written, a semaphore's
//     record of K with its longest permit or waiter's place.
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
//  1. Exclusion. A Grant is returned only when a quorum (N/2+1) of the nodes granted that
//     same attempt and time is left of its validity, start + TTL - drift, counted from before
//     the first request. Two quorums share a node, which (1) held one owner at a time; so no
//     two Grants' validities overlap while the servers' clocks run within the drift allowance
//     and the restart guard covers the longest TTL. An extension is the same rule, counting
//     the nodes where the key is still the holder's, from before its first request.
//  2. Fencing. A fenced Grant's token stands on a quorum before it is returned (a quorum
//     agreed on it, or it was raised there), so every later quorum meets a counter at
//     least that large and (5) grants a larger one, while the restart guard exceeds 2 s
//     plus the largest difference between the servers' clocks.
//  3. Wake-ups carry nothing. A waiter woken by a release takes the lock with its next
//     attempt, by (1) as an uncontended caller does: a lost or stray wake-up costs time, never
//     safety.
//  4. One server, one vote. While some node is unidentified, a win counts only once every
//     node that is not suspected has said which server it reaches.
//  5. Nothing left behind. A failed attempt is released on every node that may hold it,
//     a straggler once it answers; a release follows the acquisition's calls still under
//     way; a waiter that gives up leaves every queue.
//  6. Progress. A crashed holder blocks the others for its TTL at most, a crashed waiter
//     for a place's lifetime (placeKept); a waiter that keeps calling keeps its place.
//  7. At most K. A semaphore's holder holds one permit, which a quorum granted to that same
//     attempt: (1) per permit, so at most K hold at once.
//
// The tables below state what each script does, per node; docs/design.md argues the
// invariants from them.
//
// # Tokens
//
// An owner's token (Held.Token) is random. A waiter's is "<waiter id>.<attempt>", the id a
// fresh random token and the attempt a decimal counter from 1: the scripts treat a lock held
// by an earlier attempt of the same waiter as the waiter's own (a retry after a lost reply),
// and never a later attempt's lock as an earlier one's, so a late release of an abandoned
// attempt cannot delete a later one's lock. A holder's description (Lock.Description), if
// any, starts its random tokens and waiter ids: "<description>@<random>", so that
// "<description>@<random>.<attempt>" is a waiter's token; Status reads it back as what
// comes before the first '@'. No token contains a space, and the random part (NewToken's,
// base64url) contains no "." or '@', so that a token that is not a waiter's never ends in
// "." and digits, a waiter's id is all of its token before the last ".", and each token
// matches only itself. The scripts never look inside a token but for that last ".".
//
// # The waiter queue, per node
//
// A node keeps, per lock, the queue of its waiters: Keys.Queue (ids by ticket, the time the
// waiter began, so that the nodes order alike), Keys.Alive (ids by the server time at which
// their place lapses) and Keys.Waiters (each id's kind and channel: "<w or r> <channel>").
// A waiter's place lapses placeKept after its last call landed (a refresh interval and two
// node timeouts: 450ms at a 100ms node timeout), and each key expires when no waiter calls
// for one to two places' time (Keys.Alive no sooner than 10 s after the last leave marked
// there: see below). A holder is in no queue. One waiter W, on one node:
//
//	state       event                                   effect                                  reply / message
//	----------  --------------------------------------  --------------------------------------  -----------------------
//	any         acquire, lock held by another            queue W (or keep its place)             {0, pttl}
//	any         acquire, lock free, a live waiter        queue W (or keep its place)             {0, 0}
//	            ahead of W
//	any         acquire, lock free or W's, W first       SET lock to W's token; W leaves the     {1, fence}
//	            (or no queue)                            queue
//	queued      W's call stops (crash)                   place lapses after placeKept            -
//	holding     TTL runs out (crash)                     the lock lapses                         -
//	holding     release "leave" (W unlocks)              DEL lock, mark W left; wake the first   {1, woken}
//	                                                     live waiter
//	holding     release "stay" (W's attempt failed       DEL lock, queue W again at its ticket;  {1, woken}
//	            elsewhere)                               wake the first live waiter unless W
//	queued      release "leave" (W gives up)             dequeue W, mark W left; wake the first  {0, woken}
//	                                                     live waiter if the lock is free
//	left        acquire or release "stay" (a call        - (for 10 s after the leave)            {0, 0} or {0, 0, 1}
//	            sent before W left, landing late)
//	first       another's release frees the lock         -                                       "" on W's channel
//
// A script forgets at most 64 lapsed waiters at the head of a queue per call; if it finds
// more, it reads as if a live waiter came first: it refuses, and tells the caller to call
// again at once ({0, 1}: held for 1 ms more), since while the lock is free no release will
// wake it; the next call forgets on.
// "Mark W left" (where the queue exists, or W is past its first attempt) adds "!<W>" to
// Keys.Alive, lapsing 10 s later: W's calls never come after its leave, but a call sent
// before it can land after it (held up by a partition, or in a stopped server's socket),
// and would otherwise queue a waiter that is gone, or take the free lock in its name. A
// release that lets go of a holding where the queue exists marks its token left so
// ("!<token>", a stay's "!<token> stay"): the same release run again finds it, and replies
// "gone" though a woken waiter took the lock since.
//
// # Readers, per node
//
// A Lock with Read asks for a reader's share (mode "r" of the same three scripts).
// Readers' shares are entries in Keys.Readers (tokens by the server time at which each
// ends); while any is live the lock key holds the marker "(readers)", with a TTL that
// covers every entry, so that a writer's acquisition finds the lock held. A reader R queues
// as a waiter does, recorded as "r".
//
//	state       event                                   effect                                  reply / message
//	----------  --------------------------------------  --------------------------------------  -----------------------
//	any         acquire "r", a writer holds the lock    queue R                                 {0, pttl}
//	any         acquire "r", a live writer waits        queue R                                 {0, pttl} or {0, 0}
//	            ahead of R
//	any         acquire "r", lock free or readers',     add R's entry, marker's TTL to cover    {1, 0}
//	            no live writer ahead of R               it; R leaves the queue
//	holding     extend "r"                              renew R's entry and the marker's TTL    {1}
//	holding     release "r"                             delete R's entry (and an earlier        {1, woken}
//	                                                    attempt's); the last one deletes the
//	                                                    marker and wakes the first live waiter
//	holding     TTL runs out (crash)                    the entry lapses; the marker with the   -
//	                                                    last entry
//	first       a release frees the lock                -                                       "" to R and to each
//	                                                                                            reader right behind it
//
// A writer waiting in the queue thus blocks the readers that queue after it.
//
// # Semaphores, per node
//
// A semaphore of K permits (NewSemaphoreKeys) is K lock keys, Keys.Permits, under one queue
// and one fence counter, and a record of K (Keys.Readers) that stands while a permit or a
// waiter's place may. Its waiters queue and are woken as a lock's; the rows of the lock's
// table hold with "a permit" for "the lock", but for these:
//
//	state       event                                   effect                                  reply / message
//	----------  --------------------------------------  --------------------------------------  -----------------------
//	any         acquire, the record says n != K         -                                       {-2, n}
//	W holds p   acquire (a resend, a later attempt)     renew p                                 {1, fence, u, free, p}
//	any         acquire, f permits free, fewer than f   SET the hinted permit if free, else     {1, fence, u, free, p}
//	            live waiters ahead of W                 the first free one, p; W leaves the
//	                                                    queue
//	any         acquire, every permit held, or f free   queue W                                 {0, pttl or 0, u, 0, -1}
//	            and f live waiters ahead
//	holding     release                                 DEL every permit of W's here; wake the  {1, woken}
//	                                                    first live waiters, one per permit free
//	first f     a release frees a permit (f free)       -                                       "" on W's channel
//
// Every acquire leaves the record's TTL at least its TTL (a queued waiter's: two places'
// time), extend "p" at least the permit's, and a release that leaves no permit held and no
// queue deletes it: so the record stands while a holder of another K may hold a permit.
// free is the set of permits free to W (a bit each; none where live waiters go first), its
// own included. So a node grants a caller one permit at most. Across the nodes a caller
// hears every node that is not suspected (a grant it did not see would sit unused), wins
// the permit that a quorum granted to that same attempt, and once that grant is final (not
// ErrExpired, nor a failed raise: those keep the places for the next attempt) on every
// other node lets go at once of the permit it was given there and, a waiter, leaves the
// queue. With none, if a permit was free on a quorum, it calls again at once asking for it
// (a split vote); if not, it waits as for a held lock.
//
// # Sets of names, per node
//
// A lock over several names at once (NewSetKeys) is each name's own keys: a name held by a
// set holds the set's token in its lock key, as a single-name owner's would. The scripts
// take each name's six keys, name after name (a lock is a set of one). Its waiter W queues
// in every name's queue under one id and ticket, its channel the first name's. The rows of
// the lock's table hold per name, but for these:
//
//	state       event                                   effect                                  reply / message
//	----------  --------------------------------------  --------------------------------------  -----------------------
//	any         acquire, each name free (no live         SET every name to W's token, each       {1, fence}
//	            waiter ahead of W) or W's                counter to the set's fence; W leaves
//	                                                     every queue
//	any         acquire, some name held by another, or   queue W in every name's queue           {0, longest pttl} or
//	            a live waiter ahead in some queue                                                {0, 0}
//	holding     release                                  DEL each name that is W's; per name,    {1, woken}
//	                                                     as release (leave or stay, wake)
//	first       a release frees one of W's names         -                                       "" on W's channel
//
// A reader set takes a share of every name or of none, by the readers' rules per name. The
// set's fence is the largest of every name's advanced counter, and each counter is raised
// to it: larger than every name's earlier token, and every name's next one is larger still.
// Waiters of every name are ordered by (ticket, id), alike in every queue and on every
// node; a waiter waits only for holders, which wait for nothing, and for waiters ahead of it
// in that order, so no waiter waits for itself: sets of overlapping names never deadlock.
//
// # The waiter, across nodes (AcquireWait)
//
// W takes a ticket, subscribes to its own channel (Keys.Wake) once it finds the lock held,
// and calls again as soon as a quorum of the nodes confirmed the subscription. Then it
// waits, without polling, until wake-ups came from the nodes that refused its last attempt
// (up to a quorum of them), or its last attempt's time after the first wake-up (it then calls
// again at once), the holder's remaining
// TTL or its refresh interval (2.5 node timeouts, at least 50 ms, counted from its last
// attempt's start: it calls again, which keeps its place). Wake-ups that came while it did
// not listen are dropped before each attempt. When its context ends W leaves the queue
// (release "leave" on every node, each once the calls of its earlier attempts still under
// way there answered), letting go of any lock its last attempts took meanwhile.
package core
