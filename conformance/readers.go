package conformance

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readersHold is what the lock key holds while readers hold the lock (see core's acquire.lua).
const readersHold = "(readers)"

// readerScriptCases are the scripts group's checks of the read-write lock: core's acquire,
// extend and release in mode "r", and the writers' acquire and release where readers meet
// them. Readers hold a lock together, each with an entry in the readers key (a sorted set of
// tokens by the server time in milliseconds at which the holding ends), while the lock key
// holds readersHold; a reader's acquire and release take the six KEYS of a writer's, its
// extend the lock key and the readers key.
func readerScriptCases() []scriptCase {
	return []scriptCase{
		{"acquire/reader-free", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			before := serverMS(t, addr, k.Lock)
			got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), readerArgs(ours, ttl)...)
			after := serverMS(t, addr, k.Lock)
			assert.Equal(t, []int64{1, 0}, got, "acquire (mode r) of a free lock replied %s, want {1, 0}: the Node must return the script's whole integer array", format(got))
			assert.Equal(t, readersHold, admin(t, addr, "GET", k.Lock), "after acquire (mode r) of a free lock, the lock key must hold the readers' marker %q: the Node must pass KEYS and ARGV in order, unchanged", readersHold)
			wantPTTL(t, addr, k.Lock, 1, ttlMS, "after acquire (mode r) with TTL "+ttl+" ms, of the lock key")
			wantEntry(t, addr, k, ours, before+ttlMS, after+ttlMS, "after acquire (mode r) with TTL "+ttl+" ms")
			wantPTTL(t, addr, k.Readers, 1, ttlMS, "after acquire (mode r) with TTL "+ttl+" ms, of the readers key")
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Fence), "acquire (mode r) must not touch the fence counter (a reader advances none): the Node must pass KEYS in order")
		}},
		{"acquire/reader-shared", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			for _, r := range []struct{ token, ttl string }{{ours, "5000"}, {theirs, ttl}} {
				got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), readerArgs(r.token, r.ttl)...)
				assert.Equal(t, []int64{1, 0}, got, "acquire (mode r) by reader %q with TTL %s ms of a free lock or one that readers hold replied %s, want {1, 0}", r.token, r.ttl, format(got))
			}
			assert.Equal(t, int64(2), admin(t, addr, "ZCARD", k.Readers), "two readers granted the lock must each have an entry in the readers key")
			assert.Equal(t, readersHold, admin(t, addr, "GET", k.Lock), "while two readers hold the lock, the lock key must hold the readers' marker")
			wantPTTL(t, addr, k.Lock, 5001, ttlMS, "after readers with TTLs 5000 and "+ttl+" ms took their shares, the lock key must cover the longer one")
		}},
		{"acquire/reader-writer-holds", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, theirs, "PX", "5000")
			got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), readerArgs(ours, ttl)...)
			require.Len(t, got, 2, "acquire (mode r) of a lock a writer holds replied %s, want {0, pttl}", format(got))
			assert.Equal(t, int64(0), got[0], "acquire (mode r) of a lock a writer holds replied %s, want {0, pttl}", format(got))
			assert.True(t, got[1] > 0 && got[1] <= 5000, "acquire (mode r) of a lock a writer holds for 5000 ms more replied pttl %d, want 0 < pttl <= 5000", got[1])
			// A reader that waits is queued, its attempt recorded as a reader's.
			got = mustEval(t, n, script(t, "acquire"), acquireKeys(k), readerWaiterArgs("r-token", ttl, "r", "7")...)
			assert.Equal(t, int64(0), got[0], "acquire (mode r) by reader waiter r of a lock a writer holds replied %s, want {0, pttl}", format(got))
			assert.Equal(t, "7", admin(t, addr, "ZSCORE", k.Queue, "r"), "a reader waiter refused a lock a writer holds must be queued at its ticket: the Node must pass every KEYS and ARGV in order")
			assert.Equal(t, "r "+k.Wake("r"), admin(t, addr, "HGET", k.Waiters, "r"), "a queued reader waiter must be recorded as \"r <its channel>\": the Node must pass every KEYS and ARGV in order, unchanged")
			assert.Equal(t, theirs, admin(t, addr, "GET", k.Lock), "acquire (mode r) must not touch a lock a writer holds")
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Readers), "a reader refused a lock a writer holds must get no entry in the readers key")
		}},
		{"acquire/reader-writer-waiting", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), readerArgs(ours, ttl)...)
			require.Equal(t, []int64{1, 0}, got, "acquire (mode r) of a free lock replied %s, want {1, 0}", format(got))
			got = mustEval(t, n, script(t, "acquire"), acquireKeys(k), waiterArgs("w-token", ttl, "w", "1")...)
			require.Equal(t, int64(0), got[0], "acquire by writer waiter w while a reader holds the lock replied %s, want {0, pttl}", format(got))
			require.Equal(t, "1", admin(t, addr, "ZSCORE", k.Queue, "w"), "a writer waiter refused while a reader holds the lock must be queued")

			got = mustEval(t, n, script(t, "acquire"), acquireKeys(k), readerArgs(theirs, ttl)...)
			require.Len(t, got, 2, "acquire (mode r) by a reader that does not wait, with writer w waiting, replied %s, want {0, pttl}", format(got))
			assert.Equal(t, int64(0), got[0], "acquire (mode r) by a reader that does not wait, while a reader holds the lock and writer w waits, replied %s, want {0, pttl}: a waiting writer blocks new readers", format(got))
			assert.True(t, got[1] > 0 && got[1] <= ttlMS, "acquire (mode r) refused while a reader holds the lock for "+ttl+" ms replied pttl %d, want the readers' remaining time, 0 < pttl <= "+ttl, got[1])
			assert.Nil(t, admin(t, addr, "ZSCORE", k.Readers, theirs), "a reader refused behind a waiting writer must get no entry")

			got = mustEval(t, n, script(t, "acquire"), acquireKeys(k), readerWaiterArgs("r-token", ttl, "r", "2")...)
			assert.Equal(t, int64(0), got[0], "acquire (mode r) by reader waiter r (ticket 2), with writer w (ticket 1) waiting, replied %s, want {0, pttl}: a waiting writer blocks the readers queued after it", format(got))
			assert.Equal(t, "2", admin(t, addr, "ZSCORE", k.Queue, "r"), "a reader waiter refused behind a waiting writer must be queued at its ticket")
			assert.Nil(t, admin(t, addr, "ZSCORE", k.Readers, "r-token"), "a reader waiter refused behind a waiting writer must get no entry")
			assert.Equal(t, int64(1), admin(t, addr, "ZCARD", k.Readers), "refused readers must leave the holding reader's entry alone")
			assert.Equal(t, readersHold, admin(t, addr, "GET", k.Lock), "refused readers must leave the readers' marker alone")
		}},
		{"acquire/readers-hold", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), readerArgs(ours, ttl)...)
			require.Equal(t, []int64{1, 0}, got, "acquire (mode r) of a free lock replied %s, want {1, 0}", format(got))
			got = mustEval(t, n, script(t, "acquire"), acquireKeys(k), acquireArgs(theirs, ttl)...)
			require.Len(t, got, 2, "acquire of a lock a reader holds replied %s, want {0, pttl}", format(got))
			assert.Equal(t, int64(0), got[0], "acquire of a lock a reader holds replied %s, want {0, pttl}: a writer must find the readers' marker held", format(got))
			assert.True(t, got[1] > 0 && got[1] <= ttlMS, "acquire of a lock a reader holds for "+ttl+" ms replied pttl %d, want 0 < pttl <= "+ttl, got[1])
			assert.Equal(t, readersHold, admin(t, addr, "GET", k.Lock), "a writer refused while a reader holds the lock must leave the readers' marker alone")
			assert.NotNil(t, admin(t, addr, "ZSCORE", k.Readers, ours), "a writer refused while a reader holds the lock must leave the reader's entry alone")
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Fence), "a writer refused while a reader holds the lock must not advance the fence counter")
		}},
		{"extend/reader-ours", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), readerArgs(ours, "5000")...)
			require.Equal(t, []int64{1, 0}, got, "acquire (mode r) of a free lock replied %s, want {1, 0}", format(got))
			before := serverMS(t, addr, k.Lock)
			got = mustEval(t, n, script(t, "extend"), readerExtendKeys(k), ours, ttl, "r")
			after := serverMS(t, addr, k.Lock)
			assert.Equal(t, []int64{1}, got, "extend (mode r) of our live share replied %s, want {1}", format(got))
			wantEntry(t, addr, k, ours, before+ttlMS, after+ttlMS, "after extending our share from 5000 ms to "+ttl+" ms")
			wantPTTL(t, addr, k.Lock, 5001, ttlMS, "after extending our share from 5000 ms to "+ttl+" ms, of the lock key")
			wantPTTL(t, addr, k.Readers, 5001, ttlMS, "after extending our share from 5000 ms to "+ttl+" ms, of the readers key")
		}},
		{"extend/reader-gone", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEval(t, n, script(t, "extend"), readerExtendKeys(k), ours, ttl, "r")
			assert.Equal(t, []int64{0}, got, "extend (mode r) of a share on an empty server replied %s, want {0}", format(got))
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Lock), "extend (mode r) must never re-create a missing lock key")
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Readers), "extend (mode r) must never re-create a missing readers' entry")

			// Another reader's share is not ours.
			got = mustEval(t, n, script(t, "acquire"), acquireKeys(k), readerArgs(theirs, ttl)...)
			require.Equal(t, []int64{1, 0}, got, "acquire (mode r) of a free lock replied %s, want {1, 0}", format(got))
			got = mustEval(t, n, script(t, "extend"), readerExtendKeys(k), ours, ttl, "r")
			assert.Equal(t, []int64{0}, got, "extend (mode r) of a share while only another reader holds the lock replied %s, want {0}", format(got))
			assert.Nil(t, admin(t, addr, "ZSCORE", k.Readers, ours), "extend (mode r) must never add an entry")

			// An entry whose time is up is gone, though the set still has it.
			expired := strconv.FormatInt(serverMS(t, addr, k.Lock)-1000, 10)
			admin(t, addr, "ZADD", k.Readers, expired, ours)
			got = mustEval(t, n, script(t, "extend"), readerExtendKeys(k), ours, ttl, "r")
			assert.Equal(t, []int64{0}, got, "extend (mode r) of our share whose time ended a second ago replied %s, want {0}", format(got))
			assert.Equal(t, expired, admin(t, addr, "ZSCORE", k.Readers, ours), "extend (mode r) must not renew an entry whose time is up")
		}},
		{"extend/reader-writer-holds", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			// Our entry is live, but the lock key is a writer's: readers no longer hold it.
			admin(t, addr, "SET", k.Lock, theirs, "PX", "5000")
			live := strconv.FormatInt(serverMS(t, addr, k.Lock)+5000, 10)
			admin(t, addr, "ZADD", k.Readers, live, ours)
			got := mustEval(t, n, script(t, "extend"), readerExtendKeys(k), ours, ttl, "r")
			assert.Equal(t, []int64{0}, got, "extend (mode r) of our entry while a writer holds the lock key replied %s, want {0}", format(got))
			assert.Equal(t, theirs, admin(t, addr, "GET", k.Lock), "extend (mode r) must not touch a writer's lock")
			wantPTTL(t, addr, k.Lock, 1, 5000, "after a refused extend (mode r) of a lock a writer holds for 5000 ms")
			assert.Equal(t, live, admin(t, addr, "ZSCORE", k.Readers, ours), "a refused extend (mode r) must leave the entry alone")
		}},
		{"release/reader-last-wakes-writer", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), readerArgs(ours, ttl)...)
			require.Equal(t, []int64{1, 0}, got, "acquire by a reader of a free lock replied %s, want {1, 0}", format(got))
			got = mustEval(t, n, script(t, "acquire"), acquireKeys(k), waiterArgs("w-token", ttl, "w", "1")...)
			require.Equal(t, int64(0), got[0], "acquire by writer waiter w while a reader holds the lock replied %s, want {0, pttl}", format(got))
			// On a cluster, a script's PUBLISH counts the receivers on its own master only.
			sub, err := subscribe(owner(addr, k.Wake("w")), k.Wake("w"))
			require.NoError(t, err, "conformance: subscribe to the writer waiter's channel")
			defer sub.close()
			got = mustEval(t, n, script(t, "release"), releaseKeys(k), releaseArgs(ours, "r")...)
			assert.Equal(t, []int64{1, 1}, got, "release (mode r) of the last reader's share, with writer waiter w listening, replied %s, want {1, 1}", format(got))
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Lock), "release of the last reader's share must free the lock key (the queue wakes, never grants)")
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Readers), "release of the last reader's share must delete its entry")
			wantWake(t, sub, k.Wake("w"), "release of the last reader's share must wake the waiting writer on its channel")
			got = mustEval(t, n, script(t, "acquire"), acquireKeys(k), waiterArgs("w-token", ttl, "w", "1")...)
			assert.Equal(t, int64(1), got[0], "acquire by the woken writer waiter replied %s, want {1, fence}", format(got))
			assert.Equal(t, "w-token", admin(t, addr, "GET", k.Lock), "the woken writer's acquire must take the lock")
		}},
		{"release/reader-not-last", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			for _, r := range []struct{ token, ttl string }{{ours, ttl}, {theirs, "5000"}} {
				got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), readerArgs(r.token, r.ttl)...)
				require.Equal(t, []int64{1, 0}, got, "acquire (mode r) by reader %q replied %s, want {1, 0}", r.token, format(got))
			}
			got := mustEval(t, n, script(t, "release"), releaseKeys(k), releaseArgs(ours, "r")...)
			assert.Equal(t, []int64{1, 0}, got, "release (mode r) of our share while another reader holds the lock replied %s, want {1, 0}", format(got))
			assert.Equal(t, readersHold, admin(t, addr, "GET", k.Lock), "while another reader holds the lock, release (mode r) must keep the readers' marker")
			assert.Equal(t, int64(1), admin(t, addr, "ZCARD", k.Readers), "release (mode r) must delete our entry only")
			assert.Nil(t, admin(t, addr, "ZSCORE", k.Readers, ours), "release (mode r) must delete our entry")
			wantPTTL(t, addr, k.Lock, 1, 5000, "after the reader with "+ttl+" ms let go, the lock key must be kept only as long as the remaining reader's 5000 ms")
			got = mustEval(t, n, script(t, "release"), releaseKeys(k), releaseArgs(ours, "r")...)
			assert.Equal(t, []int64{0, 0, 1}, got, "a second release (mode r) of our share replied %s, want {0, 0, 1} (nothing of ours here, and no other owner)", format(got))
		}},
		{"release/reader-writer-holds", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, theirs, "PX", ttl)
			got := mustEval(t, n, script(t, "release"), releaseKeys(k), releaseArgs(ours, "r")...)
			assert.Equal(t, []int64{0, 0}, got, "release (mode r) while a writer holds the lock replied %s, want {0, 0}", format(got))
			assert.Equal(t, theirs, admin(t, addr, "GET", k.Lock), "release (mode r) must not delete a writer's lock")
		}},
		{"release/wakes-readers", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, ours, "PX", ttl)
			for _, r := range []struct{ id, ticket string }{{"r1", "1"}, {"r2", "2"}} {
				got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), readerWaiterArgs(r.id+"-token", ttl, r.id, r.ticket)...)
				require.Equal(t, int64(0), got[0], "acquire (mode r) by reader waiter %s of a lock a writer holds replied %s, want {0, pttl}", r.id, format(got))
			}
			got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), waiterArgs("w3-token", ttl, "w3", "3")...)
			require.Equal(t, int64(0), got[0], "acquire by writer waiter w3 of a held lock replied %s, want {0, pttl}", format(got))
			// On a cluster, a script's PUBLISH counts the receivers on its own master only.
			subs := map[string]*subscription{}
			for _, id := range []string{"r1", "r2", "w3"} {
				sub, err := subscribe(owner(addr, k.Wake(id)), k.Wake(id))
				require.NoError(t, err, "conformance: subscribe to waiter %s's channel", id)
				defer sub.close()
				subs[id] = sub
			}
			got = mustEval(t, n, script(t, "release"), releaseKeys(k), releaseArgs(ours, "w")...)
			assert.Equal(t, []int64{1, 2}, got, "release of our lock with reader waiters r1, r2 and then writer waiter w3 queued and listening replied %s, want {1, 2}: both readers are woken, the writer behind them is not", format(got))
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Lock), "release of our lock must delete it (the queue wakes, never grants)")
			for _, id := range []string{"r1", "r2"} {
				wantWake(t, subs[id], k.Wake(id), "release must wake reader waiter "+id+" on its channel")
			}
			_, _, woken := subs["w3"].next(100 * time.Millisecond)
			assert.False(t, woken, "release woke writer waiter w3 too, behind the readers")
			for _, r := range []struct{ id, ticket string }{{"r1", "1"}, {"r2", "2"}} {
				got = mustEval(t, n, script(t, "acquire"), acquireKeys(k), readerWaiterArgs(r.id+"-token", ttl, r.id, r.ticket)...)
				assert.Equal(t, []int64{1, 0}, got, "acquire by woken reader waiter %s replied %s, want {1, 0}", r.id, format(got))
				assert.NotNil(t, admin(t, addr, "ZSCORE", k.Readers, r.id+"-token"), "the woken reader waiter %s's acquire must give it an entry in the readers key", r.id)
				assert.Nil(t, admin(t, addr, "ZSCORE", k.Queue, r.id), "reader waiter %s, holding a share, must leave the queue", r.id)
			}
			assert.Equal(t, readersHold, admin(t, addr, "GET", k.Lock), "while the woken readers hold the lock, the lock key must hold the readers' marker")
			assert.Equal(t, "3", admin(t, addr, "ZSCORE", k.Queue, "w3"), "writer waiter w3, behind the readers, must stay queued")
		}},
	}
}

