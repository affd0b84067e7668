package conformance

import (
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crossSlotChecks: on a Redis Cluster, a script given keys of different slots cannot run.
// Core never sends such keys (see core.NewKeys), but a key prefix or a Node wrapper could:
// Eval and EvalStrings must then return an error that core.Permanent knows (the server's
// CROSSSLOT, or one that matches core.ErrInvalid), so that a lock fails at once, and never
// panic.
func crossSlotChecks() []check {
	return []check{{"cross-slot", func(t *testing.T, e *env) {
		if e.kind != RedisCluster {
			t.Skip("conformance: only a Redis Cluster refuses a script's keys of different slots")
		}
		addr := e.server(t)
		n := e.node(t, addr)
		a, b := prefix(t)+"{a}", prefix(t)+"{b}"
		require.NotEqual(t, redistest.KeySlot(a), redistest.KeySlot(b))
		s := core.NewScript("conformance-cross-slot", "return {1}")
		var got []int64
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("Eval of a script with keys in different slots panicked: %v; it must return an error", r)
				}
			}()
			got, err = eval(n, s, []string{a, b})
		}()
		require.Error(t, err, "Eval of a script with keys in different slots replied %s and no error", format(got))
		assert.Empty(t, got, "Eval returned error %q together with reply %s", err, format(got))
		assert.True(t, core.Permanent(err), "Eval of a script with keys in different slots returned %q, which core.Permanent does not know: return the server's CROSSSLOT error, or one that matches core.ErrInvalid, so that the lock fails at once instead of retrying", err)
		var strs []string
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("EvalStrings of a script with keys in different slots panicked: %v; it must return an error", r)
				}
			}()
			strs, err = evalStrings(n, s, []string{a, b})
		}()
		require.Error(t, err, "EvalStrings of a script with keys in different slots replied %q and no error", strs)
		assert.Empty(t, strs, "EvalStrings returned error %q together with reply %q", err, strs)
		assert.True(t, core.Permanent(err), "EvalStrings of a script with keys in different slots returned %q, which core.Permanent does not know: return the server's CROSSSLOT error, or one that matches core.ErrInvalid, so that the lock fails at once instead of retrying", err)
	}}}
}
