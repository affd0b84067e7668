package redlock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDoReleasesWhenFnPanics: a panic in fn goes on to Do's caller, and the lock is free
// again at once, for another Client and for Do's own Client (its local queue too).
func TestDoReleasesWhenFnPanics(t *testing.T) {
	nodes, _ := miniNodes(t, 3)
	c := newClient(t, nodes, patient)
	ctx := ctxT(t, 10*time.Second)
	func() {
		defer func() { assert.Equal(t, "boom", recover()) }()
		_ = c.Do(ctx, "panics", func(context.Context) error { panic("boom") })
	}()
	l, err := newClient(t, nodes, patient).TryAcquire(ctx, "panics")
	require.NoError(t, err, "the lock was kept past the panic")
	require.NoError(t, l.Release(ctx))
	l, err = c.TryAcquire(ctx, "panics")
	require.NoError(t, err, "the local queue was kept past the panic")
	require.NoError(t, l.Release(ctx))
}

// TestDoCancelsWithinItsBound: fn's context ends no later than the lease's Until when the
// nodes stop answering, and within two thirds of the validity of a loss behind its back.
func TestDoCancelsWithinItsBound(t *testing.T) {
	const ttl = 600 * time.Millisecond
	validity := ttl - (time.Duration(float64(ttl)*0.01) + 2*time.Millisecond)
	nodes, servers := realNodes(t, 3)
	c := newClient(t, nodes, redlock.WithTTL(ttl), redlock.WithNodeTimeout(50*time.Millisecond))
	ctx := ctxT(t, 20*time.Second)

	// A TTL long enough that the bound (two thirds of the validity, plus a round trip)
	// stands well apart from the validity itself: a loss noticed at a later extension (with
	// an eighth of the validity left, say) would miss it by hundreds of milliseconds.
	const longTTL = 3 * time.Second
	longValidity := longTTL - (time.Duration(float64(longTTL)*0.01) + 2*time.Millisecond)
	var late time.Duration
	err := c.Do(ctx, "lost", func(fctx context.Context) error {
		for _, s := range servers {
			_, err := s.Do("DEL", lockKey("lost"))
			require.NoError(t, err)
		}
		deleted := time.Now()
		<-fctx.Done()
		late = time.Since(deleted)
		require.ErrorIs(t, context.Cause(fctx), redlock.ErrLost)
		return nil
	}, redlock.WithTTL(longTTL))
	require.ErrorIs(t, err, redlock.ErrLost)
	t.Logf("loss noticed %v after the keys went (bound: 2/3 of %v)", late, longValidity)
	assert.Less(t, late, longValidity*2/3+150*time.Millisecond)

	err = c.Do(ctx, "expires", func(fctx context.Context) error {
		for _, s := range servers {
			s.Pause()
		}
		defer func() {
			for _, s := range servers {
				s.Resume()
			}
		}()
		start := time.Now()
		<-fctx.Done()
		assert.ErrorIs(t, context.Cause(fctx), redlock.ErrExpired)
		assert.Less(t, time.Since(start), validity+150*time.Millisecond, "fn's context outlived the lease's validity")
		return nil
	})
	require.ErrorIs(t, err, redlock.ErrExpired)
}