// serverMS returns the server time in milliseconds of the master of addr that serves key:
// the clock the scripts read.
func serverMS(t *testing.T, addr, key string) int64 {
	t.Helper()
	v, _ := adminAt(t, addr, key, "TIME").([]any)
	require.Len(t, v, 2, "conformance: TIME replied %v", v)
	s, _ := v[0].(string)
	us, _ := v[1].(string)
	sec, err1 := strconv.ParseInt(s, 10, 64)
	usec, err2 := strconv.ParseInt(us, 10, 64)
	require.NoError(t, err1, "conformance: TIME replied %v", v)
	require.NoError(t, err2, "conformance: TIME replied %v", v)
	return sec*1000 + usec/1000
}

// wantEntry checks that the readers key of k has an entry for token whose time ends within
// [lo, hi] (server milliseconds).
func wantEntry(t *testing.T, addr string, k core.Keys, token string, lo, hi int64, when string) {
	t.Helper()
	v := admin(t, addr, "ZSCORE", k.Readers, token)
	s, isString := v.(string)
	if !isString {
		t.Errorf("%s, the readers key %q has no entry for token %q: the Node must pass KEYS and ARGV in order, unchanged", when, k.Readers, token)
		return
	}
	score, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err, "conformance: ZSCORE replied %q", s)
	assert.True(t, int64(score) >= lo && int64(score) <= hi, "%s, the reader's entry ends at %d (server ms), want %d to %d: now plus the TTL (the Node must pass ARGV unchanged)", when, int64(score), lo, hi)
}

