package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setNXChecks check the optional core.Setter: SET key value NX PX ttl, with the TTL in
// milliseconds, false (and no error) for a key that exists, and ctx honoured as Eval
// honours it.
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
