package conformance

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A semaphore of K permits (core.NewSemaphoreKeys) runs core's acquire and release scripts
// with more KEYS and ARGV than a lock: acquire takes the six KEYS of a lock (KEYS[6] the
// semaphore's record of K) and then the K permits, KEYS[7] .. KEYS[6 + K], and ARGV[9] K and
// ARGV[10] the permit it hints at; its replies have the permit taken last (-1: none), or are
// {-2, n} when the record says n permits. release takes the permit held as KEYS[1], the
// permits as KEYS[7] .. KEYS[6 + K], K as ARGV[2] and "1" as ARGV[8] (KEYS[1] is held here),
// and wakes the first waiters, one per free permit, with an empty message on each one's
// channel; a woken waiter takes a permit with acquire.

// manyPermits is the K of the checks that a Node passes every one of many KEYS: a few
// dozen, as a Semaphore of that many permits makes.
const manyPermits = 40

// semaphoreKeys returns the keys of a semaphore of permits permits named after the check.
func semaphoreKeys(t *testing.T, permits int) core.Keys {
	return core.NewSemaphoreKeys(prefix(t), "semaphore", permits)
}

// semAcquireKeys are acquire's KEYS for the semaphore of k, as core passes them: a lock's
// six, then the permits. Each call makes a new slice.
func semAcquireKeys(k core.Keys) []string { return append(k.ScriptKeys(), k.Permits...) }

// semAcquireArgs are acquire's ARGV for the semaphore of k, as core passes them: a lock's
// (args, from acquireArgs or waiterArgs), but ARGV[9] the number of permits and ARGV[10]
// the permit hinted at (-1: none). Each call makes a new slice.
func semAcquireArgs(k core.Keys, args []string, hint int) []string {
	args = slices.Clone(args)
	args[8], args[9] = strconv.Itoa(len(k.Permits)), strconv.Itoa(hint)
	return args
}

// semReleaseKeys are release's KEYS for the semaphore of k and a holder of permit held:
// a lock's six with the permit first, then the permits.
func semReleaseKeys(k core.Keys, held int) []string {
	keys := append(k.ScriptKeys(), k.Permits...)
	keys[0] = k.Permits[held]
	return keys
}

// semReleaseArgs are release's ARGV for the semaphore of k, as core passes them when an
// owner without a waiter id lets go of the permit it holds (KEYS[1]), publishing with
// publish (PUBLISH or SPUBLISH): the number of permits as the mode, no waiter, ticket 0,
// and ARGV[8] "1": KEYS[1] is the permit held here.
func semReleaseArgs(k core.Keys, token, publish string) []string {
	return []string{token, strconv.Itoa(len(k.Permits)), publish, "", "leave", "0", "10000", "1"}
}

// holdPermits makes token the holder of the semaphore's permits at indices, for ms
// milliseconds.
func holdPermits(t *testing.T, addr string, k core.Keys, token, ms string, indices ...int) {
	t.Helper()
	for _, i := range indices {
		admin(t, addr, "SET", k.Permits[i], token, "PX", ms)
	}
}

// wantPermit checks that the reply of a semaphore's acquire has status and the permit last.
func wantPermit(t *testing.T, got []int64, status, permit int64, what string) bool {
	t.Helper()
	if !assert.GreaterOrEqual(t, len(got), 4, "%s replied %s, want {%d, value, ..., permit}: a semaphore's replies end with the permit taken (-1: none), and the Node must return the script's whole integer array", what, format(got), status) {
		return false
	}
	ok := assert.Equal(t, status, got[0], "%s replied %s, want status %d first", what, format(got), status)
	return assert.Equal(t, permit, got[len(got)-1], "%s replied %s, want permit %d last: the Node must pass every KEYS and ARGV in order, and return the reply whole with its signs", what, format(got), permit) && ok
}

