package conformance

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setNXChecks check the optional core.Setter: SET key value NX PX ttl, in one command,
// with the TTL in milliseconds, false (and no error) for a key that exists, an error for a
// TTL under 1 ms, and ctx honoured as Eval honours it.
func setNXChecks() []check {
	checks := []check{
		{"free", func(t *testing.T, e *env) {
			addr, s := setterOn(t, e)
			k := core.NewKeys(prefix(t), "setnx")
			set, err := setNX(s, k.Lock, ours, ttlMS*time.Millisecond)
			require.NoError(t, err, "SetNX of a free key on a healthy server")
			assert.True(t, set, "SetNX of a free key reported false, want true")
			assert.Equal(t, ours, admin(t, addr, "GET", k.Lock), "after SetNX, the key must hold the value given")
			wantPTTL(t, addr, k.Lock, 1, ttlMS, "after SetNX with TTL "+ttl+" ms")
		}},
		{"held", func(t *testing.T, e *env) {
			addr, s := setterOn(t, e)
			k := core.NewKeys(prefix(t), "setnx")
			admin(t, addr, "SET", k.Lock, theirs, "PX", "5000")
			set, err := setNX(s, k.Lock, ours, ttlMS*time.Millisecond)
			require.NoError(t, err, "SetNX of a key that exists must report false, not an error")
			assert.False(t, set, "SetNX of a key that exists reported true, want false")
			assert.Equal(t, theirs, admin(t, addr, "GET", k.Lock), "SetNX must leave a key that exists as it was (NX)")
			wantPTTL(t, addr, k.Lock, 1, 5000, "after SetNX of a key that exists (TTL 5000 ms)")
		}},
		{"no-ttl", func(t *testing.T, e *env) {
			addr, s := setterOn(t, e)
			k := core.NewKeys(prefix(t), "setnx")
			set, err := setNX(s, k.Lock, ours, 0)
			assert.Error(t, err, "SetNX with a TTL of 0 must be an error (core never sends one), not a key without expiry")
			assert.False(t, set, "SetNX with a TTL of 0 reported true")
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Lock), "SetNX with a TTL of 0 set the key")
		}},
		{"sub-millisecond-ttl", func(t *testing.T, e *env) {
			addr, s := setterOn(t, e)
			for i, ttl := range []time.Duration{time.Nanosecond, 500 * time.Microsecond, time.Millisecond - time.Nanosecond} {
				k := core.NewKeys(prefix(t), "setnx-"+strconv.Itoa(i))
				set, err := setNX(s, k.Lock, ours, ttl)
				assert.Error(t, err, "SetNX with a TTL of %v must be an error (a TTL under 1ms is, not only 0), not a key set with a TTL the Node rounded (up to 1 ms, or down to none)", ttl)
				assert.False(t, set, "SetNX with a TTL of %v reported true", ttl)
				assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Lock), "SetNX with a TTL of %v set the key", ttl)
			}
		}},
		{"one-command", func(t *testing.T, e *env) {
			if e.kind == Miniredis {
				t.Skip("conformance: miniredis has no INFO commandstats: checked on redis-server")
			}
			addr, s := setterOn(t, e)
			k := core.NewKeys(prefix(t), "setnx")
			adminAll(t, addr, "CONFIG", "RESETSTAT")
			set, err := setNX(s, k.Lock, ours, ttlMS*time.Millisecond)
			require.NoError(t, err, "SetNX of a free key on a healthy server")
			require.True(t, set, "SetNX of a free key reported false, want true")
			set, err = setNX(s, k.Lock, theirs, ttlMS*time.Millisecond)
			require.NoError(t, err, "SetNX of a key that exists")
			require.False(t, set, "SetNX of a key that exists reported true")
			for _, other := range []string{"setnx", "pexpire", "expire", "pexpireat", "expireat", "psetex", "setex", "multi"} {
				if n := commandCalls(t, addr, other); n > 0 {
					t.Errorf("two SetNX calls sent %s %d times: SetNX must set the key with its TTL in one command, SET key value NX PX ttl (a SETNX and then a PEXPIRE leave a key without expiry if the client dies between them)", strings.ToUpper(other), n)
				}
			}
			assert.Equal(t, int64(2), commandCalls(t, addr, "set"), "two SetNX calls must send SET (NX PX) once each")
		}},
		{"milliseconds", func(t *testing.T, e *env) {
			addr, s := setterOn(t, e)
			k := core.NewKeys(prefix(t), "setnx")
			set, err := setNX(s, k.Lock, ours, 1500*time.Millisecond)
			require.NoError(t, err, "SetNX of a free key on a healthy server")
			assert.True(t, set, "SetNX of a free key reported false, want true")
			wantPTTL(t, addr, k.Lock, 1001, 1500, "after SetNX with TTL 1500 ms (not to be rounded to seconds)")
		}},
	}
	key := core.NewKeys("conformance:", "context").Lock
	for _, c := range ctxChecks("SetNX", func(t *testing.T, n core.Node) call {
		s := n.(core.Setter)
		return func(ctx context.Context) (string, error) {
			set, err := s.SetNX(ctx, key, ours, ttlMS*time.Millisecond)
			if set {
				return "true", err
			}
			return "", err
		}
	}) {
		checks = append(checks, check{"context/" + c.name, c.run})
	}
	return checks
}

// skipUnlessSetter skips the setnx checks for a Node that is not a core.Setter.
func skipUnlessSetter(t *testing.T, e *env) {
	t.Helper()
	if _, ok := e.node(t, e.server(t)).(core.Setter); !ok {
		t.Skip("conformance: the Node does not implement core.Setter (optional: core then runs the acquire script instead)")
	}
}

// setterOn starts a server and returns its address and the harness's Node on it, as a
// core.Setter.
func setterOn(t *testing.T, e *env) (string, core.Setter) {
	t.Helper()
	addr := e.server(t)
	return addr, e.node(t, addr).(core.Setter)
}

// setNX calls s.SetNX with a generous deadline.
func setNX(s core.Setter, key, value string, ttl time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	return s.SetNX(ctx, key, value, ttl)
}