// TestErrorsNameTheLock: every error names the lock and matches the sentinel its doc
// promises.
func TestErrorsNameTheLock(t *testing.T) {
	nodes, servers := miniNodes(t, 3)
	c := newClient(t, nodes, redlock.WithTTL(5*time.Second), patient)
	other := newClient(t, nodes, patient)
	ctx := ctxT(t, 10*time.Second)
	short := func() context.Context { return ctxT(t, 500*time.Millisecond) } // a first attempt ends well within it

	held, err := other.TryAcquire(ctx, "held-elsewhere")
	require.NoError(t, err)
	defer func() { _ = held.Release(ctx) }()
	mine, err := c.TryAcquire(ctx, "held-here")
	require.NoError(t, err)
	defer func() { _ = mine.Release(ctx) }()

	released, err := c.TryAcquire(ctx, "released")
	require.NoError(t, err)
	require.NoError(t, released.Release(ctx))
	maxed, err := c.TryAcquire(ctx, "maxed", redlock.WithMaxHold(time.Millisecond))
	require.NoError(t, err)
	<-maxed.Done()
	lost, err := c.TryAcquire(ctx, "lost")
	require.NoError(t, err)
	for _, s := range servers {
		s.Del(lockKey("lost"))
	}
	m := c.NewMutex("mutex-lost")
	m.Lock()
	for _, s := range servers { // taken by another owner (a key merely gone reads as released)
		s.Set(lockKey("mutex-lost"), "another owner's token")
	}

	for _, e := range []struct {
		name string
		err  error
		is   []error
	}{
		{"held-elsewhere", func() error { _, err := c.TryAcquire(ctx, "held-elsewhere"); return err }(), []error{redlock.ErrHeld}},
		{"held-elsewhere", func() error { _, err := c.Acquire(short(), "held-elsewhere"); return err }(), []error{redlock.ErrHeld, context.DeadlineExceeded}},
		{"held-here", func() error { _, err := c.TryAcquire(ctx, "held-here"); return err }(), []error{redlock.ErrHeld}},
		{"held-here", func() error { _, err := c.Acquire(short(), "held-here"); return err }(), []error{redlock.ErrHeld, context.DeadlineExceeded}},
		{"held-here", c.NewMutex("held-here").LockContext(short()), []error{redlock.ErrHeld, context.DeadlineExceeded}},
		{"released", released.Release(ctx), []error{redlock.ErrNotHeld, redlock.ErrReleased}},
		{"released", released.Extend(ctx), []error{redlock.ErrNotHeld, redlock.ErrReleased}},
		{"maxed", maxed.Release(ctx), []error{redlock.ErrNotHeld, redlock.ErrMaxHold}},
		{"lost", lost.Extend(ctx), []error{redlock.ErrNotHeld, redlock.ErrLost}},
		{"lost", lost.Release(ctx), []error{redlock.ErrNotHeld, redlock.ErrLost}},
		{"mutex-lost", m.UnlockContext(ctx), []error{redlock.ErrNotHeld}},
		{"bad-ttl", func() error { _, err := c.Acquire(ctx, "bad-ttl", redlock.WithTTL(0)); return err }(), []error{redlock.ErrInvalid}},
		{"bad-mutex", c.NewMutex("bad-mutex", redlock.WithTTL(-1)).LockContext(ctx), []error{redlock.ErrInvalid}},
		{"nil-fn", c.Do(ctx, "nil-fn", nil), []error{redlock.ErrInvalid}},
	} {
		require.Error(t, e.err, e.name)
		assert.Contains(t, e.err.Error(), e.name, "the error does not name the lock")
		for _, target := range e.is {
			assert.ErrorIs(t, e.err, target, "%s: %v", e.name, e.err)
		}
	}
}

// TestNamesAndPrefixes: names up to MaxNameLen bytes work, longer ones (and long prefixes)
// are refused at once with ErrInvalid, and no key is written for them.
func TestNamesAndPrefixes(t *testing.T) {
	nodes, servers := miniNodes(t, 1)
	c := newClient(t, nodes, patient)
	ctx := ctxT(t, 10*time.Second)
	longest := strings.Repeat("n", redlock.MaxNameLen)
	l, err := c.TryAcquire(ctx, longest)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	tooLong := strings.Repeat("n", redlock.MaxNameLen+1)
	huge := strings.Repeat("h", 16<<20)
	for _, name := range []string{"", tooLong, huge} {
		_, err := c.TryAcquire(ctx, name)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = c.Acquire(ctx, name)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		require.ErrorIs(t, c.Do(ctx, name, func(context.Context) error { return nil }), redlock.ErrInvalid)
		require.ErrorIs(t, c.NewMutex(name).LockContext(ctx), redlock.ErrInvalid)
		assert.False(t, c.NewMutex(name).TryLock())
		assert.Less(t, len(err.Error()), 300, "the error quotes the whole name")
	}
	for _, k := range servers[0].Keys() {
		assert.LessOrEqual(t, len(k), redlock.MaxNameLen+len("redlock:{}:fence"), "a refused name left keys")
	}
	_, err = redlock.New(nodes, redlock.WithPrefix(strings.Repeat("p", 257)))
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = redlock.New(nodes, redlock.WithPrefix("app{}:"))
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = c.TryAcquire(ctx, "x", redlock.WithPrefix("{}"))
	require.ErrorIs(t, err, redlock.ErrInvalid)
}

