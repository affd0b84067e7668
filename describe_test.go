package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStatusShowsDescriptions: WithDescription, given to New, describes every holding of
// the Client's, and given to a call or primitive, that one's; Status shows it for the
// holder (a Lease's, TryAcquire's, a Mutex's), a waiter, an RWMutex's reader, a
// Semaphore's permit and an Election's leader, as the quorum holds it and on each node.
func TestStatusShowsDescriptions(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 3)
			c := newClient(t, nodes, patient, redlock.WithDescription("web-3:4242"))
			ctx := ctxT(t, time.Minute)

			l, err := c.Acquire(ctx, "described")
			require.NoError(t, err)
			st := statusOf(t, c, "described")
			require.NotNil(t, st.Holder)
			require.Equal(t, "web-3:4242", st.Holder.Description)
			require.True(t, strings.HasPrefix(st.Holder.Owner, "web-3:4242@"), st.Holder.Owner)

			// A waiter in a Client of its own (one Client queues locally), described per call.
			w := newClient(t, nodes, patient)
			waited := make(chan *redlock.Lease, 1)
			go func() {
				l, err := w.Acquire(ctx, "described", redlock.WithDescription("batch/7"))
				assert.NoError(t, err)
				waited <- l
			}()
			st = waitStatus(t, c, "described", func(st *redlock.Status) bool {
				for _, n := range st.Nodes {
					if len(n.Queue) != 1 {
						return false
					}
				}
				return true
			})
			for _, n := range st.Nodes {
				require.Equal(t, "batch/7", n.Queue[0].Description)
				require.Equal(t, "web-3:4242", n.Lock.Description)
			}
			require.NoError(t, l.Release(ctx))
			next := <-waited
			require.NotNil(t, next)
			st = waitStatus(t, c, "described", func(st *redlock.Status) bool { return st.Holder != nil })
			require.Equal(t, "batch/7", st.Holder.Description, "the waiter's own description, once it holds")
			require.NoError(t, next.Release(ctx))

			m := c.NewMutex("mutex")
			require.NoError(t, m.LockContext(ctx))
			require.Equal(t, "web-3:4242", statusOf(t, c, "mutex").Holder.Description, "a Mutex takes New's description")
			require.NoError(t, m.UnlockContext(ctx))

			tried, err := c.TryAcquire(ctx, "tried", redlock.WithDescription("cron"))
			require.NoError(t, err)
			require.Equal(t, "cron", statusOf(t, c, "tried").Holder.Description, "a call's description is its own")
			require.NoError(t, tried.Release(ctx))

			rw := c.NewRWMutex("shared", redlock.WithDescription("reader-1"))
			require.NoError(t, rw.RLockContext(ctx))
			st = statusOf(t, c, "shared")
			shares := 0
			for _, n := range st.Nodes {
				for _, r := range n.Readers {
					require.Equal(t, "reader-1", r.Description)
					shares++
				}
			}
			require.GreaterOrEqual(t, shares, st.Quorum)
			require.NoError(t, rw.RUnlockContext(ctx))

			p, err := c.NewSemaphore("pool", 2, redlock.WithDescription("worker-2")).TryAcquire(ctx)
			require.NoError(t, err)
			st = statusOf(t, c, "pool")
			permits := 0
			for _, n := range st.Nodes {
				for _, h := range n.Semaphore.Held {
					require.Equal(t, "worker-2", h.Description)
					permits++
				}
			}
			require.GreaterOrEqual(t, permits, st.Quorum)
			require.NoError(t, p.Release(ctx))

			leader, err := c.NewElection("vote", redlock.WithDescription("candidate-a")).Campaign(ctx, "a")
			require.NoError(t, err)
			st = statusOf(t, c, "vote")
			require.NotNil(t, st.Leader)
			require.Equal(t, "candidate-a", st.Leader.Description)
			require.Equal(t, "candidate-a", st.Holder.Description)
			require.NoError(t, leader.Release(ctx))

			plain := newClient(t, nodes, patient)
			u, err := plain.TryAcquire(ctx, "plain")
			require.NoError(t, err)
			st = statusOf(t, c, "plain")
			require.Equal(t, "", st.Holder.Description)
			require.NotContains(t, st.Holder.Owner, "@", "a token without a description")
			require.NoError(t, u.Release(ctx))
		})
	}
}

