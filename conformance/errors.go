package conformance

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noscriptChecks: each core script is called right after SCRIPT FLUSH, three times over, so
// that EVALSHA meets NOSCRIPT every time; Eval (EvalStrings for leader, as core calls it)
// must fall back to EVAL and succeed.
func noscriptChecks() []check {
	var checks []check
	for _, s := range core.Scripts() {
		checks = append(checks, check{s.Name(), func(t *testing.T, e *env) {
			addr := e.server(t)
			n := e.node(t, addr)
			k := core.NewKeys(prefix(t), "noscript")
			keys, args, want := emptyCall(s, k)
			for round := 1; round <= 3; round++ {
				adminAll(t, addr, "FLUSHALL")
				adminAll(t, addr, "SCRIPT", "FLUSH")
				for _, exists := range adminAll(t, addr, "SCRIPT", "EXISTS", s.SHA1()) {
					require.Equal(t, []any{int64(0)}, exists, "conformance: SCRIPT FLUSH did not forget the script")
				}
				if want := emptyStrings(s); want != nil {
					got, err := evalStrings(n, s, keys, args...)
					require.NoError(t, err, "round %d: EvalStrings(%s) right after SCRIPT FLUSH failed: on a NOSCRIPT reply to EVALSHA the Node must fall back to EVAL", round, s.Name())
					assert.True(t, stringsMatch(want, got), "EvalStrings(%s) on an empty server replied %q, want %q (\"*\": any value)", s.Name(), got, want)
					continue
				}
				got, err := eval(n, s, keys, args...)
				require.NoError(t, err, "round %d: Eval(%s) right after SCRIPT FLUSH failed: on a NOSCRIPT reply to EVALSHA the Node must fall back to EVAL", round, s.Name())
				if want != nil {
					want(t, got)
				}
			}
		}})
	}
	return checks
}

// emptyStrings returns what s, a script that core reads with EvalStrings, replies on an
// empty server, "*" standing for any value (the server's time, its run_id); nil for a
// script that core reads with Eval (see emptyCall).
func emptyStrings(s *core.Script) []string {
	switch s.Name() {
	case "leader":
		return []string{"0"}
	case "status":
		return []string{"*", "*", "", "-2", "", "", "-2", "", "0", "0", "0", "0"}
	}
	return nil
}

// stringsMatch reports whether got is want, "*" in want matching any value.
func stringsMatch(want, got []string) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if want[i] != "*" && want[i] != got[i] {
			return false
		}
	}
	return true
}

// emptyCall returns arguments for s on an empty server, and what s must reply there
// through Eval (nil: any reply, for a script this suite does not know or that core reads
// with EvalStrings).
func emptyCall(s *core.Script, k core.Keys) (keys, args []string, want func(*testing.T, []int64)) {
	equal := func(want ...int64) func(*testing.T, []int64) {
		return func(t *testing.T, got []int64) {
			assert.Equal(t, want, got, "Eval(%s) on an empty server replied %s, want %v", s.Name(), format(got), want)
		}
	}
	switch s.Name() {
	case "acquire":
		return acquireKeys(k), acquireArgs(ours, ttl), func(t *testing.T, got []int64) {
			assert.True(t, len(got) >= 2 && got[0] == 1, "Eval(acquire) of a free lock replied %s, want {1, fence}", format(got))
		}
	case "extend":
		return extendKeys(k), []string{ours, ttl, "w"}, equal(0)
	case "release":
		return releaseKeys(k), releaseArgs(ours, "w"), equal(0, 0, 1)
	case "proclaim":
		return []string{k.Lock, k.Leader}, []string{ours, k.LeaderChannel(), "PUBLISH", "v", ttl}, equal(0)
	case "leader": // read with EvalStrings: see emptyStrings
		return []string{k.Lock, k.Leader}, nil, nil
	case "status": // read with EvalStrings: see emptyStrings
		return statusKeys(k), nil, nil
	}
	return []string{k.Lock, k.Fence}, []string{ours, ttl}, nil
}