// readerSetCases are the sets group's checks of reader sets: core's acquire, extend and
// release in mode "r" for a reader over the three names of a set (the k they get: setNames
// under setPrefix), and the writers' release where a reader set waits. acquire takes a
// share of every name or of none; a reader set refused is queued in every name's queue with
// one id and ticket, recorded in each as "r" and its first name's channel; extend renews
// every share or none; release lets go of every share; a release that frees a name whose
// first waiter is a reader set wakes it on its first name's channel, and the set then takes
// its shares with acquire, once each name is free or read and it goes first in each queue.
func readerSetCases() []scriptCase {
	return []scriptCase{
		{"acquire/reader-free", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			before := serverMS(t, addr, k.Lock)
			got := mustEvalSet(t, n, "acquire", k, readerArgs(ours, ttl)...)
			after := serverMS(t, addr, k.Lock)
			assert.Equal(t, []int64{1, 0}, got, "acquire (mode r) of a set of 3 free names replied %s, want {1, 0}", format(got))
			for _, name := range k.Set {
				when := fmt.Sprintf("after acquire (mode r) of a set of 3 free names with TTL %s ms, of name %q", ttl, name.Name)
				assert.Equal(t, readersHold, admin(t, addr, "GET", name.Lock), "%s, the lock key must hold the readers' marker %q: the Node must pass every name's six KEYS, name after name", when, readersHold)
				wantPTTL(t, addr, name.Lock, 1, ttlMS, when+", of the lock key")
				wantEntry(t, addr, name, ours, before+ttlMS, after+ttlMS, when)
				wantPTTL(t, addr, name.Readers, 1, ttlMS, when+", of the readers key")
				assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Fence), "%s: a reader advances no fence counter", when)
				assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Queue), "%s: a reader that does not wait queues nowhere", when)
			}
		}},
		{"acquire/reader-overlapping", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			other := setKeys(t, setPrefix(t), "b", "c", "d")
			for _, r := range []struct {
				token, ttl string
				k          core.Keys
			}{{ours, "5000", k}, {theirs, ttl, other}} {
				got := mustEvalSet(t, n, "acquire", r.k, readerArgs(r.token, r.ttl)...)
				assert.Equal(t, []int64{1, 0}, got, "acquire (mode r) by reader %q with TTL %s ms of the set %s, each name free or read, replied %s, want {1, 0}", r.token, r.ttl, r.k.Name, format(got))
			}
			for _, c := range []struct {
				name   core.Keys
				tokens []string
				lo, hi int64 // of the lock key's PTTL
			}{
				{k.Set[0], []string{ours}, 1, 5000},
				{k.Set[1], []string{ours, theirs}, 5001, ttlMS},
				{k.Set[2], []string{ours, theirs}, 5001, ttlMS},
				{other.Set[2], []string{theirs}, 1, ttlMS},
			} {
				when := fmt.Sprintf("after acquire (mode r) by reader %q of the set %s (TTL 5000 ms) and by reader %q of the set %s (TTL %s ms), of name %q", ours, k.Name, theirs, other.Name, ttl, c.name.Name)
				assert.Equal(t, readersHold, admin(t, addr, "GET", c.name.Lock), "%s, the lock key must hold the readers' marker", when)
				assert.Equal(t, int64(len(c.tokens)), admin(t, addr, "ZCARD", c.name.Readers), "%s, the readers key must hold an entry for each reader whose set has the name", when)
				for _, token := range c.tokens {
					assert.NotNil(t, admin(t, addr, "ZSCORE", c.name.Readers, token), "%s, reader %q must have an entry", when, token)
				}
				wantPTTL(t, addr, c.name.Lock, c.lo, c.hi, when+", the lock key must cover the longest share")
			}
		}},
		{"acquire/reader-writer-holds", func(t *testing.T, n core.Node, addr string, _ core.Keys) {
			for held := range setNames { // each name in turn, with keys of its own
				k := setKeys(t, setPrefix(t)+strconv.Itoa(held)+":", setNames...)
				admin(t, addr, "SET", k.Set[held].Lock, theirs, "PX", "5000")
				what := fmt.Sprintf("acquire (mode r) by a reader that does not wait of a set of 3 names whose name %q a writer holds", k.Set[held].Name)
				got := mustEvalSet(t, n, "acquire", k, readerArgs(ours, ttl)...)
				require.Len(t, got, 2, "%s replied %s, want {0, pttl}", what, format(got))
				assert.Equal(t, int64(0), got[0], "%s replied %s, want {0, pttl}: a reader set takes a share of every name or of none", what, format(got))
				for _, name := range k.Set {
					assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Readers), "%s gave name %q a share: a reader set takes a share of every name or of none", what, name.Name)
					assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Queue), "%s queued it for name %q: a reader that does not wait queues nowhere", what, name.Name)
				}
				what = fmt.Sprintf("acquire (mode r) by reader waiter r of a set of 3 names whose name %q a writer holds", k.Set[held].Name)
				readerHeldSet(t, n, addr, k, held, what)
				readerHeldSet(t, n, addr, k, held, "the same "+what+" again, with the same token (a retry after a lost reply),")
			}
		}},
		{"acquire/reader-waiter-ahead", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			// Writer waiter w (ticket 1) is queued for the last name alone, which is free again.
			last := k.Set[2]
			admin(t, addr, "SET", last.Lock, theirs, "PX", ttl)
			got := mustEval(t, n, script(t, "acquire"), acquireKeys(last), waiterArgs("w-token", ttl, "w", "1")...)
			require.Equal(t, int64(0), got[0], "acquire by writer waiter w of a held name replied %s, want {0, pttl}", format(got))
			admin(t, addr, "DEL", last.Lock)
			got = mustEvalSet(t, n, "acquire", k, readerWaiterArgs("r-token", ttl, "r", "2")...)
			assert.Equal(t, []int64{0, 0}, got, "acquire (mode r) by reader waiter r (ticket 2) of a set of 3 free names, writer waiter w (ticket 1) first in name %q's queue, replied %s, want {0, 0}: a live waiter ahead in some queue goes first", last.Name, format(got))
			for _, name := range k.Set {
				when := fmt.Sprintf("after acquire (mode r) by reader waiter r behind writer waiter w in name %q's queue, of name %q", last.Name, name.Name)
				assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Lock), "%s: a reader set takes a share of every name or of none", when)
				assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Readers), "%s: a reader set takes a share of every name or of none", when)
				assert.Equal(t, "2", admin(t, addr, "ZSCORE", name.Queue, "r"), "%s, r must be queued at its ticket in every name's queue", when)
				assert.Equal(t, readerSetRecord(k, "r"), admin(t, addr, "HGET", name.Waiters, "r"), "%s, the waiters hash must record r as a reader, with its channel (the set's first name's)", when)
			}
			assert.Equal(t, "1", admin(t, addr, "ZSCORE", last.Queue, "w"), "writer waiter w must stay queued, first")
		}},
		{"extend/reader-ours", func(t *testing.T, n core.Node, addr string, _ core.Keys) {
			for lost := range setNames { // each name's share lost in turn, with keys of its own
				k := setKeys(t, setPrefix(t)+strconv.Itoa(lost)+":", setNames...)
				got := mustEvalSet(t, n, "acquire", k, readerArgs(ours, "5000")...)
				require.Equal(t, []int64{1, 0}, got, "acquire (mode r) of a set of 3 free names replied %s, want {1, 0}", format(got))
				before := serverMS(t, addr, k.Lock)
				got = mustEval(t, n, script(t, "extend"), setReaderExtendKeys(k), ours, ttl, "r")
				after := serverMS(t, addr, k.Lock)
				assert.Equal(t, []int64{1}, got, "extend (mode r) of our shares of a set of 3 names replied %s, want {1}", format(got))
				for _, name := range k.Set {
					when := fmt.Sprintf("after extending our shares of a set from 5000 ms to %s ms, of name %q", ttl, name.Name)
					wantEntry(t, addr, name, ours, before+ttlMS, after+ttlMS, when)
					wantPTTL(t, addr, name.Lock, 5001, ttlMS, when+", of the lock key (each name's lock key and readers key, name after name, must arrive)")
					wantPTTL(t, addr, name.Readers, 5001, ttlMS, when+", of the readers key")
				}
				gone := k.Set[lost]
				admin(t, addr, "ZREM", gone.Readers, ours)
				scores := make([]any, len(k.Set))
				for i, name := range k.Set {
					scores[i] = admin(t, addr, "ZSCORE", name.Readers, ours)
				}
				got = mustEval(t, n, script(t, "extend"), setReaderExtendKeys(k), ours, "20000", "r")
				assert.Equal(t, []int64{0}, got, "extend (mode r) of our shares of a set of 3 names, our share of name %q gone, replied %s, want {0}", gone.Name, format(got))
				for i, name := range k.Set {
					assert.Equal(t, scores[i], admin(t, addr, "ZSCORE", name.Readers, ours), "extend (mode r) with our share of name %q gone changed our entry of name %q: a set's shares are renewed all or none", gone.Name, name.Name)
					wantPTTL(t, addr, name.Lock, 1, ttlMS, fmt.Sprintf("after a refused extend (mode r) to 20000 ms with our share of name %q gone, of the lock key of name %q", gone.Name, name.Name))
				}
			}
		}},
		{"release/reader-ours", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEvalSet(t, n, "acquire", k, readerArgs(ours, ttl)...)
			require.Equal(t, []int64{1, 0}, got, "acquire (mode r) of a set of 3 free names replied %s, want {1, 0}", format(got))
			got = mustEvalSet(t, n, "release", k, releaseArgs(ours, "r")...)
			assert.Equal(t, []int64{1, 0}, got, "release (mode r) of our shares of a set of 3 names replied %s, want {1, 0}", format(got))
			for _, name := range k.Set {
				assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Lock), "release (mode r) of our shares of a set, the last of each name, must free the lock key of every name, of %q too: the Node must pass every name's six KEYS, name after name", name.Name)
				assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Readers), "release (mode r) of our shares of a set must delete our entry of every name, of %q too", name.Name)
			}
		}},
		{"release/reader-not-last", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEvalSet(t, n, "acquire", k, readerArgs(ours, ttl)...)
			require.Equal(t, []int64{1, 0}, got, "acquire (mode r) of a set of 3 free names replied %s, want {1, 0}", format(got))
			shared := k.Set[1]
			got = mustEval(t, n, script(t, "acquire"), acquireKeys(shared), readerArgs(theirs, "5000")...)
			require.Equal(t, []int64{1, 0}, got, "acquire (mode r) by another reader of name %q, which our set reads, replied %s, want {1, 0}", shared.Name, format(got))
			got = mustEvalSet(t, n, "release", k, releaseArgs(ours, "r")...)
			assert.Equal(t, []int64{1, 0}, got, "release (mode r) of our shares of a set of 3 names, another reader on name %q, replied %s, want {1, 0}", shared.Name, format(got))
			for _, name := range k.Set {
				assert.Nil(t, admin(t, addr, "ZSCORE", name.Readers, ours), "release (mode r) of our shares of a set must delete our entry of every name, of %q too", name.Name)
				if name.Lock != shared.Lock {
					assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Lock), "release (mode r) of our shares of a set must free the lock key of name %q, which no other reader holds", name.Name)
				}
			}
			assert.Equal(t, readersHold, admin(t, addr, "GET", shared.Lock), "release (mode r) of our shares of a set must keep the readers' marker of name %q, which another reader holds", shared.Name)
			assert.NotNil(t, admin(t, addr, "ZSCORE", shared.Readers, theirs), "release (mode r) of our shares of a set must leave the other reader's entry of name %q alone", shared.Name)
			wantPTTL(t, addr, shared.Lock, 1, 5000, "after our set let go, the lock key of name "+strconv.Quote(shared.Name)+" must be kept only as long as the other reader's 5000 ms")
		}},
		{"release/wakes-reader-set", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			held := k.Set[1]
			admin(t, addr, "SET", held.Lock, ours, "PX", ttl)
			got := mustEvalSet(t, n, "acquire", k, readerWaiterArgs("r-token", ttl, "r", "1")...)
			require.Equal(t, int64(0), got[0], "acquire by reader waiter r of a set of 3 names whose name %q a writer holds replied %s, want {0, pttl}", held.Name, format(got))
			// A reader set is woken on its first name's channel, whichever name was freed. On a
			// cluster, a script's PUBLISH counts the receivers on its own master only.
			first, err := subscribe(owner(addr, k.Wake("r")), k.Wake("r"))
			require.NoError(t, err, "conformance: subscribe to the set's first name's channel for the waiter")
			defer first.close()
			own, err := subscribe(owner(addr, held.Wake("r")), held.Wake("r"))
			require.NoError(t, err, "conformance: subscribe to the freed name's channel for the waiter")
			defer own.close()
			got = mustEval(t, n, script(t, "release"), releaseKeys(held), releaseArgs(ours, "w")...)
			assert.Equal(t, []int64{1, 1}, got, "release of our lock of name %q, with reader set waiter r first in each name's queue and listening, replied %s, want {1, 1}", held.Name, format(got))
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", held.Lock), "release of our lock of name %q must delete it (the queue wakes, never grants)", held.Name)
			wantWake(t, first, k.Wake("r"), "release must wake reader set waiter r on its first name's channel")
			_, _, woken := own.next(100 * time.Millisecond)
			assert.False(t, woken, "release woke reader set waiter r on the freed name %q's channel %q: a reader set is woken on its first name's channel %q only", held.Name, held.Wake("r"), k.Wake("r"))

			before := serverMS(t, addr, k.Lock)
			got = mustEvalSet(t, n, "acquire", k, readerWaiterArgs("r-token", ttl, "r", "1")...)
			after := serverMS(t, addr, k.Lock)
			assert.Equal(t, []int64{1, 0}, got, "acquire by the woken reader set waiter r of its 3 names, each free, replied %s, want {1, 0}", format(got))
			for _, name := range k.Set {
				when := fmt.Sprintf("after the woken reader set waiter r's acquire, of name %q", name.Name)
				assert.Equal(t, readersHold, admin(t, addr, "GET", name.Lock), "%s, the lock key must hold the readers' marker: a reader set takes a share of every name", when)
				wantPTTL(t, addr, name.Lock, 1, ttlMS, when+", of the lock key")
				wantEntry(t, addr, name, "r-token", before+ttlMS, after+ttlMS, when)
				assert.Nil(t, admin(t, addr, "ZSCORE", name.Queue, "r"), "%s, reader set waiter r, holding its shares, must leave every queue", when)
				assert.Nil(t, admin(t, addr, "HGET", name.Waiters, "r"), "%s, reader set waiter r, holding its shares, must leave every waiters hash", when)
			}
		}},
		{"release/readers-behind-reader-set", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			held, firstName, last := k.Set[1], k.Set[0], k.Set[2]
			admin(t, addr, "SET", held.Lock, ours, "PX", ttl)
			got := mustEvalSet(t, n, "acquire", k, readerWaiterArgs("r-token", ttl, "r", "1")...)
			require.Equal(t, int64(0), got[0], "acquire by reader waiter r of a set of 3 names whose name %q a writer holds replied %s, want {0, pttl}", held.Name, format(got))
			// Behind r: reader waiter r2 of the last name alone, writer waiter w3 of the first alone.
			got = mustEval(t, n, script(t, "acquire"), acquireKeys(last), readerWaiterArgs("r2-token", ttl, "r2", "2")...)
			require.Equal(t, []int64{1, 0}, got, "acquire by reader waiter r2 (ticket 2) of free name %q, reader set waiter r (ticket 1) ahead, replied %s, want {1, 0}: a reader waits for no reader ahead", last.Name, format(got))
			assert.Nil(t, admin(t, addr, "ZSCORE", last.Queue, "r2"), "reader waiter r2, holding its share, must not be queued")
			got = mustEval(t, n, script(t, "acquire"), acquireKeys(firstName), waiterArgs("w3-token", ttl, "w3", "3")...)
			require.Equal(t, []int64{0, 0}, got, "acquire by writer waiter w3 (ticket 3) of free name %q, reader set waiter r (ticket 1) ahead, replied %s, want {0, 0}", firstName.Name, format(got))
			// On a cluster, a script's PUBLISH counts the receivers on its own master only.
			subs := map[string]*subscription{}
			for id, ch := range map[string]string{"r": k.Wake("r"), "r2": last.Wake("r2"), "w3": firstName.Wake("w3")} {
				sub, err := subscribe(owner(addr, ch), ch)
				require.NoError(t, err, "conformance: subscribe to waiter %s's channel", id)
				defer sub.close()
				subs[id] = sub
			}
			got = mustEval(t, n, script(t, "release"), releaseKeys(held), releaseArgs(ours, "w")...)
			assert.Equal(t, []int64{1, 1}, got, "release of our lock of name %q, whose queue holds reader set waiter r alone, listening, replied %s, want {1, 1}: a release wakes in the queue of the names it frees", held.Name, format(got))
			wantWake(t, subs["r"], k.Wake("r"), "release must wake reader set waiter r on its first name's channel")
			got = mustEvalSet(t, n, "acquire", k, readerWaiterArgs("r-token", ttl, "r", "1")...)
			require.Equal(t, []int64{1, 0}, got, "acquire by the woken reader set waiter r of its 3 names replied %s, want {1, 0}", format(got))
			assert.Equal(t, int64(2), admin(t, addr, "ZCARD", last.Readers), "after r's acquire, name %q's readers key must hold the entries of r2 and r", last.Name)
			// r holds: a writer waits for the readers.
			got = mustEval(t, n, script(t, "acquire"), acquireKeys(firstName), waiterArgs("w3-token", ttl, "w3", "3")...)
			require.Len(t, got, 2, "acquire by writer waiter w3 of name %q, which reader set r reads, replied %s, want {0, pttl}", firstName.Name, format(got))
			assert.Equal(t, int64(0), got[0], "acquire by writer waiter w3 of name %q, which reader set r reads, replied %s, want {0, pttl}", firstName.Name, format(got))
			assert.Equal(t, "3", admin(t, addr, "ZSCORE", firstName.Queue, "w3"), "writer waiter w3, refused while readers hold name %q, must stay queued", firstName.Name)
			for _, id := range []string{"r2", "w3"} {
				_, _, woken := subs[id].next(100 * time.Millisecond)
				assert.False(t, woken, "release of name %q woke %s, which waits in no queue of that name", held.Name, id)
			}
		}},
		{"release/readers-wait", func(t *testing.T, n core.Node, addr string, _ core.Keys) {
			for i, c := range []struct {
				why     string
				prepare func(t *testing.T, last core.Keys) // makes the last name not r's to have
			}{
				{"a writer holds the last name", func(t *testing.T, last core.Keys) {
					admin(t, addr, "SET", last.Lock, theirs, "PX", ttl)
				}},
				{"writer waiter w0 (ticket 0) is first in the last name's queue", func(t *testing.T, last core.Keys) {
					admin(t, addr, "SET", last.Lock, theirs, "PX", ttl)
					got := mustEval(t, n, script(t, "acquire"), acquireKeys(last), waiterArgs("w0-token", ttl, "w0", "0")...)
					require.Equal(t, int64(0), got[0], "acquire by writer waiter w0 of a held name replied %s, want {0, pttl}", format(got))
					admin(t, addr, "DEL", last.Lock)
				}},
			} {
				k := setKeys(t, setPrefix(t)+strconv.Itoa(i)+":", setNames...)
				held, last := k.Set[1], k.Set[2]
				admin(t, addr, "SET", held.Lock, ours, "PX", ttl)
				c.prepare(t, last)
				got := mustEvalSet(t, n, "acquire", k, readerWaiterArgs("r-token", ttl, "r", "1")...)
				require.Equal(t, int64(0), got[0], "acquire (mode r) by reader waiter r of a set of 3 names whose name %q a writer holds, and %s, replied %s, want {0, pttl}", held.Name, c.why, format(got))
				first, err := subscribe(owner(addr, k.Wake("r")), k.Wake("r"))
				require.NoError(t, err, "conformance: subscribe to the set's first name's channel for the waiter")
				defer first.close()
				got = mustEval(t, n, script(t, "release"), releaseKeys(held), releaseArgs(ours, "w")...)
				what := fmt.Sprintf("release of our lock of name %q, reader set waiter r first in its queue, when %s", held.Name, c.why)
				assert.Equal(t, []int64{1, 1}, got, "%s replied %s, want {1, 1}: the first waiter of the freed name is woken", what, format(got))
				wantWake(t, first, k.Wake("r"), what+" must wake r on its first name's channel")
				got = mustEvalSet(t, n, "acquire", k, readerWaiterArgs("r-token", ttl, "r", "1")...)
				require.Len(t, got, 2, "acquire by the woken reader set waiter r, when %s, replied %s, want {0, pttl}", c.why, format(got))
				assert.Equal(t, int64(0), got[0], "acquire by the woken reader set waiter r, when %s, replied %s, want {0, pttl}: a reader set takes a share of every name or of none", c.why, format(got))
				what = "the woken reader set waiter r's acquire when " + c.why
				for _, name := range k.Set {
					assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Readers), "%s gave name %q a share: a reader set takes a share of every name or of none", what, name.Name)
					assert.Equal(t, "1", admin(t, addr, "ZSCORE", name.Queue, "r"), "after %s, r must stay queued in name %q's queue", what, name.Name)
					assert.Equal(t, readerSetRecord(k, "r"), admin(t, addr, "HGET", name.Waiters, "r"), "after %s, name %q's waiters hash must still record r as a reader, with its channel", what, name.Name)
				}
				assert.Equal(t, int64(0), admin(t, addr, "EXISTS", held.Lock), "%s must leave name %q free", what, held.Name)
			}
		}},
	}
}