// TestHandOffKeepsTheDescription: a lease taken up from a handle keeps its token, and so
// its first holder's description, which the taking Client's own does not replace; TakeOver
// refuses WithDescription.
func TestHandOffKeepsTheDescription(t *testing.T) {
	nodes, _ := miniNodes(t, 3)
	ctx := ctxT(t, time.Minute)
	from := newClient(t, nodes, patient, redlock.WithDescription("first"))
	to := newClient(t, nodes, patient, redlock.WithDescription("second"))
	l, err := from.Acquire(ctx, "moved")
	require.NoError(t, err)
	h, err := l.HandOff()
	require.NoError(t, err)
	_, err = to.TakeOver(ctx, h, redlock.WithDescription("third"))
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorContains(t, err, "WithDescription")
	taken, err := to.TakeOver(ctx, h)
	require.NoError(t, err)
	require.Equal(t, "first", statusOf(t, to, "moved").Holder.Description)
	require.NoError(t, taken.Release(ctx))
}

// TestBadDescription: a description that is too long, or has a space, an '@' or a
// character that is not printable, is an error that matches ErrInvalid: from New, and from
// a call or primitive given it, naming the lock.
func TestBadDescription(t *testing.T) {
	nodes, _ := miniNodes(t, 1)
	c := newClient(t, nodes, patient)
	ctx := ctxT(t, time.Minute)
	for _, d := range []string{"web 3", "a@b", "new\nline", "\x00", "\xff", strings.Repeat("d", redlock.MaxDescriptionLen+1)} {
		_, err := redlock.New(nodes, redlock.WithDescription(d))
		require.ErrorIs(t, err, redlock.ErrInvalid, "New, %q", d)
		require.ErrorContains(t, err, "description")
		for _, call := range []func() error{
			func() error { _, err := c.Acquire(ctx, "bad", redlock.WithDescription(d)); return err },
			func() error { _, err := c.TryAcquire(ctx, "bad", redlock.WithDescription(d)); return err },
			func() error { return c.NewMutex("bad", redlock.WithDescription(d)).LockContext(ctx) },
			func() error {
				_, err := c.NewSemaphore("bad", 2, redlock.WithDescription(d)).TryAcquire(ctx)
				return err
			},
			func() error {
				_, err := c.NewElection("bad", redlock.WithDescription(d)).Campaign(ctx, "v")
				return err
			},
		} {
			err := call()
			require.ErrorIs(t, err, redlock.ErrInvalid, "%q", d)
			require.ErrorContains(t, err, `"bad"`)
			require.ErrorContains(t, err, "description")
		}
	}
	require.Nil(t, statusOf(t, c, "bad").Holder)
	l, err := c.TryAcquire(ctx, "good", redlock.WithDescription(strings.Repeat("d", redlock.MaxDescriptionLen)))
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))
}

// TestBreakDescribedHolder: Break ends a described holder (a waiter's token, whose waiter
// id carries the description) as any other, and names it by its token.
func TestBreakDescribedHolder(t *testing.T) {
	nodes, _ := miniNodes(t, 3)
	ctx := ctxT(t, time.Minute)
	c := newClient(t, nodes, patient, redlock.WithDescription("dead/1"))
	l, err := c.Acquire(ctx, "broken")
	require.NoError(t, err)
	b, err := newClient(t, nodes, patient).Break(ctx, "broken")
	require.NoError(t, err)
	require.Len(t, b.Owners, 1)
	require.True(t, strings.HasPrefix(b.Owners[0], "dead/1@"), b.Owners[0])
	require.Nil(t, statusOf(t, c, "broken").Holder)
	require.ErrorIs(t, l.Extend(ctx), redlock.ErrNotHeld)
}