// errorChecks: a script that fails on the server, or replies something other than an array
// of integers, must give an error and no reply.
func errorChecks() []check {
	k := core.NewKeys("conformance:", "errors")
	cases := []struct {
		name    string
		setup   []string // an admin command run first, if any
		src     string   // the script's source; "" for core's acquire script
		keys    []string
		args    []string
		message string // what the error must mention ("" for anything)
		// permanent: the error must be one that core.Permanent knows (no retry changes it)
		permanent bool
		what      string // what happened on the server, for the failure message
	}{
		{
			name: "server-error/wrongtype", setup: []string{"HSET", k.Lock, "field", "value"},
			keys: acquireKeys(k), args: acquireArgs(ours, ttl),
			message: "WRONGTYPE", what: "acquire failed with WRONGTYPE (the lock key holds a hash)",
			permanent: true,
		},
		{
			name:    "server-error/error-reply",
			src:     "return redis.error_reply('CONFORMANCE deliberate error')",
			keys:    []string{k.Lock},
			message: "CONFORMANCE deliberate error", what: "the script replied with an error",
		},
		{
			name: "bad-reply/string",
			src:  "return 'x'", keys: []string{k.Lock},
			what: "the script replied with a string, not an array of integers",
		},
		{
			name: "bad-reply/integer",
			src:  "return 1", keys: []string{k.Lock},
			what: "the script replied with an integer, not an array of integers",
		},
		{
			name: "bad-reply/zero",
			src:  "return 0", keys: []string{k.Lock},
			what: "the script replied with the integer 0, not an array of integers",
		},
		{
			name: "bad-reply/text-in-array",
			src:  "return {1, 'x'}", keys: []string{k.Lock},
			what: "the script replied with an array holding text",
		},
		{
			name: "bad-reply/number-as-text",
			src:  "return {1, '7'}", keys: []string{k.Lock},
			what: "the script replied with an array holding the text \"7\", not an integer",
		},
		{
			name: "bad-reply/nil-in-array",
			src:  "return {1, redis.call('GET', KEYS[1])}", keys: []string{k.Lock},
			what: "the script replied with an array holding a nil element (GET of a missing key), not an integer",
		},
		{
			name: "bad-reply/nested-array",
			src:  "return {1, {2}}", keys: []string{k.Lock},
			what: "the script replied with a nested array",
		},
	}
	var checks []check
	for _, c := range cases {
		checks = append(checks, check{c.name, func(t *testing.T, e *env) {
			addr := e.server(t)
			n := e.node(t, addr)
			if c.setup != nil {
				admin(t, addr, c.setup...)
			}
			s := core.NewScript("conformance", c.src)
			if c.src == "" {
				s = script(t, "acquire")
			}
			got, err := eval(n, s, c.keys, c.args...)
			if err == nil {
				t.Fatalf("Eval returned reply %s and no error when %s: an error must be returned as an error, never as a reply", format(got), c.what)
			}
			assert.Empty(t, got, "Eval returned error %q together with reply %s when %s: an error comes with no (partial) reply", err, format(got), c.what)
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				t.Errorf("Eval returned %q when %s: the server had replied, so the error must say what it replied, at once; a context's error means the Node waited for more (read the reply as an array's length?)", err, c.what)
			}
			if c.message != "" {
				assert.Contains(t, err.Error(), c.message, "when %s, the error must keep the server's message", c.what)
			}
			if c.permanent && !core.Permanent(err) {
				t.Errorf("when %s, Eval returned %q, which core.Permanent does not know: return the server's error with its message first (%s...), or wrap it so that its Error() still starts with it, or the lock retries what no retry can fix", c.what, err, c.message)
			}
			t.Logf("%s: %v", c.what, err)
		}})
	}
	return checks
}

// closedChecks: once the driver client under a Node is closed (Harness.CloseClient), every
// call fails at once with an error that matches core.ErrClosed.
func closedChecks() []check {
	return []check{{"closed-client", func(t *testing.T, e *env) {
		if e.h.CloseClient == nil {
			t.Skip("conformance: the Harness gives no CloseClient, so no check ran on a closed client; set Harness.CloseClient to a func(t testing.TB, n core.Node) that closes the driver client under n")
		}
		addr := e.server(t)
		n := e.node(t, addr)
		k := core.NewKeys(prefix(t), "closed")
		mustEval(t, n, script(t, "extend"), extendKeys(k), ours, ttl, "w") // connected
		e.h.CloseClient(t, n)
		calls := map[string]func() (string, error){
			"Eval": func() (string, error) {
				got, err := eval(n, script(t, "extend"), extendKeys(k), ours, ttl, "w")
				if got != nil {
					return format(got), err
				}
				return "", err
			},
			"EvalStrings": func() (string, error) {
				got, err := evalStrings(n, script(t, "leader"), []string{k.Lock, k.Leader})
				if got != nil {
					return fmt.Sprintf("%q", got), err
				}
				return "", err
			},
		}
		for method, call := range calls {
			var got string
			var err error
			var elapsed time.Duration
			ok := true
			// A driver may close its connections in the background (a cluster client does): a
			// call that succeeds right after the close is accepted, until the first error.
			eventually(waitBound, func() bool {
				elapsed, ok = withinBound(t, ctxBound, func() {}, func() { got, err = call() })
				return !ok || err != nil
			})
			switch {
			case !ok:
				t.Errorf("%s on a Node whose driver client was closed had not returned within %v: it must fail at once", method, ctxBound)
			case err == nil:
				t.Errorf("%s on a Node whose driver client was closed %v ago still returned %s and no error", method, waitBound, got)
			case !errors.Is(err, core.ErrClosed):
				t.Errorf("%s on a Node whose driver client was closed returned %q (%T) after %v, which does not match core.ErrClosed under errors.Is: wrap the driver's closed-client error with core.ErrClosed (fmt.Errorf(\"%%w: %%w\", core.ErrClosed, err)), or core takes it for a node failure and AcquireWait retries until its context ends", method, err, err, elapsed.Round(time.Millisecond))
			}
		}
	}}}
}
