package redlock_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHandOff: over 3 real servers, a lease handed off by one Client and taken up by
// another is the same lock: the same token, held throughout (a third Client is refused
// before and after), extended and released by the new holder only (the first one's
// Release and Close reach no node); a waiter queued behind it gets it at its release; a
// handle taken up once and released is good for nothing after.
func TestHandOff(t *testing.T) {
	nodes, _ := realNodes(t, 3)
	ctx := ctxT(t, time.Minute)
	from := newClient(t, nodes, patient)
	to := newClient(t, nodes, patient)
	other := newClient(t, nodes, patient)

	l, err := from.Acquire(ctx, "job")
	require.NoError(t, err)
	token := l.Token()
	h, err := l.HandOff()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(h, "redlock.v1."), h)
	assert.ErrorIs(t, l.Err(), redlock.ErrHandedOff)
	<-l.Done()
	_, err = other.TryAcquire(ctx, "job")
	require.ErrorIs(t, err, redlock.ErrHeld, "handed off, not released")
	err = l.Release(ctx)
	assert.ErrorIs(t, err, redlock.ErrNotHeld)
	assert.ErrorIs(t, err, redlock.ErrHandedOff)
	_, err = l.HandOff()
	assert.ErrorIs(t, err, redlock.ErrHandedOff, "handed off twice")
	require.NoError(t, from.Close())

	waited := make(chan *redlock.Lease, 1)
	go func() {
		w, err := other.Acquire(ctx, "job")
		assert.NoError(t, err)
		waited <- w
	}()
	taken, err := to.TakeOver(ctx, h)
	require.NoError(t, err)
	assert.Equal(t, token, taken.Token(), "the same fencing token")
	assert.True(t, taken.Until().After(time.Now()))
	require.NoError(t, taken.Extend(ctx))
	_, err = other.TryAcquire(ctx, "job")
	require.ErrorIs(t, err, redlock.ErrHeld, "taken up: the first Client's Close did not release it")
	require.NoError(t, taken.Release(ctx))
	w := <-waited
	require.NotNil(t, w)
	assert.Greater(t, w.Token(), token, "the next holder's token")
	require.NoError(t, w.Release(ctx))

	_, err = to.TakeOver(ctx, h)
	assert.ErrorIs(t, err, redlock.ErrNotHeld, "a handle whose lock was released")
	assert.ErrorContains(t, err, `"job"`)
}

// TestHandOffSet: a lock over two names goes on as one, with its token.
func TestHandOffSet(t *testing.T) {
	nodes, _ := miniNodes(t, 3)
	ctx := ctxT(t, time.Minute)
	from := newClient(t, nodes, patient)
	to := newClient(t, nodes, patient)
	l, err := from.AcquireAll(ctx, []string{"a", "b"})
	require.NoError(t, err)
	h, err := l.HandOff()
	require.NoError(t, err)
	taken, err := to.TakeOver(ctx, h)
	require.NoError(t, err)
	assert.Equal(t, l.Token(), taken.Token())
	for _, name := range []string{"a", "b"} {
		_, err := from.TryAcquire(ctx, name)
		assert.ErrorIs(t, err, redlock.ErrHeld, name)
	}
	require.NoError(t, taken.Release(ctx))
	for _, name := range []string{"a", "b"} {
		l, err := from.TryAcquire(ctx, name)
		require.NoError(t, err, name)
		require.NoError(t, l.Release(ctx))
	}
}

// TestHandOffExpiredInTransit: a handle taken up after the lock's TTL ran out finds it not
// held, and takes no free key (none is left behind); the first lease's lost handler is not
// called for the hand-off, and its Observer sees the holding end (ErrHandedOff).
func TestHandOffExpiredInTransit(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 3)
		ctx := ctxT(t, time.Minute)
		lost := make(chan error, 1)
		rec := &recorder{}
		from := closingClient(t, nodes, redlock.WithTTL(time.Second), redlock.WithObserver(rec),
			redlock.WithLostHandler(func(err error) { lost <- err }))
		to := closingClient(t, nodes, redlock.WithTTL(time.Second))
		l, err := from.Acquire(ctx, "late", redlock.WithAutoExtend(true))
		require.NoError(t, err)
		h, err := l.HandOff()
		require.NoError(t, err)
		time.Sleep(2 * time.Second) // nobody extends it meanwhile
		for _, s := range servers {
			assert.False(t, s.Miniredis().Exists(lockKey("late")), "not extended after the hand-off")
		}
		_, err = to.TakeOver(ctx, h)
		assert.ErrorIs(t, err, redlock.ErrNotHeld)
		for _, s := range servers {
			assert.False(t, s.Miniredis().Exists(lockKey("late")), "a key taken by TakeOver")
		}
		synctest.Wait()
		assert.Empty(t, lost, "the lost handler ran for a hand-off")
		s := rec.snapshot()
		require.Len(t, s.lost, 1)
		assert.ErrorIs(t, s.lost[0].Reason, redlock.ErrHandedOff)
		assert.Empty(t, s.released)
	})
}

// TestHandOffRefused: leases that cannot be handed off, and texts that are not handles,
// get ErrInvalid (naming the lock where there is one), never a panic.
func TestHandOffRefused(t *testing.T) {
	nodes, _ := miniNodes(t, 1)
	ctx := ctxT(t, time.Minute)
	c := newClient(t, nodes, patient)

	permit, err := c.NewSemaphore("pool", 2).Acquire(ctx)
	require.NoError(t, err)
	_, err = permit.HandOff()
	assert.ErrorIs(t, err, redlock.ErrInvalid, "a Semaphore's permit")
	assert.ErrorContains(t, err, `"pool"`)
	leader, err := c.NewElection("office").Campaign(ctx, "me")
	require.NoError(t, err)
	_, err = leader.HandOff()
	assert.ErrorIs(t, err, redlock.ErrInvalid, "an Election's leader")
	released, err := c.Acquire(ctx, "done")
	require.NoError(t, err)
	require.NoError(t, released.Release(ctx))
	_, err = released.HandOff()
	assert.ErrorIs(t, err, redlock.ErrReleased)
	_, err = (&redlock.Lease{}).HandOff()
	assert.ErrorIs(t, err, redlock.ErrNotHeld, "the zero Lease")

	enc := func(s string) string { return "redlock.v1." + base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, text := range []string{"", "job", "redlock.v1.", "redlock.v1.!!!", enc("{"), enc(`{"n":["a"]}`),
		enc(`{"t":"x"}`), enc(`{"n":["a","b"],"t":"x"}`), enc(`{"n":[""],"t":"x","p":"redlock:"}`), enc(`{"n":["a"],"t":"a b","p":"redlock:"}`)} {
		_, err := c.TakeOver(ctx, text)
		assert.ErrorIs(t, err, redlock.ErrInvalid, "%q", text)
	}
	_, err = c.TakeOver(context.Background(), enc(`{"n":["a"],"t":"x","p":"redlock:"}`), redlock.WithRetry(time.Second, time.Second))
	assert.ErrorIs(t, err, redlock.ErrInvalid, "WithRetry does not apply")
}
