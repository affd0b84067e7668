package conformance

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A lock over several names at once (core.NewSetKeys) runs core's acquire and release
// scripts with each name's six KEYS, name after name: 18 KEYS for a set of three names.
// acquire takes every name or none; a waiter refused is queued in every name's queue,
// recorded in each as "<w or r> <channel>", its channel its first name's (core.Keys.Wake).
// A release frees every name of the caller's, and wakes the first waiter of each freed name
// as a lock's release does, on the channel that waiter recorded: a waiter of a name other
// than the first alone is woken on that name's channel. A reader set runs acquire and
// release in mode "r" with the same KEYS, and extend with each name's lock key and readers
// key (readerSetCases). On a Redis Cluster the names must share one slot, as they do under
// a prefix with a hash tag.

// setNames are the names of the sets the checks lock: three, so a set's calls pass 18 KEYS.
var setNames = []string{"a", "b", "c"}

// setPrefix returns a key prefix of the check's own with a hash tag, so that on a Redis
// Cluster every name of a set is in one slot, as core.NewSetKeys asks.
func setPrefix(t *testing.T) string { return prefix(t) + "{set}:" }

// setKeys returns the keys of the set of names under prefix.
func setKeys(t *testing.T, prefix string, names ...string) core.Keys {
	t.Helper()
	k, err := core.NewSetKeys(prefix, names)
	require.NoError(t, err, "conformance: core.NewSetKeys")
	return k
}

// setScriptKeys are the KEYS of acquire and release for the set of k, as core passes them:
// each name's six (core.Keys.ScriptKeys), name after name. Each call makes a new slice.
func setScriptKeys(k core.Keys) []string {
	var keys []string
	for _, n := range k.Set {
		keys = append(keys, n.ScriptKeys()...)
	}
	return keys
}

// setRecord is a set's waiter w as the acquire script records it in each name's waiters
// hash, for waiterArgs(token, ttl, w, ...): "w " and its channel, the set's first name's
// (core.Keys.Wake), whichever name it waits for.
func setRecord(k core.Keys, w string) string { return "w " + k.Wake(w) }

// readerSetRecord is a reader set's waiter r as acquire records it in each name's waiters
// hash, for readerWaiterArgs(token, ttl, r, ...): "r " and its first name's channel.
func readerSetRecord(k core.Keys, r string) string { return "r " + k.Wake(r) }

// setReaderExtendKeys are the KEYS of extend for a reader of the set of k, as core passes
// them: each name's lock key and readers key, name after name.
func setReaderExtendKeys(k core.Keys) []string {
	var keys []string
	for _, n := range k.Set {
		keys = append(keys, readerExtendKeys(n)...)
	}
	return keys
}

// mustEvalSet runs the script called name for the set of k, with its KEYS (setScriptKeys)
// and args, and fails the check on an error.
func mustEvalSet(t *testing.T, n core.Node, name string, k core.Keys, args ...string) []int64 {
	t.Helper()
	keys := setScriptKeys(k)
	got, err := eval(n, script(t, name), keys, args...)
	if err != nil {
		t.Fatalf("Eval(%s) of a set of %d names (%d KEYS) on a healthy server returned error %v: the Node must pass every name's six KEYS, name after name, and return the script's reply", name, len(k.Set), len(keys), err)
	}
	return got
}

// holdSet makes token the holder of every name of the set of k, for ttl ms.
func holdSet(t *testing.T, addr string, k core.Keys, token string) {
	t.Helper()
	for _, n := range k.Set {
		admin(t, addr, "SET", n.Lock, token, "PX", ttl)
	}
}

// acquireHeldSet runs acquire by waiter w (ticket 7) of the set of k, whose second name
// another owner holds for 5000 ms, and checks the reply and that it took nothing and is
// queued once, its attempt and set recorded, in every name's queue. what says which call
// this is.
func acquireHeldSet(t *testing.T, n core.Node, addr string, k core.Keys, what string) {
	t.Helper()
	got := mustEvalSet(t, n, "acquire", k, waiterArgs("w-token", ttl, "w", "7")...)
	require.Len(t, got, 2, "%s replied %s, want {0, pttl}", what, format(got))
	assert.Equal(t, int64(0), got[0], "%s replied %s, want {0, pttl}: a set is taken whole or not at all", what, format(got))
	assert.True(t, got[1] > 0 && got[1] <= 5000, "%s replied pttl %d, want that of the name held for 5000 ms more, 0 < pttl <= 5000", what, got[1])
	for i, name := range k.Set {
		if i == 1 {
			assert.Equal(t, theirs, admin(t, addr, "GET", name.Lock), "%s must leave the name another owner holds alone", what)
		} else {
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Lock), "%s took name %q though another owner holds %q: a set is taken whole or not at all", what, name.Name, k.Set[1].Name)
		}
		assert.Equal(t, int64(1), admin(t, addr, "ZCARD", name.Queue), "after %s, the queue of name %q must hold the waiter once: the Node must pass each name's six KEYS, name after name", what, name.Name)
		assert.Equal(t, "7", admin(t, addr, "ZSCORE", name.Queue, "w"), "after %s, the waiter must be queued at its ticket in the queue of name %q", what, name.Name)
		assert.Equal(t, setRecord(k, "w"), admin(t, addr, "HGET", name.Waiters, "w"),
			"after %s, the waiters hash of name %q must record the waiter as a writer, with its channel (the set's first name's): the Node must pass every KEYS and ARGV in order, unchanged", what, name.Name)
		assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Fence), "%s must advance no fence counter, of name %q", what, name.Name)
	}
}

