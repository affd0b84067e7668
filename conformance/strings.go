package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echo replies its ARGV, each a bulk string.
var echo = core.NewScript("conformance-echo", "return ARGV")

// stringsChecks: EvalStrings returns each element of a script's reply as a string: a bulk
// string's bytes exactly, an integer in decimal, a nil element (Lua false) as ""; a reply
// that is not such an array is an error with no reply. It runs each script exactly once
// and honours ctx, as Eval does (the noscript, errors and closed-client checks call it too).
func stringsChecks() []check {
	checks := []check{
		{"bytes", func(t *testing.T, e *env) {
			n := e.node(t, e.server(t))
			long := make([]byte, 64<<10)
			for i := range long {
				long[i] = byte(i*7 + i>>8) // every byte value, in no simple pattern
			}
			values := []string{"", "\x00", "a\x00b", "\xff", "\x7f\x80", "\xc3\x28", "é", " spaced ", "\r\n", "-1", "0012", "$3\r\nfoo", string(long)}
			got := mustEvalStrings(t, n, echo, []string{prefix(t)}, values...)
			require.Len(t, got, len(values), "a script that replied %d bulk strings gave %d: EvalStrings must return every element", len(values), len(got))
			for i, want := range values {
				assert.True(t, got[i] == want, "element %d of a reply of bulk strings came back as %s, want %s: a bulk string's bytes must come back exactly (any bytes: empty, 0x00, non-UTF-8, CR LF, 64 KiB)", i, quote(got[i]), quote(want))
			}
		}},
		{"integers", func(t *testing.T, e *env) {
			n := e.node(t, e.server(t))
			values := []string{"0", "1", "-1", "4294967296", "-4000000000", "4503599627370496"}
			s := core.NewScript("conformance-integers", "local r = {} for i, a in ipairs(ARGV) do r[i] = tonumber(a) end return r")
			got := mustEvalStrings(t, n, s, []string{prefix(t)}, values...)
			assert.Equal(t, values, got, "a script that replied the integers %v gave %q: EvalStrings must return each integer in decimal, its sign kept", values, got)
		}},
		{"mixed", func(t *testing.T, e *env) {
			n := e.node(t, e.server(t))
			s := core.NewScript("conformance-mixed", "return {1, ARGV[1], -2, ARGV[2], false, 0}")
			got := mustEvalStrings(t, n, s, []string{prefix(t)}, "x y", "")
			assert.Equal(t, []string{"1", "x y", "-2", "", "", "0"}, got, "a script that replied {1, \"x y\", -2, \"\", false, 0} gave %q: integers in decimal, bulk strings as they are, a nil element (Lua false) as \"\"", got)
		}},
		{"empty", func(t *testing.T, e *env) {
			n := e.node(t, e.server(t))
			got := mustEvalStrings(t, n, core.NewScript("conformance-empty", "return {}"), []string{prefix(t)})
			assert.Empty(t, got, "a script that replied an empty array gave %q", got)
		}},
		{"long", func(t *testing.T, e *env) {
			n := e.node(t, e.server(t))
			values := make([]string, 1000)
			for i := range values {
				values[i] = strings.Repeat(strconv.Itoa(i), i%5)
			}
			got := mustEvalStrings(t, n, echo, []string{prefix(t)}, values...)
			assert.True(t, slices.Equal(values, got), "a script that replied %d bulk strings gave %d, not all of them right: a long reply must come back whole and exact", len(values), len(got))
		}},
		{"not-an-array", func(t *testing.T, e *env) {
			n := e.node(t, e.server(t))
			k := core.NewKeys(prefix(t), "strings")
			for _, src := range []string{"return nil", "return false", "return redis.call('GET', KEYS[1])", "return 'x'", "return 7", "return {'x', {'y'}}"} {
				got, err := evalStrings(n, core.NewScript("conformance-not-an-array", src), []string{k.Lock})
				if err == nil {
					t.Errorf("EvalStrings of a script that replied no array of strings and integers (%q) gave %q and no error: it must be an error (a nil reply is not an empty array)", src, got)
				}
				assert.Empty(t, got, "EvalStrings of %q gave error %v together with reply %q", src, err, got)
				if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
					t.Errorf("EvalStrings of %q returned %q: the server had replied, so the error must say what it replied, at once; a context's error means the Node waited for more (read the reply as an array's length?)", src, err)
				}
			}
		}},
		{"error-reply", func(t *testing.T, e *env) {
			n := e.node(t, e.server(t))
			s := core.NewScript("conformance-strings-error", "return redis.error_reply('CONFORMANCE deliberate error')")
			got, err := evalStrings(n, s, []string{prefix(t)})
			require.Error(t, err, "EvalStrings of a script that replied with an error gave %q and no error", got)
			assert.Empty(t, got, "EvalStrings returned error %q together with reply %q", err, got)
			assert.Contains(t, err.Error(), "CONFORMANCE deliberate error", "EvalStrings of a script that replied with an error returned %q: the error must keep the server's message", err)
		}},
		{"runs-once", func(t *testing.T, e *env) {
			addr := e.server(t)
			n := e.node(t, addr)
			key := core.NewKeys(prefix(t), "counting").Lock
			for i := int64(1); i <= 3; i++ {
				got := mustEvalStrings(t, n, counting, []string{key})
				runs, _ := strconv.ParseInt(admin(t, addr, "GET", key).(string), 10, 64)
				require.Equal(t, i, runs, "after %d EvalStrings of a script that counts its runs, it ran %d times (the last replied %q): each call must run the script exactly once; send EVAL only after EVALSHA failed with NOSCRIPT, never both", i, runs, got)
				assert.Equal(t, []string{strconv.FormatInt(i, 10)}, got, "EvalStrings #%d of a script that counts its runs replied %q", i, got)
			}
		}},
		{"own-memory", func(t *testing.T, e *env) {
			n := e.node(t, e.server(t))
			first := mustEvalStrings(t, n, echo, []string{prefix(t)}, "a", "b")
			kept := slices.Clone(first)
			mustEvalStrings(t, n, echo, []string{prefix(t)}, "c", "d")
			assert.Equal(t, kept, first, "a reply changed from %q to %q when the Node made a later call: each reply must be a slice of its caller's own, never a buffer the Node reuses", kept, first)
		}},
	}
	checks = append(checks, stringsRuleChecks()...)
	k := core.NewKeys("conformance:", "strings")
	for _, c := range ctxChecks("EvalStrings", func(t *testing.T, n core.Node) call {
		s := script(t, "leader")
		return func(ctx context.Context) (string, error) {
			got, err := n.EvalStrings(ctx, s, []string{k.Lock, k.Leader})
			if got != nil {
				return fmt.Sprintf("%q", got), err
			}
			return "", err
		}
	}) {
		c.name = "context/" + c.name
		checks = append(checks, c)
	}
	return checks
}

// quote renders a string for a failure message, a long one by its length and ends.
func quote(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%d bytes %q...%q", len(s), s[:8], s[len(s)-8:])
	}
	return strconv.Quote(s)
}

// evalStrings calls n.EvalStrings with a generous deadline, as eval calls Eval.
func evalStrings(n core.Node, s *core.Script, keys []string, args ...string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	return n.EvalStrings(ctx, s, keys, args...)
}

// mustEvalStrings is evalStrings that fails the check on an error.
func mustEvalStrings(t testing.TB, n core.Node, s *core.Script, keys []string, args ...string) []string {
	t.Helper()
	got, err := evalStrings(n, s, keys, args...)
	if err != nil {
		t.Fatalf("EvalStrings(%s) on a healthy server returned error %v: the Node must run the script and return its reply", s.Name(), err)
	}
	return got
}
