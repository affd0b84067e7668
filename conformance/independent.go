package conformance

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newLock returns a lock on name, as core's callers build one, but with
// a TTL long enough that nothing expires during a check and a per-node timeout generous
// enough for a loaded CI machine: these checks are about the Node, not about timing.
func newLock(name string) *core.Lock {
	return &core.Lock{
		Keys:        core.NewKeys("conformance:", name),
		TTL:         20 * time.Second,
		NodeTimeout: waitBound,
		DriftFactor: 0.01,
		Fence:       true,
	}
}

// nameChecks: lock names are arbitrary bytes; the Node must carry keys and arguments
// binary-safe. Each name goes through a whole cycle over core.Cluster, and the suite's own
// client checks that the server holds exactly the keys core named.
func nameChecks() []check {
	kib := strings.Repeat("1 KiB {name} ü ", 100)[:1024]
	cases := []struct{ name, lock string }{
		{"spaces", "a lock name with spaces"},
		{"unicode", "ünïcødé ключ 锁 🔒"},
		{"braces", "{braces}"},
		{"unbalanced-braces", "}{"},
		{"nested-braces", "a{b}c{d}"},
		{"control-bytes", "nul\x00 cr\r lf\n crlf\r\n"},
		{"invalid-utf8", "\xff\xfe\xfd"},
		{"1KiB", kib},
	}
	var checks []check
	for _, c := range cases {
		checks = append(checks, check{c.name, func(t *testing.T, e *env) {
			addr := e.server(t)
			cl, err := core.NewCluster([]core.Node{e.node(t, addr)})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), waitBound)
			defer cancel()
			l := newLock(c.lock)

			g, err := cl.Acquire(ctx, l)
			require.NoError(t, err, "Acquire of the free lock named %q failed", c.lock)
			assert.Positive(t, g.Fence, "Acquire of the lock named %q returned fence 0", c.lock)
			assert.Equal(t, g.Token(), admin(t, addr, "GET", l.Keys.Lock), "after Acquire of the lock named %q, the server must hold our token under exactly the key %q: the Node must pass keys binary-safe", c.lock, l.Keys.Lock)
			assert.Equal(t, int64(1), admin(t, addr, "EXISTS", l.Keys.Fence), "after Acquire of the lock named %q, the server must hold the fence key %q", c.lock, l.Keys.Fence)

			_, err = cl.Acquire(ctx, newLock(c.lock))
			assert.ErrorIs(t, err, core.ErrHeld, "a second owner's Acquire of the held lock named %q", c.lock)
			_, err = cl.Extend(ctx, g)
			assert.NoError(t, err, "Extend of the held lock named %q", c.lock)
			require.NoError(t, cl.Release(ctx, g), "Release of the held lock named %q", c.lock)
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", l.Keys.Lock), "after Release of the lock named %q its key must be gone", c.lock)
			// Within the lease's validity, a key found gone counts as let go (a resend of the release).
			assert.NoError(t, cl.Release(ctx, g), "a second Release of the lock named %q, within its validity", c.lock)
		}})
	}
	return checks
}

// independentNodesChecks: a whole lock life over 3 Nodes of the backend, each on a server of
// its own, through core.Cluster (which is Redlock's quorum over independent masters, not a
// Redis Cluster).
func independentNodesChecks() []check {
	return []check{{"three-nodes", func(t *testing.T, e *env) {
		addrs := e.servers(t, 3)
		nodes := make([]core.Node, len(addrs))
		for i, addr := range addrs {
			nodes[i] = e.node(t, addr)
		}
		cl, err := core.NewCluster(nodes)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 2*waitBound)
		defer cancel()
		a, b := newLock("cycle"), newLock("cycle")
		holds := func(h *core.Held) func() bool {
			return func() bool {
				for _, addr := range addrs {
					if v, _ := do(addr, "GET", h.Keys.Lock); v != h.Token() {
						return false
					}
				}
				return true
			}
		}
		gone := func() bool {
			for _, addr := range addrs {
				if v, _ := do(addr, "EXISTS", a.Keys.Lock); v != int64(0) {
					return false
				}
			}
			return true
		}

		ga, err := cl.Acquire(ctx, a)
		require.NoError(t, err, "Acquire of a free lock over 3 healthy nodes")
		assert.Positive(t, ga.Fence, "Acquire over 3 nodes returned fence 0")
		assert.True(t, eventually(waitBound, holds(ga)), "after Acquire over 3 healthy nodes, every node must hold the lock with our token")

		_, err = cl.Acquire(ctx, b)
		assert.ErrorIs(t, err, core.ErrHeld, "a second owner's Acquire of a lock held on all 3 nodes")

		granted := ga.Until
		until, err := cl.Extend(ctx, ga)
		require.NoError(t, err, "Extend of a lock held on all 3 nodes")
		assert.True(t, until.After(granted), "Extend returned validity until %v, not after the acquisition's %v", until, granted)

		require.NoError(t, cl.Release(ctx, ga), "Release of a lock held on all 3 nodes")
		assert.True(t, eventually(waitBound, gone), "after Release, every node must delete the lock")
		_, err = cl.Extend(ctx, ga)
		assert.ErrorIs(t, err, core.ErrNotHeld, "Extend of a released lock")
		// Within the lease's validity, a key found gone counts as let go (a resend of the release).
		assert.NoError(t, cl.Release(ctx, ga), "a second Release, within the lease's validity")

		gb, err := cl.Acquire(ctx, b)
		require.NoError(t, err, "Acquire of the released lock by the second owner")
		assert.Greater(t, gb.Fence, ga.Fence, "the next holder's fence must be larger than the previous holder's")
		require.NoError(t, cl.Release(ctx, gb), "Release by the second owner")
	}}}
}