// readerHeldSet runs acquire (mode r) by reader waiter r (ticket 7) of the set of k, whose name
// k.Set[held] a writer holds for 5000 ms, and checks the reply, that no name got a share,
// and that r is queued once, its attempt and set recorded, in every name's queue. what says
// which call this is.
func readerHeldSet(t *testing.T, n core.Node, addr string, k core.Keys, held int, what string) {
	t.Helper()
	got := mustEvalSet(t, n, "acquire", k, readerWaiterArgs("r-token", ttl, "r", "7")...)
	require.Len(t, got, 2, "%s replied %s, want {0, pttl}", what, format(got))
	assert.Equal(t, int64(0), got[0], "%s replied %s, want {0, pttl}: a reader set takes a share of every name or of none", what, format(got))
	assert.True(t, got[1] > 0 && got[1] <= 5000, "%s replied pttl %d, want that of the name held for 5000 ms more, 0 < pttl <= 5000", what, got[1])
	for i, name := range k.Set {
		if i == held {
			assert.Equal(t, theirs, admin(t, addr, "GET", name.Lock), "%s must leave the writer's lock alone", what)
		} else {
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Lock), "%s set the lock key of name %q: a reader set takes a share of every name or of none", what, name.Name)
		}
		assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Readers), "%s gave name %q a share: a reader set takes a share of every name or of none", what, name.Name)
		assert.Equal(t, int64(1), admin(t, addr, "ZCARD", name.Queue), "after %s, the queue of name %q must hold the waiter once: the Node must pass each name's six KEYS, name after name", what, name.Name)
		assert.Equal(t, "7", admin(t, addr, "ZSCORE", name.Queue, "r"), "after %s, the waiter must be queued at its ticket in the queue of name %q", what, name.Name)
		assert.Equal(t, readerSetRecord(k, "r"), admin(t, addr, "HGET", name.Waiters, "r"),
			"after %s, the waiters hash of name %q must record the waiter as a reader, with its channel (the set's first name's): the Node must pass every KEYS and ARGV in order, unchanged", what, name.Name)
	}
}

// wantWake checks that sub gets a wake-up, an empty message, on channel ch within
// waitBound. what says which message this is.
func wantWake(t *testing.T, sub *subscription, ch, what string) {
	t.Helper()
	got, msg, ok := sub.next(waitBound)
	if !assert.True(t, ok, "%s %q: no message within %v", what, ch, waitBound) {
		return
	}
	assert.Equal(t, ch, got, "%s: published on the wrong channel", what)
	assert.Equal(t, "", msg, "%s: a wake-up is an empty message", what)
}