// setChecks are the sets group: a set's calls of the acquire and release scripts through
// the Node (every name's six KEYS passed, in order), a reader set's of acquire, extend and
// release in mode "r" (readerSetCases), and the slots of a set's keys on a Redis Cluster.
func setChecks() []check {
	cases := []scriptCase{
		{"acquire/free", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			// Far-apart counters: the last name's above any server clock, the first's far below.
			admin(t, addr, "SET", k.Set[0].Fence, "5")
			admin(t, addr, "SET", k.Set[2].Fence, bigFenceStr)
			got := mustEvalSet(t, n, "acquire", k, acquireArgs(ours, ttl)...)
			want := []int64{1, bigFence + 1}
			cause := "the Node must pass every name's six KEYS, name after name, and carry 64-bit integers exactly"
			if len(got) == 2 && got[1] > want[1] {
				cause = "the counter advanced more than once: the script ran more than once for one Eval"
			}
			assert.Equal(t, want, got, "acquire of a set of 3 free names, their fence counters at 5, none and %d, replied %s, want %v, the fence one past the largest: %s", bigFence, format(got), want, cause)
			for _, name := range k.Set {
				assert.Equal(t, ours, admin(t, addr, "GET", name.Lock), "after acquire of a set of 3 free names, the lock key of name %q must hold our token: the Node must pass every KEYS and ARGV in order, unchanged", name.Name)
				wantPTTL(t, addr, name.Lock, 1, ttlMS, fmt.Sprintf("after acquire of a set with TTL %s ms, of name %q", ttl, name.Name))
				assert.Equal(t, strconv.FormatInt(want[1], 10), admin(t, addr, "GET", name.Fence), "after acquire of a set, the fence counter of name %q must be raised to the set's fence", name.Name)
				wantPTTL(t, addr, name.Fence, 1, int64(core.FenceIdle/time.Millisecond), fmt.Sprintf("after acquire of a set, of the fence counter of name %q", name.Name))
			}
		}},
		{"acquire/held", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Set[1].Lock, theirs, "PX", "5000")
			acquireHeldSet(t, n, addr, k, "acquire by waiter w of a set of 3 names whose second another owner holds")
		}},
		{"acquire/held-retried", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Set[1].Lock, theirs, "PX", "5000")
			acquireHeldSet(t, n, addr, k, "acquire by waiter w of a set of 3 names whose second another owner holds")
			acquireHeldSet(t, n, addr, k, "the same acquire again, with the same token (a retry after a lost reply),")
		}},
		{"release/ours", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			holdSet(t, addr, k, ours)
			got := mustEvalSet(t, n, "release", k, releaseArgs(ours, "w")...)
			assert.Equal(t, []int64{1, 0}, got, "release of our set of 3 names replied %s, want {1, 0}", format(got))
			for _, name := range k.Set {
				assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Lock), "release of our set must delete the lock key of every name, of %q too: the Node must pass every name's six KEYS, name after name", name.Name)
			}
		}},
		{"release/wakes", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			holdSet(t, addr, k, ours)
			last := k.Set[2]
			queued := mustEval(t, n, script(t, "acquire"), acquireKeys(last), waiterArgs("w-token", ttl, "w", "1")...)
			require.Equal(t, int64(0), queued[0], "acquire by waiter w of name %q, which our set holds, replied %s, want {0, pttl}", last.Name, format(queued))
			// A set's release tells a waiter of a name other than the first on that name's own
			// channel. On a cluster, a script's PUBLISH counts the receivers on its own master only.
			sub, err := subscribe(owner(addr, last.Wake("w")), last.Wake("w"))
			require.NoError(t, err, "conformance: subscribe to the waiter's channel")
			defer sub.close()
			first, err := subscribe(owner(addr, k.Wake("w")), k.Wake("w"))
			require.NoError(t, err, "conformance: subscribe to the set's first name's channel for the waiter")
			defer first.close()
			got := mustEvalSet(t, n, "release", k, releaseArgs(ours, "w")...)
			assert.Equal(t, []int64{1, 1}, got, "release of our set of 3 names, with waiter w queued for the last listening, replied %s, want {1, 1}", format(got))
			for _, name := range k.Set[:2] {
				assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Lock), "release of our set must delete the lock key of name %q", name.Name)
			}
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", last.Lock), "release of our set must delete the lock key of name %q (the queue wakes, never grants): the Node must pass every name's six KEYS, name after name", last.Name)
			wantWake(t, sub, last.Wake("w"), "release of our set must wake the waiter of name "+strconv.Quote(last.Name)+" on its own channel")
			_, _, woken := first.next(100 * time.Millisecond)
			assert.False(t, woken, "release of our set woke the waiter of name %q on the first name's channel %q too", last.Name, k.Wake("w"))
			got = mustEval(t, n, script(t, "acquire"), acquireKeys(last), waiterArgs("w-token", ttl, "w", "1")...)
			assert.Equal(t, int64(1), got[0], "acquire by the woken waiter w of name %q replied %s, want {1, fence}", last.Name, format(got))
			assert.Equal(t, "w-token", admin(t, addr, "GET", last.Lock), "the woken waiter's acquire must take name %q", last.Name)
		}},
	}
	cases = append(cases, readerSetCases()...)
	checks := make([]check, 0, len(cases)+2)
	for _, c := range cases {
		checks = append(checks, check{c.name, func(t *testing.T, e *env) {
			addr := e.server(t)
			c.run(t, e.node(t, addr), addr, setKeys(t, setPrefix(t), setNames...))
		}})
	}
	return append(checks, check{"one-slot", checkSetOneSlot}, check{"cross-slot", checkSetCrossSlot})
}

