package core_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// described returns l with the holder's description d.
func described(l *core.Lock, d string) *core.Lock {
	l.Description = d
	return l
}

// TestDescriptionTravelsInTokens: a holder's description (Lock.Description) starts its
// tokens and its waiter id on the nodes, and Status reads it back on each node and as the
// quorum holds it: a writer's lock, a waiter's place and the lock its later attempt takes,
// a reader's share, a semaphore's permit and a leader's record. The scripts take such
// tokens as any other: the described waiter is woken and takes the lock, one that gives up
// leaves the queue, and each release lets go.
func TestDescriptionTravelsInTokens(t *testing.T) {
	onEachSetup(t, func(t *testing.T, servers []server) {
		cl := newCluster(t, servers)
		ctx := context.Background()
		const name = "described"
		status := func() *core.Status {
			st, err := cl.Status(ctx, "q:", name, generousNodeTimeout)
			require.NoError(t, err)
			return st
		}
		everyNode := func(what string, cond func(n core.NodeStatus) bool) *core.Status {
			t.Helper()
			var st *core.Status
			settle(t, servers, func() bool {
				st = status()
				for _, n := range st.Nodes {
					if !cond(n) {
						return false
					}
				}
				return true
			}, what)
			return st
		}

		// onQuorum returns the nodes for which cond holds, once a quorum do. (A node that
		// A's release reached after B's winning attempt, below, keeps B's place there until
		// it lapses, and refuses the later holders meanwhile.)
		onQuorum := func(what string, cond func(n core.NodeStatus) bool) []core.NodeStatus {
			t.Helper()
			var ok []core.NodeStatus
			settle(t, servers, func() bool {
				ok = slices.DeleteFunc(status().Nodes, func(n core.NodeStatus) bool { return !cond(n) })
				return len(ok) >= cl.Quorum()
			}, what)
			return ok
		}

		a, err := cl.AcquireWait(ctx, described(lockOn(servers, name), "web-3:4242/job"), patient)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(a.Token(), "web-3:4242/job@"), "token %q", a.Token())
		id, ok := core.WaiterID(a.Token())
		require.True(t, ok, "a waiter's token %q", a.Token())
		require.True(t, strings.HasPrefix(id, "web-3:4242/job@"), "waiter id %q", id)
		st := everyNode("a node does not hold the described lock", func(n core.NodeStatus) bool {
			return n.Lock != nil && n.Lock.Owner == a.Token()
		})
		require.NotNil(t, st.Holder)
		require.Equal(t, a.Token(), st.Holder.Owner)
		require.Equal(t, "web-3:4242/job", st.Holder.Description)
		for _, n := range st.Nodes {
			require.Equal(t, "web-3:4242/job", n.Lock.Description)
		}

		// A described waiter queues, is woken by the release, and takes the lock.
		got := make(chan *core.Held, 1)
		go func() {
			h, err := cl.AcquireWait(ctx, described(lockOn(servers, name), "b:7"), patient)
			assert.NoError(t, err)
			got <- h
		}()
		st = everyNode("the described waiter is not queued", func(n core.NodeStatus) bool { return len(n.Queue) == 1 })
		for _, n := range st.Nodes {
			require.Equal(t, "b:7", n.Queue[0].Description)
			require.True(t, strings.HasPrefix(n.Queue[0].ID, "b:7@"), "waiter id %q", n.Queue[0].ID)
		}
		require.NoError(t, cl.Release(ctx, a))
		b := await(t, servers, got, "the described waiter's turn")
		require.NotNil(t, b)
		require.True(t, strings.HasPrefix(b.Token(), "b:7@"), "token %q", b.Token())
		require.False(t, strings.HasSuffix(b.Token(), ".1"), "the waiter took the lock at its first attempt (%q): it was held then", b.Token())
		// Where B holds the lock, it is in no queue.
		onQuorum("no quorum has B's lock", func(n core.NodeStatus) bool { return n.Lock != nil && n.Lock.Owner == b.Token() })
		st = status()
		require.NotNil(t, st.Holder)
		require.Equal(t, b.Token(), st.Holder.Owner)
		require.Equal(t, "b:7", st.Holder.Description)
		for _, n := range st.Nodes {
			if n.Lock != nil && n.Lock.Owner == b.Token() {
				require.Empty(t, n.Queue, "the holder is listed as waiting")
			}
		}

		// A described waiter that gives up leaves every queue.
		wctx, cancel := context.WithCancel(ctx)
		gaveUp := make(chan error, 1)
		go func() {
			_, err := cl.AcquireWait(wctx, described(lockOn(servers, name), "c:9"), patient)
			gaveUp <- err
		}()
		everyNode("the second described waiter is not queued", func(n core.NodeStatus) bool {
			return slices.ContainsFunc(n.Queue, func(w core.Waiter) bool { return w.Description == "c:9" })
		})
		cancel()
		require.ErrorIs(t, await(t, servers, gaveUp, "the waiter's end"), context.Canceled)
		everyNode("the waiter that gave up is still queued", func(n core.NodeStatus) bool {
			return !slices.ContainsFunc(n.Queue, func(w core.Waiter) bool { return w.Description == "c:9" })
		})
		require.NoError(t, cl.Release(ctx, b))
		everyNode("B's lock is still held", func(n core.NodeStatus) bool { return n.Lock == nil })

		r, err := cl.Acquire(ctx, described(readLockOn(servers, name), "r:1"))
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(r.Token(), "r:1@"), "token %q", r.Token())
		for _, n := range onQuorum("no quorum has the described share", func(n core.NodeStatus) bool { return len(n.Readers) == 1 }) {
			require.Equal(t, r.Token(), n.Readers[0].Token)
			require.Equal(t, "r:1", n.Readers[0].Description)
			require.Equal(t, "", n.Lock.Description, "the readers' marker carries no description")
		}
		require.NoError(t, cl.Release(ctx, r))

		sem := lockOn(servers, name)
		sem.Keys = core.NewSemaphoreKeys("q:", name, 2)
		p, err := cl.Acquire(ctx, described(sem, "s:2"))
		require.NoError(t, err)
		for _, n := range onQuorum("no quorum has the described permit", func(n core.NodeStatus) bool {
			return n.Semaphore != nil && len(n.Semaphore.Held) == 1
		}) {
			require.Equal(t, p.Token(), n.Semaphore.Held[0].Owner)
			require.Equal(t, "s:2", n.Semaphore.Held[0].Description)
		}
		require.NoError(t, cl.Release(ctx, p))

		e, err := cl.Acquire(ctx, described(lockOn(servers, name), "e:3"))
		require.NoError(t, err)
		require.NoError(t, cl.Proclaim(ctx, e, "leading"))
		onQuorum("no quorum has the described leader", func(n core.NodeStatus) bool { return n.Leader != nil && n.Leader.Current })
		st = status()
		require.NotNil(t, st.Leader)
		require.Equal(t, e.Token(), st.Leader.Token)
		require.Equal(t, "e:3", st.Leader.Description)
		require.Equal(t, "e:3", st.Holder.Description)
		require.NoError(t, cl.Release(ctx, e))
	})
}

// TestUndescribedTokensAreAsBefore: without a description a token is NewToken's alone (22
// base64url characters), a waiter's "<22 characters>.<attempt>", and Status says "".
func TestUndescribedTokensAreAsBefore(t *testing.T) {
	servers := miniServers(t, 1)
	cl := newCluster(t, servers)
	ctx := context.Background()
	require.Len(t, core.NewToken(), 22)
	h, err := cl.AcquireWait(ctx, lock("plain"), patient)
	require.NoError(t, err)
	// The waiter's id and the attempt (the first, unless a loaded machine made it miss).
	require.Regexp(t, `^[A-Za-z0-9_-]{22}\.[1-9][0-9]*$`, h.Token())
	st, err := cl.Status(ctx, "q:", "plain", time.Second)
	require.NoError(t, err)
	require.Equal(t, h.Token(), st.Holder.Owner)
	require.Equal(t, "", st.Holder.Description)
	require.NoError(t, cl.Release(ctx, h))
	a, err := cl.Acquire(ctx, lock("plain"))
	require.NoError(t, err)
	require.Len(t, a.Token(), 22)
	require.NoError(t, cl.Release(ctx, a))
}