// TestOptionsTakeEffectOrAreRefused: an option given where it cannot take effect is
// refused with ErrInvalid; the others take effect where they are given.
func TestOptionsTakeEffectOrAreRefused(t *testing.T) {
	nodes, servers := miniNodes(t, 3)
	c := newClient(t, nodes, redlock.WithNodeTimeout(200*time.Millisecond))
	ctx := ctxT(t, 10*time.Second)
	nop := func(context.Context) error { return nil }
	handler := redlock.WithErrorHandler(func(error) {})
	for _, err := range []error{
		func() error {
			_, err := c.TryAcquire(ctx, "o", redlock.WithRetry(time.Millisecond, time.Second))
			return err
		}(),
		func() error { _, err := c.TryAcquire(ctx, "o", redlock.WithLogger(slog.Default())); return err }(),
		func() error { _, err := c.TryAcquire(ctx, "o", handler); return err }(),
		func() error { _, err := c.Acquire(ctx, "o", handler); return err }(),
		c.Do(ctx, "o", nop, handler),
		c.Do(ctx, "o", nop, redlock.WithAutoExtend(false)),
		c.NewMutex("o", redlock.WithAutoExtend(false)).LockContext(ctx),
	} {
		require.ErrorIs(t, err, redlock.ErrInvalid)
		assert.ErrorContains(t, err, "does not apply to")
	}
	require.NoError(t, c.Do(ctx, "o", nop, redlock.WithAutoExtend(true)))

	// WithLostHandler on Acquire: called when the lease is lost.
	lostErr := make(chan error, 1)
	l, err := c.Acquire(ctx, "lost-lease", redlock.WithLostHandler(func(err error) { lostErr <- err }))
	require.NoError(t, err)
	for _, s := range servers {
		s.Del(lockKey("lost-lease"))
	}
	require.ErrorIs(t, l.Extend(ctx), redlock.ErrLost)
	require.ErrorIs(t, <-lostErr, redlock.ErrLost)

	// WithMaxHold on a Mutex: the holding ends, Lost closes, the handler hears ErrMaxHold.
	m := c.NewMutex("max-mutex", redlock.WithMaxHold(50*time.Millisecond), redlock.WithLostHandler(func(err error) { lostErr <- err }))
	m.Lock()
	<-m.Lost()
	require.ErrorIs(t, <-lostErr, redlock.ErrMaxHold)
	require.ErrorIs(t, m.UnlockContext(ctx), redlock.ErrMaxHold)

	// WithLogger on NewMutex: Unlock's failure goes to that logger.
	var logs syncBuffer
	logged := c.NewMutex("logged-mutex", redlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	logged.Lock()
	for _, s := range servers {
		s.Set(lockKey("logged-mutex"), "another owner's token")
	}
	logged.Unlock()
	assert.Contains(t, logs.String(), "logged-mutex")
}

// TestClientClose: after Close, acquisitions fail with ErrClosed (Lock panics), a waiting
// LockContext wakes and fails with it, the Client's held locks were released (a later
// Release says so), and the nodes' Close methods were called once.
func TestClientClose(t *testing.T) {
	nodes, servers := miniNodes(t, 3)
	counted := make([]redlock.Node, len(nodes))
	var closes atomic.Int32
	for i, n := range nodes {
		counted[i] = closeCounter{Node: n, closes: &closes}
	}
	c := newClient(t, counted, patient)
	other := newClient(t, nodes, patient)
	ctx := ctxT(t, 10*time.Second)
	held, err := other.TryAcquire(ctx, "closing")
	require.NoError(t, err)
	mine, err := c.TryAcquire(ctx, "mine")
	require.NoError(t, err)

	waiting := make(chan error, 1)
	go func() { waiting <- c.NewMutex("closing").LockContext(ctx) }()
	require.Eventually(t, func() bool { return servers[0].Exists(lockKey("closing") + ":queue") }, 5*time.Second, time.Millisecond,
		"the Mutex did not queue")
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	assert.Equal(t, int32(3), closes.Load())
	select {
	case err := <-waiting:
		require.ErrorIs(t, err, redlock.ErrClosed)
		assert.ErrorContains(t, err, "closing")
	case <-time.After(2 * time.Second):
		t.Fatal("a waiting LockContext did not end at Close")
	}
	_, err = c.Acquire(ctx, "after")
	require.ErrorIs(t, err, redlock.ErrClosed)
	_, err = c.TryAcquire(ctx, "after")
	require.ErrorIs(t, err, redlock.ErrClosed)
	assert.False(t, c.NewMutex("after").TryLock())
	assert.PanicsWithValue(t, `redlock: Lock: redlock: acquire "after": client is closed`, c.NewMutex("after").Lock)
	require.ErrorIs(t, mine.Err(), redlock.ErrClosed, "Close did not end a held lock")
	assert.False(t, servers[0].Exists(lockKey("mine")), "Close did not release a held lock")
	err = mine.Release(ctx)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	require.ErrorIs(t, err, redlock.ErrClosed)
	require.NoError(t, held.Release(ctx), "another Client's lock")
}

// closeCounter is a Node whose Close is counted.
type closeCounter struct {
	redlock.Node
	closes *atomic.Int32
}

func (n closeCounter) Close() error { n.closes.Add(1); return nil }

// TestDuplicateNodesAreRefused: the same Node twice is refused by New.
func TestDuplicateNodesAreRefused(t *testing.T) {
	nodes, _ := miniNodes(t, 2)
	_, err := redlock.New([]redlock.Node{nodes[0], nodes[1], nodes[0]})
	require.ErrorIs(t, err, redlock.ErrInvalid)
	var nilNode core.Node
	_, err = redlock.New([]redlock.Node{nodes[0], nilNode})
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.True(t, errors.Is(err, core.ErrInvalid))
}
