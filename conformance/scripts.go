package conformance

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Arguments the script checks pass, as core passes them.
const (
	ours   = "conformance-token-ours"
	theirs = "conformance-token-theirs"
	ttlMS  = 10000
	ttl    = "10000"
	// bigFence is a fence counter above 2^32 and above any server clock in microseconds, but
	// below 2^53: the reply must carry it exactly (no int32 or float32 on the way).
	bigFence = 4_000_000_000_000_000
)

var bigFenceStr = strconv.FormatInt(bigFence, 10)

// scriptCase runs one core script through the Node on a prepared server and checks the
// reply and what the script did to the server.
type scriptCase struct {
	name string
	run  func(t *testing.T, n core.Node, addr string, k core.Keys)
}

func scriptChecks() []check {
	cases := []scriptCase{
		{"acquire/free", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), acquireArgs(ours, ttl)...)
			require.GreaterOrEqual(t, len(got), 2, "acquire of a free lock replied %s, want {1, fence}: the Node must return the script's whole integer array", format(got))
			assert.Equal(t, int64(1), got[0], "acquire of a free lock replied %s, want {1, fence}", format(got))
			assert.Greater(t, got[1], int64(1_000_000_000_000_000), "acquire of a free lock replied fence %d, want the server clock in microseconds: the Node must keep int64 replies exact", got[1])
			assert.Equal(t, ours, admin(t, addr, "GET", k.Lock), "after acquire, the lock key must hold our token: the Node must pass KEYS and ARGV in order, unchanged")
			wantPTTL(t, addr, k.Lock, 1, ttlMS, "after acquire with TTL "+ttl+" ms")
			assert.Equal(t, strconv.FormatInt(got[1], 10), admin(t, addr, "GET", k.Fence), "the fence key must hold the fence the reply carried")
		}},
		{"acquire/arguments-unchanged", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			keys, args := acquireKeys(k), acquireArgs(ours, ttl)
			wantKeys, wantArgs := slices.Clone(keys), slices.Clone(args)
			mustEval(t, n, script(t, "acquire"), keys, args...)
			assert.Equal(t, wantKeys, keys, "Eval changed the keys it was given: core shares them between calls")
			assert.Equal(t, wantArgs, args, "Eval changed the args it was given: core shares them between calls")
		}},
		{"acquire/held", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, theirs, "PX", "5000")
			got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), acquireArgs(ours, ttl)...)
			require.GreaterOrEqual(t, len(got), 2, "acquire of a lock held by another owner replied %s, want {0, pttl}", format(got))
			assert.Equal(t, int64(0), got[0], "acquire of a lock held by another owner replied %s, want {0, pttl}", format(got))
			assert.True(t, got[1] > 0 && got[1] <= 5000, "acquire of a lock held for 5000 ms more replied pttl %d, want 0 < pttl <= 5000", got[1])
			assert.Equal(t, theirs, admin(t, addr, "GET", k.Lock), "acquire must not touch a lock held by another owner")
		}},
		{"acquire/own-token-retry", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			first := mustEval(t, n, script(t, "acquire"), acquireKeys(k), acquireArgs(ours, "5000")...)
			got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), acquireArgs(ours, ttl)...)
			require.GreaterOrEqual(t, len(first), 2, "acquire of a free lock replied %s, want {1, fence}", format(first))
			require.GreaterOrEqual(t, len(got), 2, "acquire retried with our own token replied %s, want {1, fence}", format(got))
			assert.Equal(t, int64(1), got[0], "acquire retried with our own token (a retry after a lost reply) replied %s, want {1, fence}", format(got))
			assert.Greater(t, got[1], first[1], "acquire retried with our own token replied fence %d after %d, want a larger one", got[1], first[1])
			wantPTTL(t, addr, k.Lock, 5001, ttlMS, "after the retry with TTL "+ttl+" ms")
		}},
		{"acquire/fence-advances", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Fence, bigFenceStr)
			for i, token := range []string{ours, theirs, ours} {
				got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), acquireArgs(token, ttl)...)
				want := []int64{1, bigFence + int64(i) + 1}
				cause := "the Node must carry 64-bit integers exactly"
				if len(got) >= 2 && got[1] > want[1] {
					cause = "the counter advanced more than once: the script ran more than once for one Eval (EVALSHA and EVAL both sent?)"
				}
				require.Equal(t, want, got[:min(len(got), 2)], "acquire #%d with the fence counter at %d replied %s, want %v: %s", i+1, bigFence+int64(i), format(got), want, cause)
				admin(t, addr, "DEL", k.Lock)
			}
		}},
		{"extend/ours", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, ours, "PX", "5000")
			got := mustEval(t, n, script(t, "extend"), extendKeys(k), ours, ttl, "w")
			assert.Equal(t, []int64{1}, got, "extend of our lock replied %s, want {1}", format(got))
			wantPTTL(t, addr, k.Lock, 5001, ttlMS, "after extending our lock from 5000 ms to "+ttl+" ms")
		}},
		{"extend/not-ours", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, theirs, "PX", "5000")
			got := mustEval(t, n, script(t, "extend"), extendKeys(k), ours, ttl, "w")
			assert.Equal(t, []int64{0}, got, "extend of another owner's lock replied %s, want {0}", format(got))
			wantPTTL(t, addr, k.Lock, 1, 5000, "after a refused extend of a lock with 5000 ms left")
		}},
		{"extend/missing", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEval(t, n, script(t, "extend"), extendKeys(k), ours, ttl, "w")
			assert.Equal(t, []int64{0}, got, "extend of a missing lock replied %s, want {0}", format(got))
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Lock), "extend must never re-create a missing lock")
		}},
		{"acquire/queue-order", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, theirs, "PX", ttl)
			for _, w := range []struct{ id, ticket string }{{"w2", "2"}, {"w1", "1"}} {
				got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), waiterArgs(w.id+"-token", ttl, w.id, w.ticket)...)
				assert.Equal(t, int64(0), got[0], "acquire by waiter %s of a held lock replied %s, want {0, pttl}", w.id, format(got))
			}
			assert.Equal(t, int64(2), admin(t, addr, "ZCARD", k.Queue), "a waiter refused a held lock must be queued: the Node must pass every KEYS and ARGV in order")
			admin(t, addr, "DEL", k.Lock)
			for _, c := range []struct {
				who  string
				args []string
			}{{"an owner that does not wait", acquireArgs(ours, ttl)}, {"waiter w2 (ticket 2)", waiterArgs("w2-token", ttl, "w2", "2")}} {
				got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), c.args...)
				assert.Equal(t, []int64{0, 0}, got, "acquire by %s of a free lock with waiter w1 (ticket 1) first in the queue replied %s, want {0, 0}", c.who, format(got))
			}
			got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), waiterArgs("w1-token", ttl, "w1", "1")...)
			assert.Equal(t, int64(1), got[0], "acquire by waiter w1, first in the queue, of a free lock replied %s, want {1, fence}", format(got))
			assert.Equal(t, "w1-token", admin(t, addr, "GET", k.Lock), "the lock must go to the first waiter")
			assert.Nil(t, admin(t, addr, "ZSCORE", k.Queue, "w1"), "a waiter that takes the lock must leave the queue")
			assert.Equal(t, "2", admin(t, addr, "ZSCORE", k.Queue, "w2"), "a waiter that takes the lock must leave the others queued")
		}},
		{"release/ours", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, ours, "PX", ttl)
			for _, w := range []struct{ id, ticket string }{{"waiter", "1"}, {"second", "2"}} {
				queued := mustEval(t, n, script(t, "acquire"), acquireKeys(k), waiterArgs(w.id+"-token", ttl, w.id, w.ticket)...)
				require.Equal(t, int64(0), queued[0], "acquire by a waiter of a held lock replied %s, want {0, pttl}", format(queued))
			}
			// On a cluster, a script's PUBLISH counts the receivers on its own master only.
			sub, err := subscribe(owner(addr, k.Wake("waiter")), k.Wake("waiter"))
			require.NoError(t, err, "conformance: subscribe to the waiter's channel")
			defer sub.close()
			second, err := subscribe(owner(addr, k.Wake("second")), k.Wake("second"))
			require.NoError(t, err, "conformance: subscribe to the second waiter's channel")
			defer second.close()
			got := mustEval(t, n, script(t, "release"), releaseKeys(k), releaseArgs(ours, "w")...)
			assert.Equal(t, []int64{1, 1}, got, "release of our lock with two waiters listening replied %s, want {1, 1}: only the first is told", format(got))
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Lock), "release of our lock must delete it (the queue wakes, never grants)")
			wantWake(t, sub, k.Wake("waiter"), "release of our lock must wake the first waiter on its channel")
			_, _, woken := second.next(100 * time.Millisecond)
			assert.False(t, woken, "release woke the second waiter too")
			got = mustEval(t, n, script(t, "acquire"), acquireKeys(k), waiterArgs("waiter-token", ttl, "waiter", "1")...)
			assert.Equal(t, int64(1), got[0], "acquire by the woken waiter, first in the queue, replied %s, want {1, fence}", format(got))
			assert.Equal(t, "waiter-token", admin(t, addr, "GET", k.Lock), "the woken waiter's acquire must take the lock")
		}},
		{"release/keeps-place", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			// A failed attempt lets go of a node that granted it, and keeps (or takes) its place.
			admin(t, addr, "SET", k.Lock, ours, "PX", ttl)
			got := mustEval(t, n, script(t, "release"), releaseKeys(k), ours, "w", "PUBLISH", "waiter", "stay", "7", "10000")
			assert.Equal(t, []int64{1, 0}, got, "release of our lock by a waiter that keeps its place replied %s, want {1, 0}: it does not wake itself", format(got))
			assert.Equal(t, "7", admin(t, addr, "ZSCORE", k.Queue, "waiter"), "a waiter that keeps its place must be queued at its ticket")
			// The queue's sets get two places' time when they would expire before the place.
			wantPTTL(t, addr, k.Queue, 10001, 20000, "after queueing a waiter whose place is kept 10000 ms")
		}},
		{"release/not-ours", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, theirs, "PX", ttl)
			got := mustEval(t, n, script(t, "release"), releaseKeys(k), releaseArgs(ours, "w")...)
			assert.Equal(t, []int64{0, 0}, got, "release of another owner's lock replied %s, want {0, 0}", format(got))
			assert.Equal(t, theirs, admin(t, addr, "GET", k.Lock), "release must not delete another owner's lock")
		}},
		{"release/missing", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEval(t, n, script(t, "release"), releaseKeys(k), releaseArgs(ours, "w")...)
			assert.Equal(t, []int64{0, 0, 1}, got, "release of a missing lock replied %s, want {0, 0, 1} (nothing of ours here, and no other owner)", format(got))
		}},
		{"acquire/identifies-the-server", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), identifying(acquireArgs(ours, ttl))...)
			require.True(t, len(got) == 3 || len(got) == 7, "acquire asked to identify the server replied %s, want {1, fence, 0} and, if the server reports a run_id, its four parts", format(got))
			assert.Equal(t, int64(1), got[0], "acquire of a free lock, asked to identify the server, replied %s", format(got))
			if len(got) == 3 {
				return // a server that reports no run_id (miniredis)
			}
			info, _ := adminAt(t, addr, k.Lock, "INFO", "server").(string) // on a cluster: the lock's master
			_, rest, _ := strings.Cut(info, "run_id:")
			require.GreaterOrEqual(t, len(rest), 40, "the server reports no run_id, but acquire replied %s", format(got))
			want := []int64{got[0], got[1], 0}
			for i := 0; i < 40; i += 10 {
				part, err := strconv.ParseInt(rest[i:i+10], 16, 64)
				require.NoError(t, err)
				want = append(want, part)
			}
			assert.Equal(t, want, got, "acquire asked to identify the server replied %s, want the server's run_id in four parts after {1, fence, 0}: the Node must pass every argument and keep integer replies exact", format(got))
		}},
		{"extend/fence-raises", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, ours, "PX", ttl)
			admin(t, addr, "SET", k.Fence, "5")
			got := mustEval(t, n, script(t, "extend"), extendKeys(k), ours, ttl, "w", bigFenceStr)
			assert.Equal(t, []int64{1}, got, "extend with a fence while we hold the lock replied %s, want {1}", format(got))
			assert.Equal(t, bigFenceStr, admin(t, addr, "GET", k.Fence), "extend with a fence while we hold the lock must raise the fence counter to it")
		}},
		{"extend/fence-never-lowers", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, ours, "PX", ttl)
			admin(t, addr, "SET", k.Fence, bigFenceStr)
			got := mustEval(t, n, script(t, "extend"), extendKeys(k), ours, ttl, "w", "5")
			assert.Equal(t, []int64{1}, got, "extend with a lower fence while we hold the lock replied %s, want {1}", format(got))
			assert.Equal(t, bigFenceStr, admin(t, addr, "GET", k.Fence), "extend must never lower the fence counter")
		}},
		{"extend/fence-not-ours", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, theirs, "PX", ttl)
			admin(t, addr, "SET", k.Fence, "5")
			got := mustEval(t, n, script(t, "extend"), extendKeys(k), ours, ttl, "w", bigFenceStr)
			assert.Equal(t, []int64{0}, got, "extend with a fence of another owner's lock replied %s, want {0}", format(got))
			assert.Equal(t, "5", admin(t, addr, "GET", k.Fence), "extend of another owner's lock must leave the counter alone")
		}},
	}
	cases = append(cases, readerScriptCases()...)
	cases = append(cases, semaphoreScriptCases()...)
	cases = append(cases, electionScriptCases()...)
	cases = append(cases, statusScriptCases()...)
	checks := make([]check, len(cases))
	for i, c := range cases {
		checks[i] = check{c.name, func(t *testing.T, e *env) {
			addr := e.server(t)
			c.run(t, e.node(t, addr), addr, core.NewKeys(prefix(t), "scripts"))
		}}
	}
	return checks
}

// wantPTTL checks that key's remaining TTL is within [lo, hi] milliseconds.
func wantPTTL(t *testing.T, addr, key string, lo, hi int64, when string) {
	t.Helper()
	got, _ := admin(t, addr, "PTTL", key).(int64)
	assert.True(t, got >= lo && got <= hi, "%s, PTTL is %d ms, want %d to %d: the Node must pass ARGV unchanged", when, got, lo, hi)
}
