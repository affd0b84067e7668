package conformance

import (
	"slices"
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
)

// argumentChecks: the Node passes every argument as given, empty ones included, and keeps
// nothing of the caller's slices once Eval returned: core shares one keys and args slice
// across nodes and calls.
func argumentChecks() []check {
	return []check{
		{"kept-intact", func(t *testing.T, e *env) {
			addr := e.server(t)
			n := e.node(t, addr)
			a, b := core.NewKeys(prefix(t), "args-a"), core.NewKeys(prefix(t), "args-b")
			keys, args := acquireKeys(a), acquireArgs(ours, ttl)
			wantKeys, wantArgs := slices.Clone(keys), slices.Clone(args)
			mustEval(t, n, script(t, "acquire"), keys, args...)
			// Later calls on the same Node, with other keys and args of other lengths.
			mustEval(t, n, script(t, "extend"), extendKeys(a), ours, "20000", "w")
			mustEval(t, n, script(t, "acquire"), acquireKeys(b), waiterArgs("w-token", "30000", "w", "9")...)
			mustEval(t, n, script(t, "release"), releaseKeys(b), releaseArgs("w-token", "w")...)
			assert.Equal(t, wantKeys, keys, "the keys given to an earlier Eval changed while the Node made later calls: the Node must not keep or reuse the caller's slices after Eval returns (core shares them between calls)")
			assert.Equal(t, wantArgs, args, "the args given to an earlier Eval changed while the Node made later calls: the Node must not keep or reuse the caller's slices after Eval returns (core shares them between calls)")
		}},
		{"all-keys", func(t *testing.T, e *env) {
			addr := e.server(t)
			n := e.node(t, addr)
			k := core.NewKeys(prefix(t), "args")
			// The script compares each key with the argument of its position.
			s := core.NewScript("conformance-keys", `local r = {#KEYS}
for i = 1, #KEYS do r[#r + 1] = KEYS[i] == ARGV[i] and 1 or 0 end
return r`)
			sem := core.NewSemaphoreKeys(prefix(t), "args", manyPermits)
			for _, keys := range [][]string{acquireKeys(k), releaseKeys(k), semAcquireKeys(sem)} {
				got := mustEval(t, n, s, keys, keys...)
				want := []int64{int64(len(keys))}
				for range keys {
					want = append(want, 1)
				}
				assert.Equal(t, want, got, "a script given the %d keys %q, and the same strings as args, replied {#KEYS, and for each key whether it equals the arg of its position} %s, want %v: the Node must pass every key, in order, unchanged (core's acquire and release take six; a semaphore's acquire and release six and then its permits, a few dozen)", len(keys), keys, format(got), want)
			}
		}},
		{"empty", func(t *testing.T, e *env) {
			addr := e.server(t)
			n := e.node(t, addr)
			k := core.NewKeys(prefix(t), "args")
			s := core.NewScript("conformance-arguments", `local function len(i) if ARGV[i] then return string.len(ARGV[i]) end return -1 end
return {#KEYS, #ARGV, len(1), len(2), len(3)}`)
			got := mustEval(t, n, s, []string{k.Lock}, "", "x", "")
			assert.Equal(t, []int64{1, 3, 0, 1, 0}, got, "a script given 1 key and the args \"\", \"x\", \"\" counted {#KEYS, #ARGV, and each arg's length (-1: missing)} as %s, want {1, 3, 0, 1, 0}: the Node must pass every argument, empty ones included, in order (core passes an empty waiter id)", format(got))
		}},
	}
}
