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

// readersHold is what the lock key holds while readers hold the lock (see core's queue.lua).
const readersHold = "(readers)"

// readerScriptCases are the scripts group's checks of the read-write lock: core's rlock,
// rextend and runlock scripts, and the writers' acquire and release where readers meet
// them. Readers hold a lock together, each with an entry in the readers key (a sorted set of
// tokens by the server time in milliseconds at which the holding ends), while the lock key
// holds readersHold; rlock takes the six KEYS of acquire, runlock the six of release, and
// rextend the lock key and the readers key.
func readerScriptCases() []scriptCase {
	return []scriptCase{
		{"rlock/free", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			before := serverMS(t, addr, k.Lock)
			got := mustEval(t, n, script(t, "rlock"), acquireKeys(k), readerArgs(ours, ttl)...)
			after := serverMS(t, addr, k.Lock)
			assert.Equal(t, []int64{1, 0}, got, "rlock of a free lock replied %s, want {1, 0}: the Node must return the script's whole integer array", format(got))
			assert.Equal(t, readersHold, admin(t, addr, "GET", k.Lock), "after rlock of a free lock, the lock key must hold the readers' marker %q: the Node must pass KEYS and ARGV in order, unchanged", readersHold)
			wantPTTL(t, addr, k.Lock, 1, ttlMS, "after rlock with TTL "+ttl+" ms, of the lock key")
			wantEntry(t, addr, k, ours, before+ttlMS, after+ttlMS, "after rlock with TTL "+ttl+" ms")
			wantPTTL(t, addr, k.Readers, 1, ttlMS, "after rlock with TTL "+ttl+" ms, of the readers key")
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Fence), "rlock must not touch the fence counter (a reader advances none): the Node must pass KEYS in order")
		}},
		{"rlock/shared", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			for _, r := range []struct{ token, ttl string }{{ours, "5000"}, {theirs, ttl}} {
				got := mustEval(t, n, script(t, "rlock"), acquireKeys(k), readerArgs(r.token, r.ttl)...)
				assert.Equal(t, []int64{1, 0}, got, "rlock by reader %q with TTL %s ms of a free lock or one that readers hold replied %s, want {1, 0}", r.token, r.ttl, format(got))
			}
			assert.Equal(t, int64(2), admin(t, addr, "ZCARD", k.Readers), "two readers granted the lock must each have an entry in the readers key")
			assert.Equal(t, readersHold, admin(t, addr, "GET", k.Lock), "while two readers hold the lock, the lock key must hold the readers' marker")
			wantPTTL(t, addr, k.Lock, 5001, ttlMS, "after readers with TTLs 5000 and "+ttl+" ms took their shares, the lock key must cover the longer one")
		}},
		{"rlock/writer-holds", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, theirs, "PX", "5000")
			got := mustEval(t, n, script(t, "rlock"), acquireKeys(k), readerArgs(ours, ttl)...)
			require.Len(t, got, 2, "rlock of a lock a writer holds replied %s, want {0, pttl}", format(got))
			assert.Equal(t, int64(0), got[0], "rlock of a lock a writer holds replied %s, want {0, pttl}", format(got))
			assert.True(t, got[1] > 0 && got[1] <= 5000, "rlock of a lock a writer holds for 5000 ms more replied pttl %d, want 0 < pttl <= 5000", got[1])
			// A reader that waits is queued, its attempt recorded as a reader's.
			got = mustEval(t, n, script(t, "rlock"), acquireKeys(k), readerWaiterArgs("r-token", ttl, "r", "7")...)
			assert.Equal(t, int64(0), got[0], "rlock by reader waiter r of a lock a writer holds replied %s, want {0, pttl}", format(got))
			assert.Equal(t, "7", admin(t, addr, "ZSCORE", k.Queue, "r"), "a reader waiter refused a lock a writer holds must be queued at its ticket: the Node must pass every KEYS and ARGV in order")
			assert.Equal(t, "r-token "+ttl+" 0 0 r", admin(t, addr, "HGET", k.Waiters, "r"), "a queued reader waiter's attempt must be recorded as \"<token> <ttl> 0 <guard> r\": the Node must pass every ARGV in order, unchanged")
			assert.Equal(t, theirs, admin(t, addr, "GET", k.Lock), "rlock must not touch a lock a writer holds")
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Readers), "a reader refused a lock a writer holds must get no entry in the readers key")
		}},
		{"rlock/writer-waiting", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEval(t, n, script(t, "rlock"), acquireKeys(k), readerArgs(ours, ttl)...)
			require.Equal(t, []int64{1, 0}, got, "rlock of a free lock replied %s, want {1, 0}", format(got))
			got = mustEval(t, n, script(t, "acquire"), acquireKeys(k), waiterArgs("w-token", ttl, "w", "1")...)
			require.Equal(t, int64(0), got[0], "acquire by writer waiter w while a reader holds the lock replied %s, want {0, pttl}", format(got))
			require.Equal(t, "1", admin(t, addr, "ZSCORE", k.Queue, "w"), "a writer waiter refused while a reader holds the lock must be queued")

			got = mustEval(t, n, script(t, "rlock"), acquireKeys(k), readerArgs(theirs, ttl)...)
			require.Len(t, got, 2, "rlock by a reader that does not wait, with writer w waiting, replied %s, want {0, pttl}", format(got))
			assert.Equal(t, int64(0), got[0], "rlock by a reader that does not wait, while a reader holds the lock and writer w waits, replied %s, want {0, pttl}: a waiting writer blocks new readers", format(got))
			assert.True(t, got[1] > 0 && got[1] <= ttlMS, "rlock refused while a reader holds the lock for "+ttl+" ms replied pttl %d, want the readers' remaining time, 0 < pttl <= "+ttl, got[1])
			assert.Nil(t, admin(t, addr, "ZSCORE", k.Readers, theirs), "a reader refused behind a waiting writer must get no entry")

			got = mustEval(t, n, script(t, "rlock"), acquireKeys(k), readerWaiterArgs("r-token", ttl, "r", "2")...)
			assert.Equal(t, int64(0), got[0], "rlock by reader waiter r (ticket 2), with writer w (ticket 1) waiting, replied %s, want {0, pttl}: a waiting writer blocks the readers queued after it", format(got))
			assert.Equal(t, "2", admin(t, addr, "ZSCORE", k.Queue, "r"), "a reader waiter refused behind a waiting writer must be queued at its ticket")
			assert.Nil(t, admin(t, addr, "ZSCORE", k.Readers, "r-token"), "a reader waiter refused behind a waiting writer must get no entry")
			assert.Equal(t, int64(1), admin(t, addr, "ZCARD", k.Readers), "refused readers must leave the holding reader's entry alone")
			assert.Equal(t, readersHold, admin(t, addr, "GET", k.Lock), "refused readers must leave the readers' marker alone")
		}},
		{"acquire/readers-hold", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEval(t, n, script(t, "rlock"), acquireKeys(k), readerArgs(ours, ttl)...)
			require.Equal(t, []int64{1, 0}, got, "rlock of a free lock replied %s, want {1, 0}", format(got))
			got = mustEval(t, n, script(t, "acquire"), acquireKeys(k), acquireArgs(theirs, ttl)...)
			require.Len(t, got, 2, "acquire of a lock a reader holds replied %s, want {0, pttl}", format(got))
			assert.Equal(t, int64(0), got[0], "acquire of a lock a reader holds replied %s, want {0, pttl}: a writer must find the readers' marker held", format(got))
			assert.True(t, got[1] > 0 && got[1] <= ttlMS, "acquire of a lock a reader holds for "+ttl+" ms replied pttl %d, want 0 < pttl <= "+ttl, got[1])
			assert.Equal(t, readersHold, admin(t, addr, "GET", k.Lock), "a writer refused while a reader holds the lock must leave the readers' marker alone")
			assert.NotNil(t, admin(t, addr, "ZSCORE", k.Readers, ours), "a writer refused while a reader holds the lock must leave the reader's entry alone")
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Fence), "a writer refused while a reader holds the lock must not advance the fence counter")
		}},
		{"rextend/ours", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEval(t, n, script(t, "rlock"), acquireKeys(k), readerArgs(ours, "5000")...)
			require.Equal(t, []int64{1, 0}, got, "rlock of a free lock replied %s, want {1, 0}", format(got))
			before := serverMS(t, addr, k.Lock)
			got = mustEval(t, n, script(t, "rextend"), rextendKeys(k), ours, ttl)
			after := serverMS(t, addr, k.Lock)
			assert.Equal(t, []int64{1}, got, "rextend of our live share replied %s, want {1}", format(got))
			wantEntry(t, addr, k, ours, before+ttlMS, after+ttlMS, "after extending our share from 5000 ms to "+ttl+" ms")
			wantPTTL(t, addr, k.Lock, 5001, ttlMS, "after extending our share from 5000 ms to "+ttl+" ms, of the lock key")
			wantPTTL(t, addr, k.Readers, 5001, ttlMS, "after extending our share from 5000 ms to "+ttl+" ms, of the readers key")
		}},
		{"rextend/gone", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEval(t, n, script(t, "rextend"), rextendKeys(k), ours, ttl)
			assert.Equal(t, []int64{0}, got, "rextend of a share on an empty server replied %s, want {0}", format(got))
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Lock), "rextend must never re-create a missing lock key")
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Readers), "rextend must never re-create a missing readers' entry")

			// Another reader's share is not ours.
			got = mustEval(t, n, script(t, "rlock"), acquireKeys(k), readerArgs(theirs, ttl)...)
			require.Equal(t, []int64{1, 0}, got, "rlock of a free lock replied %s, want {1, 0}", format(got))
			got = mustEval(t, n, script(t, "rextend"), rextendKeys(k), ours, ttl)
			assert.Equal(t, []int64{0}, got, "rextend of a share while only another reader holds the lock replied %s, want {0}", format(got))
			assert.Nil(t, admin(t, addr, "ZSCORE", k.Readers, ours), "rextend must never add an entry")

			// An entry whose time is up is gone, though the set still has it.
			expired := strconv.FormatInt(serverMS(t, addr, k.Lock)-1000, 10)
			admin(t, addr, "ZADD", k.Readers, expired, ours)
			got = mustEval(t, n, script(t, "rextend"), rextendKeys(k), ours, ttl)
			assert.Equal(t, []int64{0}, got, "rextend of our share whose time ended a second ago replied %s, want {0}", format(got))
			assert.Equal(t, expired, admin(t, addr, "ZSCORE", k.Readers, ours), "rextend must not renew an entry whose time is up")
		}},
		{"rextend/writer-holds", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			// Our entry is live, but the lock key is a writer's: readers no longer hold it.
			admin(t, addr, "SET", k.Lock, theirs, "PX", "5000")
			live := strconv.FormatInt(serverMS(t, addr, k.Lock)+5000, 10)
			admin(t, addr, "ZADD", k.Readers, live, ours)
			got := mustEval(t, n, script(t, "rextend"), rextendKeys(k), ours, ttl)
			assert.Equal(t, []int64{0}, got, "rextend of our entry while a writer holds the lock key replied %s, want {0}", format(got))
			assert.Equal(t, theirs, admin(t, addr, "GET", k.Lock), "rextend must not touch a writer's lock")
			wantPTTL(t, addr, k.Lock, 1, 5000, "after a refused rextend of a lock a writer holds for 5000 ms")
			assert.Equal(t, live, admin(t, addr, "ZSCORE", k.Readers, ours), "a refused rextend must leave the entry alone")
		}},
		{"runlock/last-reader-hands-over", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEval(t, n, script(t, "rlock"), acquireKeys(k), readerArgs(ours, ttl)...)
			require.Equal(t, []int64{1, 0}, got, "rlock of a free lock replied %s, want {1, 0}", format(got))
			got = mustEval(t, n, script(t, "acquire"), acquireKeys(k), waiterArgs("w-token", ttl, "w", "1")...)
			require.Equal(t, int64(0), got[0], "acquire by writer waiter w while a reader holds the lock replied %s, want {0, pttl}", format(got))
			// On a cluster, a script's PUBLISH counts the receivers on its own master only.
			sub, err := subscribe(owner(addr, k.Wake("w")), k.Wake("w"))
			require.NoError(t, err, "conformance: subscribe to the writer waiter's channel")
			defer sub.close()
			got = mustEval(t, n, script(t, "runlock"), releaseKeys(k), releaseArgs(ours, k)...)
			assert.Equal(t, []int64{1, 1}, got, "runlock of the last reader's share, with writer waiter w listening, replied %s, want {1, 1}", format(got))
			assert.Equal(t, "w-token", admin(t, addr, "GET", k.Lock), "runlock of the last reader's share must hand the lock to the waiting writer's attempt")
			wantPTTL(t, addr, k.Lock, 1, ttlMS, "after the lock was handed to the writer with TTL "+ttl+" ms")
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Readers), "runlock of the last reader's share must delete its entry")
			ch, payload, ok := sub.next(waitBound)
			assert.True(t, ok, "runlock of the last reader's share must tell the waiting writer on its channel: no message within %v", waitBound)
			if ok {
				assert.Equal(t, k.Wake("w"), ch, "runlock published on the wrong channel")
				assert.Equal(t, fmt.Sprintf("w-token %s", admin(t, addr, "GET", k.Fence)), payload,
					"the message must name the token the lock was handed to and the fence it advanced to")
			}
		}},
		{"runlock/not-last", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			for _, r := range []struct{ token, ttl string }{{ours, ttl}, {theirs, "5000"}} {
				got := mustEval(t, n, script(t, "rlock"), acquireKeys(k), readerArgs(r.token, r.ttl)...)
				require.Equal(t, []int64{1, 0}, got, "rlock by reader %q replied %s, want {1, 0}", r.token, format(got))
			}
			got := mustEval(t, n, script(t, "runlock"), releaseKeys(k), releaseArgs(ours, k)...)
			assert.Equal(t, []int64{1, 0}, got, "runlock of our share while another reader holds the lock replied %s, want {1, 0}", format(got))
			assert.Equal(t, readersHold, admin(t, addr, "GET", k.Lock), "while another reader holds the lock, runlock must keep the readers' marker")
			assert.Equal(t, int64(1), admin(t, addr, "ZCARD", k.Readers), "runlock must delete our entry only")
			assert.Nil(t, admin(t, addr, "ZSCORE", k.Readers, ours), "runlock must delete our entry")
			wantPTTL(t, addr, k.Lock, 1, 5000, "after the reader with "+ttl+" ms let go, the lock key must be kept only as long as the remaining reader's 5000 ms")
			got = mustEval(t, n, script(t, "runlock"), releaseKeys(k), releaseArgs(ours, k)...)
			assert.Equal(t, []int64{0, 0, 1}, got, "a second runlock of our share replied %s, want {0, 0, 1} (nothing of ours here, and no other owner)", format(got))
		}},
		{"runlock/writer-holds", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, theirs, "PX", ttl)
			got := mustEval(t, n, script(t, "runlock"), releaseKeys(k), releaseArgs(ours, k)...)
			assert.Equal(t, []int64{0, 0}, got, "runlock while a writer holds the lock replied %s, want {0, 0}", format(got))
			assert.Equal(t, theirs, admin(t, addr, "GET", k.Lock), "runlock must not delete a writer's lock")
		}},
		{"release/hands-to-readers", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, ours, "PX", ttl)
			for _, r := range []struct{ id, ticket string }{{"r1", "1"}, {"r2", "2"}} {
				got := mustEval(t, n, script(t, "rlock"), acquireKeys(k), readerWaiterArgs(r.id+"-token", ttl, r.id, r.ticket)...)
				require.Equal(t, int64(0), got[0], "rlock by reader waiter %s of a lock a writer holds replied %s, want {0, pttl}", r.id, format(got))
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
			got = mustEval(t, n, script(t, "release"), releaseKeys(k), releaseArgs(ours, k)...)
			assert.Equal(t, []int64{1, 2}, got, "release of our lock with reader waiters r1, r2 and then writer waiter w3 queued and listening replied %s, want {1, 2}: both readers are handed the lock and told, the writer behind them is not", format(got))
			assert.Equal(t, readersHold, admin(t, addr, "GET", k.Lock), "release of our lock with readers first in the queue must leave the lock key to the readers' marker")
			wantPTTL(t, addr, k.Lock, 1, ttlMS, "after the lock was handed to readers with TTL "+ttl+" ms")
			for _, id := range []string{"r1", "r2"} {
				assert.NotNil(t, admin(t, addr, "ZSCORE", k.Readers, id+"-token"), "release must grant reader waiter %s an entry in the readers key", id)
				assert.Nil(t, admin(t, addr, "ZSCORE", k.Queue, id), "reader waiter %s, handed the lock, must leave the queue", id)
				ch, payload, ok := subs[id].next(waitBound)
				assert.True(t, ok, "release must tell reader waiter %s on its channel: no message within %v", id, waitBound)
				if ok {
					assert.Equal(t, k.Wake(id), ch, "release published on the wrong channel")
					assert.Equal(t, id+"-token 0", payload, "the message to a reader must name its token and fence 0")
				}
			}
			assert.Equal(t, "3", admin(t, addr, "ZSCORE", k.Queue, "w3"), "writer waiter w3, behind the readers, must stay queued")
			_, _, woken := subs["w3"].next(100 * time.Millisecond)
			assert.False(t, woken, "release woke writer waiter w3 too, though readers hold the lock")
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
