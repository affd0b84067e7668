package redlock_test

import (
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRWMutexAll: readers over overlapping sets of names, from two Clients, hold together
// with a reader of one name; every writer of any of their names is refused meanwhile (a
// Mutex, an RWMutex's writer, a writer set); when they let go, every name is free. A writer
// over the set holds every name under one token and refuses readers of any of them; a
// reader set that waits for it queues in each name's queue and is handed its shares when
// the writer unlocks.
func TestRWMutexAll(t *testing.T) {
	onAllSetups(t, everyN, func(t *testing.T, s allSetup) {
		c1, c2 := s.client(t), s.client(t)
		ctx := ctxT(t, time.Minute)
		ab, ac := c1.NewRWMutexAll([]string{"b", "a"}), c2.NewRWMutexAll([]string{"a", "c"})
		require.True(t, ab.TryRLock(), "a reader set over free names was refused")
		require.True(t, ac.TryRLock(), "a reader set was refused beside a reader set that shares a name")
		a := c2.NewRWMutex("a")
		require.True(t, a.TryRLock(), "a reader of a was refused beside reader sets")
		heldEverywhere(t, s, "a", "b", "c")
		assert.True(t, everywhere(s, func(v any) bool { return v == "(readers)" }, "GET", lockKey("b")))
		for _, c := range []*redlock.Client{c1, c2} {
			for _, name := range []string{"a", "b", "c"} {
				assert.False(t, c.NewMutex(name).TryLock(), "a Mutex of %s beside its readers", name)
				assert.False(t, c.NewRWMutex(name).TryLock(), "an RWMutex's writer of %s beside its readers", name)
			}
			assert.False(t, c.NewMutexAll([]string{"c", "d"}).TryLock(), "a writer set beside a reader of one of its names")
		}
		assert.False(t, ab.TryLock(), "the writer of a set beside its own readers")
		a.RUnlock()
		ab.RUnlock()
		ac.RUnlock()
		freeEverywhere(t, s, "a", "b", "c")

		require.NoError(t, ab.LockContext(ctx))
		assert.NotZero(t, ab.Token(), "a writer set has no fencing token")
		heldEverywhere(t, s, "a", "b")
		assert.False(t, ac.TryRLock(), "a reader set took a name a writer set holds")
		assert.True(t, everywhere(s, isNil, "GET", lockKey("c")), "a refused reader set kept a share of c")
		assert.False(t, c2.NewRWMutex("b").TryRLock(), "a reader of b beside a writer set")
		got := make(chan error, 1)
		go func() { got <- ac.RLockContext(ctx) }()
		queuedEverywhere(t, s, "a", 1)
		queuedEverywhere(t, s, "c", 1)
		require.NoError(t, ab.UnlockContext(ctx))
		require.NoError(t, within(t, false, got, "the reader set's turn"))
		// A hand-over holds on a quorum: a node whose release came before the waiter's
		// last call granted that call, which the waiter, refused by the others, undid.
		heldOnQuorum(t, s, "a", "c")

		require.NoError(t, ac.RUnlockContext(ctx))
		freeEverywhere(t, s, "a", "c")
	})
}