// checkSetOneSlot: on a Redis Cluster, a set whose names share one hash tag (one slot) is
// acquired and released whole.
func checkSetOneSlot(t *testing.T, e *env) {
	if e.kind != RedisCluster {
		t.Skip("conformance: only a Redis Cluster has slots")
	}
	addr := e.server(t)
	n := e.node(t, addr)
	k := setKeys(t, setPrefix(t), setNames...)
	slot := redistest.KeySlot(k.Lock)
	for _, key := range setScriptKeys(k) {
		require.Equal(t, slot, redistest.KeySlot(key), "conformance: the keys of a set under prefix %q fall in different slots", setPrefix(t))
	}
	got := mustEvalSet(t, n, "acquire", k, acquireArgs(ours, ttl)...)
	require.Len(t, got, 2, "acquire on a Redis Cluster of a set of 3 free names of one hash tag replied %s, want {1, fence}", format(got))
	assert.Equal(t, int64(1), got[0], "acquire on a Redis Cluster of a set of 3 free names of one hash tag replied %s, want {1, fence}", format(got))
	for _, name := range k.Set {
		assert.Equal(t, ours, admin(t, addr, "GET", name.Lock), "after acquire of a set on a Redis Cluster, the lock key of name %q must hold our token", name.Name)
	}
	got = mustEvalSet(t, n, "release", k, releaseArgs(ours, "w")...)
	assert.Equal(t, []int64{1, 0}, got, "release on a Redis Cluster of our set of 3 names of one hash tag replied %s, want {1, 0}", format(got))
	for _, name := range k.Set {
		assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Lock), "release of our set on a Redis Cluster must delete the lock key of name %q", name.Name)
	}
}

// checkSetCrossSlot: on a Redis Cluster, acquire and release of a set whose names fall in
// different slots (a prefix without a hash tag) are an error that core.Permanent knows,
// never a panic, and take nothing.
func checkSetCrossSlot(t *testing.T, e *env) {
	if e.kind != RedisCluster {
		t.Skip("conformance: only a Redis Cluster refuses a script's keys of different slots")
	}
	addr := e.server(t)
	n := e.node(t, addr)
	k := setKeys(t, prefix(t), "a", "b")
	require.NotEqual(t, redistest.KeySlot(k.Set[0].Lock), redistest.KeySlot(k.Set[1].Lock), "conformance: the names of the set must fall in different slots")
	for _, c := range []struct {
		name string
		args []string
	}{{"acquire", acquireArgs(ours, ttl)}, {"release", releaseArgs(ours, "w")}} {
		var got []int64
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("Eval(%s) of a set whose names are in different slots panicked: %v; it must return an error", c.name, r)
				}
			}()
			got, err = eval(n, script(t, c.name), setScriptKeys(k), c.args...)
		}()
		require.Error(t, err, "Eval(%s) of a set whose names are in different slots replied %s and no error", c.name, format(got))
		assert.Empty(t, got, "Eval(%s) returned error %q together with reply %s", c.name, err, format(got))
		assert.True(t, core.Permanent(err), "Eval(%s) of a set whose names are in different slots returned %q, which core.Permanent does not know: return the server's CROSSSLOT error, or one that matches core.ErrInvalid, so that the lock fails at once instead of retrying", c.name, err)
	}
	for _, name := range k.Set {
		assert.Equal(t, int64(0), admin(t, addr, "EXISTS", name.Lock), "acquire of a set whose names are in different slots took name %q", name.Name)
	}
}
