package conformance

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replyChecks: integer replies keep their sign, and each reply is memory of its caller's own.
func replyChecks() []check {
	return []check{
		{"negative/held-without-expiry", func(t *testing.T, e *env) {
			addr := e.server(t)
			n := e.node(t, addr)
			k := core.NewKeys(prefix(t), "replies")
			admin(t, addr, "SET", k.Lock, theirs) // no expiry: PTTL -1
			got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), acquireArgs(ours, ttl)...)
			assert.Equal(t, []int64{0, -1}, got, "acquire of a lock held without expiry replied %s, want {0, -1}: the Node must keep the sign of integer replies (a lost sign makes a refusal look like a grant)", format(got))
		}},
		{"negative/restart-guard", func(t *testing.T, e *env) {
			if e.kind == Miniredis {
				t.Skip("conformance: miniredis cannot report its uptime, so it never abstains under the restart guard: checked on redis-server")
			}
			addr := e.server(t)
			n := e.node(t, addr)
			k := core.NewKeys(prefix(t), "replies")
			// The server started seconds ago: under a guard of an hour it abstains with {-1, wait}.
			args := acquireArgs(ours, ttl)
			args[2] = "3600"
			got := mustEval(t, n, script(t, "acquire"), acquireKeys(k), args...)
			require.Len(t, got, 2, "acquire under the restart guard on a server that just started replied %s, want {-1, wait}", format(got))
			assert.Equal(t, int64(-1), got[0], "acquire under the restart guard on a server that just started replied %s, want {-1, wait}: the Node must keep the sign of integer replies (a lost sign turns the node's abstention into a grant)", format(got))
			// Uptime is in whole seconds: the wait may be a second longer than the guard.
			assert.True(t, got[1] > 0 && got[1] <= 3601_000, "acquire under a restart guard of 3600 s replied wait %d ms, want 0 < wait <= 3601000", got[1])
			assert.Equal(t, int64(0), adminAt(t, addr, k.Lock, "EXISTS", k.Lock), "a node that abstains under the restart guard must not set the lock")
		}},
		{"nil", func(t *testing.T, e *env) {
			addr := e.server(t)
			n := e.node(t, addr)
			k := core.NewKeys(prefix(t), "replies")
			for _, src := range []string{"return nil", "return false", "return redis.call('GET', KEYS[1])"} {
				s := core.NewScript("conformance-nil", src)
				got, err := eval(n, s, []string{k.Lock})
				if err == nil {
					t.Errorf("a script that replied nil (%q) gave reply %s and no error: a nil reply is an error, not an empty array (core would read a lock's state from nothing)", src, format(got))
				}
				if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
					t.Errorf("a script that replied nil (%q) gave %q: the server had replied, so the error must say what it replied, at once; a context's error means the Node waited for more", src, err)
				}
				assert.Empty(t, got, "a script that replied nil (%q) gave error %v together with reply %s", src, err, format(got))
			}
		}},
		{"long", func(t *testing.T, e *env) {
			addr := e.server(t)
			n := e.node(t, addr)
			k := core.NewKeys(prefix(t), "replies")
			const length = 700
			// Each element is distinct and needs 8 bytes: a reply of several kilobytes.
			s := core.NewScript("conformance-long", "local r = {} for i = 1, tonumber(ARGV[1]) do r[i] = i * 1000003 + 4000000000 end return r")
			want := make([]int64, length)
			for i := range want {
				want[i] = int64(i+1)*1000003 + 4000000000
			}
			got := mustEval(t, n, s, []string{k.Lock}, strconv.Itoa(length))
			if !slices.Equal(want, got) {
				i := 0
				for i < min(len(got), len(want)) && got[i] == want[i] {
					i++
				}
				t.Fatalf("a script that replied %d integers gave %d, the first %d of them right: a long reply must come back whole and exact (a fixed-size reply buffer cuts it)", length, len(got), i)
			}
		}},
		{"own-memory", func(t *testing.T, e *env) {
			addr := e.server(t)
			n := e.node(t, addr)
			a, b := core.NewKeys(prefix(t), "reply-a"), core.NewKeys(prefix(t), "reply-b")
			admin(t, addr, "SET", a.Fence, bigFenceStr)
			admin(t, addr, "SET", b.Fence, strconv.FormatInt(bigFence+1000, 10))
			first := mustEval(t, n, script(t, "acquire"), acquireKeys(a), acquireArgs(ours, ttl)...)
			kept := slices.Clone(first)
			second := mustEval(t, n, script(t, "acquire"), acquireKeys(b), acquireArgs(ours, ttl)...)
			require.Equal(t, []int64{1, bigFence + 1}, kept, "acquire of a free lock with its fence counter at %d replied %s", bigFence, format(kept))
			assert.Equal(t, []int64{1, bigFence + 1001}, second, "acquire of a second free lock with its fence counter at %d replied %s", bigFence+1000, format(second))
			assert.Equal(t, kept, first, "a reply changed from %v to %s when the Node made a later call: each reply must be a slice of its caller's own, never a buffer the Node reuses (concurrent callers would read each other's replies)", kept, format(first))
		}},
	}
}