// semaphoreScriptCases are the scripts group's checks of a semaphore's use of the acquire
// and release scripts: many KEYS passed in order, replies with the permit last and their
// signs kept (-1: no permit, -2: a record of another number of permits), and the wake-up
// of the first waiter when a permit is freed.
func semaphoreScriptCases() []scriptCase {
	return []scriptCase{
		{"acquire/semaphore-free", func(t *testing.T, n core.Node, addr string, _ core.Keys) {
			k := semaphoreKeys(t, 3)
			got := mustEval(t, n, script(t, "acquire"), semAcquireKeys(k), semAcquireArgs(k, acquireArgs(ours, ttl), -1)...)
			require.True(t, wantPermit(t, got, 1, 0, "acquire of a free semaphore of 3 permits"))
			assert.Greater(t, got[1], int64(1_000_000_000_000_000), "acquire of a free semaphore replied fence %d, want the server clock in microseconds: the Node must keep int64 replies exact", got[1])
			assert.Equal(t, ours, admin(t, addr, "GET", k.Permits[0]), "after acquire of a free semaphore, its first permit must hold our token: the Node must pass KEYS and ARGV in order, unchanged")
			wantPTTL(t, addr, k.Permits[0], 1, ttlMS, "after acquire of a permit with TTL "+ttl+" ms")
			for i := 1; i < 3; i++ {
				assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Permits[i]), "acquire must take one permit only, not permit %d too", i)
			}
			assert.Equal(t, "3", admin(t, addr, "GET", k.Readers), "acquire of a semaphore must record its number of permits (ARGV[9]) in KEYS[6]: the Node must pass every KEYS and ARGV in order")
			wantPTTL(t, addr, k.Readers, 1, 3_600_000, "after acquire recorded the number of permits")
			assert.Equal(t, strconv.FormatInt(got[1], 10), admin(t, addr, "GET", k.Fence), "the fence key must hold the fence the reply carried")
		}},
		{"acquire/semaphore-many-permits", func(t *testing.T, n core.Node, addr string, _ core.Keys) {
			k := semaphoreKeys(t, manyPermits)
			held := make([]int, manyPermits-1)
			for i := range held {
				held[i] = i
			}
			holdPermits(t, addr, k, theirs, ttl, held...)
			got := mustEval(t, n, script(t, "acquire"), semAcquireKeys(k), semAcquireArgs(k, acquireArgs(ours, ttl), -1)...)
			wantPermit(t, got, 1, manyPermits-1, fmt.Sprintf("acquire of a semaphore of %d permits (%d KEYS) with only the last free", manyPermits, 6+manyPermits))
			assert.Equal(t, ours, admin(t, addr, "GET", k.Permits[manyPermits-1]), "acquire must take the last permit, the only one free: the Node must pass every one of the %d KEYS, in order", 6+manyPermits)
			assert.Equal(t, theirs, admin(t, addr, "GET", k.Permits[0]), "acquire must leave another owner's permit alone")
		}},
		{"acquire/semaphore-hint", func(t *testing.T, n core.Node, addr string, _ core.Keys) {
			const hint = 21
			k := semaphoreKeys(t, 24)
			got := mustEval(t, n, script(t, "acquire"), semAcquireKeys(k), semAcquireArgs(k, acquireArgs(ours, ttl), hint)...)
			wantPermit(t, got, 1, hint, fmt.Sprintf("acquire of a free semaphore of 24 permits hinting at permit %d", hint))
			assert.Equal(t, ours, admin(t, addr, "GET", k.Permits[hint]), "acquire hinting at a free permit (ARGV[10]) must take it: the Node must pass every KEYS and ARGV in order")
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Permits[0]), "acquire hinting at a free permit must not take the first")
		}},
		{"acquire/semaphore-all-held", func(t *testing.T, n core.Node, addr string, _ core.Keys) {
			k := semaphoreKeys(t, 3)
			holdPermits(t, addr, k, theirs, "5000", 0, 1, 2)
			got := mustEval(t, n, script(t, "acquire"), semAcquireKeys(k), semAcquireArgs(k, waiterArgs("w-token", ttl, "w", "7"), -1)...)
			require.True(t, wantPermit(t, got, 0, -1, "acquire by waiter w of a semaphore whose 3 permits are held"))
			assert.True(t, got[1] > 0 && got[1] <= 5000, "acquire of a semaphore whose permits are held for 5000 ms more replied pttl %d, want 0 < pttl <= 5000", got[1])
			assert.Equal(t, "7", admin(t, addr, "ZSCORE", k.Queue, "w"), "a waiter refused every permit must be queued at its ticket: the Node must pass every KEYS and ARGV in order")
			for i := range 3 {
				assert.Equal(t, theirs, admin(t, addr, "GET", k.Permits[i]), "acquire must not touch permit %d, held by another owner", i)
			}
		}},
		{"acquire/semaphore-count-mismatch", func(t *testing.T, n core.Node, addr string, _ core.Keys) {
			k := semaphoreKeys(t, 3)
			admin(t, addr, "SET", k.Readers, "2", "PX", "5000")
			holdPermits(t, addr, k, theirs, "5000", 0) // a record that stands: a permit of it is held
			got := mustEval(t, n, script(t, "acquire"), semAcquireKeys(k), semAcquireArgs(k, acquireArgs(ours, ttl), -1)...)
			assert.Equal(t, []int64{-2, 2}, got, "acquire of a semaphore of 3 permits whose record says 2, with permit 0 held, replied %s, want {-2, 2}: the Node must keep the sign of integer replies", format(got))
			assert.Equal(t, "2", admin(t, addr, "GET", k.Readers), "acquire must not overwrite a record of another number of permits")
			assert.Equal(t, theirs, admin(t, addr, "GET", k.Permits[0]), "acquire refused for its number of permits must leave another owner's permit alone")
			for i := 1; i < 3; i++ {
				assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Permits[i]), "acquire refused for its number of permits must take none, not permit %d", i)
			}
		}},
		{"acquire/semaphore-own-permit-retry", func(t *testing.T, n core.Node, addr string, _ core.Keys) {
			k := semaphoreKeys(t, 3)
			first := mustEval(t, n, script(t, "acquire"), semAcquireKeys(k), semAcquireArgs(k, acquireArgs(ours, "5000"), 2)...)
			wantPermit(t, first, 1, 2, "acquire of a free semaphore of 3 permits hinting at permit 2")
			got := mustEval(t, n, script(t, "acquire"), semAcquireKeys(k), semAcquireArgs(k, acquireArgs(ours, ttl), -1)...)
			wantPermit(t, got, 1, 2, "acquire retried with our own token (a retry after a lost reply), without a hint")
			if len(first) >= 2 && len(got) >= 2 {
				assert.Greater(t, got[1], first[1], "acquire retried with our own token replied fence %d after %d, want a larger one", got[1], first[1])
			}
			wantPTTL(t, addr, k.Permits[2], 5001, ttlMS, "after the retry with TTL "+ttl+" ms, of our permit")
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Permits[0]), "acquire retried with our own token must keep the permit it holds, not take another")
		}},
		{"acquire/semaphore-fence-advances", func(t *testing.T, n core.Node, addr string, _ core.Keys) {
			k := semaphoreKeys(t, 3)
			admin(t, addr, "SET", k.Fence, bigFenceStr)
			for i, token := range []string{ours, theirs, "conformance-token-third"} {
				got := mustEval(t, n, script(t, "acquire"), semAcquireKeys(k), semAcquireArgs(k, acquireArgs(token, ttl), -1)...)
				require.True(t, wantPermit(t, got, 1, int64(i), fmt.Sprintf("acquire #%d of a semaphore of 3 permits by a new owner", i+1)))
				want := bigFence + int64(i) + 1
				cause := "the Node must carry 64-bit integers exactly"
				if got[1] > want {
					cause = "the counter advanced more than once: the script ran more than once for one Eval (EVALSHA and EVAL both sent?)"
				}
				require.Equal(t, want, got[1], "acquire #%d of a semaphore of 3 permits with the fence counter at %d replied %s, want fence %d: %s", i+1, bigFence+int64(i), format(got), want, cause)
			}
		}},
		{"acquire/semaphore-identifies-the-server", func(t *testing.T, n core.Node, addr string, _ core.Keys) {
			k := semaphoreKeys(t, 3)
			holdPermits(t, addr, k, theirs, ttl, 0)
			args := identifying(semAcquireArgs(k, acquireArgs(ours, ttl), -1)) // ARGV[8]: say which server this is
			got := mustEval(t, n, script(t, "acquire"), semAcquireKeys(k), args...)
			require.True(t, wantPermit(t, got, 1, 1, "acquire of a semaphore with permit 0 held, asked to identify the server,"))
			info, _ := do(owner(addr, k.Lock), "INFO", "server") // on a cluster: the semaphore's master
			text, _ := info.(string)
			_, rest, found := strings.Cut(text, "run_id:")
			if !found || len(rest) < 40 {
				return // a server that reports no run_id (miniredis)
			}
			want := []int64{0}
			for i := 0; i < 40; i += 10 {
				part, err := strconv.ParseInt(rest[i:i+10], 16, 64)
				require.NoError(t, err)
				want = append(want, part)
			}
			require.GreaterOrEqual(t, len(got), 8, "acquire of a semaphore asked to identify the server replied %s, want {1, fence, 0}, the server's run_id in four parts, and the permit last", format(got))
			assert.Equal(t, want, got[2:7], "acquire of a semaphore asked to identify the server replied %s, want {1, fence, 0} and then the server's run_id in four parts (before the permit, last): the Node must pass every argument and return the reply whole", format(got))
		}},
		{"release/semaphore-wakes", func(t *testing.T, n core.Node, addr string, _ core.Keys) {
			k := semaphoreKeys(t, 3)
			holdPermits(t, addr, k, theirs, ttl, 0, 2)
			got := mustEval(t, n, script(t, "acquire"), semAcquireKeys(k), semAcquireArgs(k, acquireArgs(ours, ttl), -1)...)
			require.True(t, len(got) >= 4 && got[0] == 1 && got[len(got)-1] == 1, "acquire of a semaphore of 3 permits with 0 and 2 held replied %s, want {1, fence, 0, 1}", format(got))
			for _, w := range []struct{ id, ticket string }{{"w1", "1"}, {"w2", "2"}} {
				queued := mustEval(t, n, script(t, "acquire"), semAcquireKeys(k), semAcquireArgs(k, waiterArgs(w.id+"-token", ttl, w.id, w.ticket), -1)...)
				require.Equal(t, int64(0), queued[0], "acquire by waiter %s of a semaphore whose permits are held replied %s, want {0, pttl, 0, -1}", w.id, format(queued))
			}
			// On a cluster, a script's PUBLISH counts the receivers on its own master only.
			sub, err := subscribe(owner(addr, k.Wake("w1")), k.Wake("w1"))
			require.NoError(t, err, "conformance: subscribe to the first waiter's channel")
			defer sub.close()
			second, err := subscribe(owner(addr, k.Wake("w2")), k.Wake("w2"))
			require.NoError(t, err, "conformance: subscribe to the second waiter's channel")
			defer second.close()
			got = mustEval(t, n, script(t, "release"), semReleaseKeys(k, 1), semReleaseArgs(k, ours, "PUBLISH")...)
			assert.Equal(t, []int64{1, 1}, got, "release of our permit 1 of 3 with two waiters listening replied %s, want {1, 1}: only the first is told", format(got))
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Permits[1]), "release of our permit must delete it (the queue wakes, never grants)")
			assert.Equal(t, "1", admin(t, addr, "ZSCORE", k.Queue, "w1"), "a woken waiter must stay queued until it takes a permit")
			assert.Equal(t, "2", admin(t, addr, "ZSCORE", k.Queue, "w2"), "the second waiter must stay queued")
			wantWake(t, sub, k.Wake("w1"), "release of our permit must wake the first waiter on its channel")
			_, _, woken := second.next(100 * time.Millisecond)
			assert.False(t, woken, "release of one permit woke the second waiter too")
			got = mustEval(t, n, script(t, "acquire"), semAcquireKeys(k), semAcquireArgs(k, waiterArgs("w1-token", ttl, "w1", "1"), -1)...)
			wantPermit(t, got, 1, 1, "acquire by the woken waiter w1 of a semaphore of 3 permits with only permit 1 free")
			assert.Equal(t, "w1-token", admin(t, addr, "GET", k.Permits[1]), "the woken waiter's acquire must take the freed permit")
			assert.Nil(t, admin(t, addr, "ZSCORE", k.Queue, "w1"), "a waiter that takes a permit must leave the queue")
		}},
		{"release/semaphore-any-permit", func(t *testing.T, n core.Node, addr string, _ core.Keys) {
			// A release that does not know the permit it holds names one (here the first,
			// another owner's) as KEYS[1]: the script finds ours among KEYS[7] .. KEYS[6 + K].
			k := semaphoreKeys(t, manyPermits)
			holdPermits(t, addr, k, theirs, ttl, 0)
			holdPermits(t, addr, k, ours, ttl, manyPermits-1)
			got := mustEval(t, n, script(t, "release"), semReleaseKeys(k, 0), semReleaseArgs(k, ours, "PUBLISH")...)
			assert.Equal(t, []int64{1, 0}, got, "release of our permit %d of %d (%d KEYS), naming permit 0 as KEYS[1], replied %s, want {1, 0}", manyPermits-1, manyPermits, 6+manyPermits, format(got))
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Permits[manyPermits-1]), "release must delete our permit, the last of the KEYS: the Node must pass every one of the %d KEYS, in order", 6+manyPermits)
			assert.Equal(t, theirs, admin(t, addr, "GET", k.Permits[0]), "release must not delete another owner's permit")
		}},
		{"release/semaphore-not-ours", func(t *testing.T, n core.Node, addr string, _ core.Keys) {
			k := semaphoreKeys(t, 3)
			holdPermits(t, addr, k, theirs, ttl, 0, 1, 2)
			got := mustEval(t, n, script(t, "release"), semReleaseKeys(k, 1), semReleaseArgs(k, ours, "PUBLISH")...)
			assert.Equal(t, []int64{0, 0}, got, "release of a semaphore whose permits are all another owner's replied %s, want {0, 0}", format(got))
			for i := range 3 {
				assert.Equal(t, theirs, admin(t, addr, "GET", k.Permits[i]), "release must not delete another owner's permit %d", i)
			}
		}},
		{"release/semaphore-missing", func(t *testing.T, n core.Node, addr string, _ core.Keys) {
			k := semaphoreKeys(t, 3)
			got := mustEval(t, n, script(t, "release"), semReleaseKeys(k, 0), semReleaseArgs(k, ours, "PUBLISH")...)
			assert.Equal(t, []int64{0, 0, 1}, got, "release of a semaphore on an empty server replied %s, want {0, 0, 1} (nothing of ours here, and no other owner)", format(got))
		}},
	}
}

// checkSemaphoreWake: the pubsub group's check of a wake-up that the release script, run
// through the Node, publishes as core has it publish (SPUBLISH for a Node whose
// ShardedPubSub reports true): the Node's own subscription to the waiter's channel gets the
// wake-up, an empty message. The Node runs the script while it is subscribed, as
// core's waiters do.
func checkSemaphoreWake(t *testing.T, e *env) {
	addr := e.server(t)
	p := newPubsub(t, e, addr, addr)
	n, ok := p.sub.(core.Node)
	require.True(t, ok, "conformance: the Subscriber is not a core.Node")
	k := core.NewSemaphoreKeys(prefix(t), "wake", 3)
	holdPermits(t, addr, k, theirs, ttl, 0, 2)
	holdPermits(t, addr, k, ours, ttl, 1)
	queued := mustEval(t, n, script(t, "acquire"), semAcquireKeys(k), semAcquireArgs(k, waiterArgs("w-token", ttl, "w", "1"), -1)...)
	require.Equal(t, int64(0), queued[0], "acquire by waiter w of a semaphore whose permits are held replied %s, want {0, pttl, 0, -1}", format(queued))
	var c counter
	p.subscribe(k.Wake("w"), &c)
	got, err := eval(n, script(t, "release"), semReleaseKeys(k, 1), semReleaseArgs(k, ours, p.publishCmd())...)
	require.NoError(t, err, "Eval(release) on a Node with a subscription of its own returned an error: a Node must run scripts while it is subscribed, as core's waiters call it (a driver that sends commands on its subscribed connection needs a server that runs them there, RESP3; else a pub/sub connection of its own)")
	require.Equal(t, []int64{1, 1}, got, "release (publishing with %s) of our permit 1 of 3, with waiter w subscribed through the Node, replied %s, want {1, 1}: the server must count the Node's subscription%s", p.publishCmd(), format(got), p.otherKind(k.Wake("w")))
	if !eventually(waitBound, func() bool { return c.got("") }) {
		t.Errorf("the wake-up, an empty message, published by the release script on %q, did not reach onMessage within %v unchanged (got %d calls)", k.Wake("w"), waitBound, c.calls())
	}
}
