package core_test

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests run the scripts in a reader's mode ("r") and in a writer's ("w") side by
// side, through the go-redis backend, on miniredis and on redis-server processes.

// readLock is lock(name) asked for as a reader.
func readLock(name string) *core.Lock {
	l := lock(name)
	l.Read = true
	return l
}

// readers returns, per server, how many readers' entries k has.
func readers(t *testing.T, servers []server, k core.Keys) []int64 {
	n := make([]int64, len(servers))
	for i, s := range servers {
		v, err := s.do("ZCARD", k.Readers)
		require.NoError(t, err)
		n[i] = v.(int64)
	}
	return n
}

// TestReadersShareAndExcludeWriters: two readers hold the lock at once; a writer is
// refused while either does, and a reader while a writer does; once the readers let go the
// lock key is gone, and a writer takes it.
func TestReadersShareAndExcludeWriters(t *testing.T) {
	onEachSetup(t, func(t *testing.T, servers []server) {
		{
			cl := newCluster(t, servers)
			ctx := context.Background()
			// Nothing here waits for a timeout: a long node timeout keeps a loaded machine's
			// slow reply from failing a call.
			patient := func(l *core.Lock) *core.Lock { l.NodeTimeout = 5 * time.Second; return l }
			writer := func() *core.Lock { return patient(lock("rw")) }
			reader := func() *core.Lock { return patient(readLock("rw")) }
			r1, err := cl.Acquire(ctx, reader())
			require.NoError(t, err)
			r2, err := cl.Acquire(ctx, reader())
			require.NoError(t, err, "a second reader was refused while a reader holds the lock")
			// Acquire returns at a quorum: the last node may answer later.
			settle(t, servers, func() bool { return allEqual(readers(t, servers, r1.Keys), 2) }, "each reader is an entry of its own")
			for _, s := range servers {
				assert.Equal(t, "(readers)", get(t, s, r1.Keys.Lock), "while readers hold it, the lock key holds the marker")
				requireEveryKeyExpires(t, s)
			}

			_, err = cl.Acquire(ctx, writer())
			require.ErrorIs(t, err, core.ErrHeld, "a writer took the lock from readers")
			require.NoError(t, cl.Release(ctx, r1))
			_, err = cl.Acquire(ctx, writer())
			require.ErrorIs(t, err, core.ErrHeld, "a writer took the lock while a reader still holds it")
			require.NoError(t, cl.Release(ctx, r2))
			// A refused writer's request still on its way to a node is released once it
			// lands (see Acquire): its key may show a moment.
			for _, s := range servers {
				settle(t, servers, func() bool { return get(t, s, r1.Keys.Lock) == "" }, "the lock key outlived the last reader")
			}

			w, err := cl.Acquire(ctx, writer())
			require.NoError(t, err, "a writer was refused once the readers let go")
			_, err = cl.Acquire(ctx, reader())
			require.ErrorIs(t, err, core.ErrHeld, "a reader took the lock from a writer")
			require.NoError(t, cl.Release(ctx, w))
		}
	})
}

// TestWaitingWriterBlocksNewReaders: while a reader holds the lock and a writer waits for
// it, a new reader is refused (an owner that does not wait) or queues behind the writer
// (a waiter); the reader's release wakes the writer, and the writer's the reader that
// queued behind it, each of which takes the lock at the release's instant.
func TestWaitingWriterBlocksNewReaders(t *testing.T) {
	onEachSetup(t, func(t *testing.T, servers []server) {
		{
			cl := newCluster(t, servers)
			ctx := context.Background()
			r1, err := cl.Acquire(ctx, readLockOn(servers, "wr"))
			require.NoError(t, err)
			settle(t, servers, func() bool { return allEqual(readers(t, servers, r1.Keys), 1) }, "the reader holds no share")

			writer := make(chan *core.Held, 1)
			go func() {
				h, err := cl.AcquireWait(ctx, lockOn(servers, "wr"), patient)
				assert.NoError(t, err)
				writer <- h
			}()
			settle(t, servers, func() bool { return allEqual(queued(t, servers, r1.Keys), 1) }, "the writer is not queued")

			_, err = cl.Acquire(ctx, readLockOn(servers, "wr"))
			require.ErrorIs(t, err, core.ErrHeld, "a new reader took the lock while a writer waits for it")
			if simulated(servers) {
				advance(time.Microsecond) // a later ticket than the writer's (equal ones go by id)
			}
			reader := make(chan *core.Held, 1)
			go func() {
				h, err := cl.AcquireWait(ctx, readLockOn(servers, "wr"), patient)
				assert.NoError(t, err)
				reader <- h
			}()
			settle(t, servers, func() bool { return allEqual(queued(t, servers, r1.Keys), 2) }, "the reader is not queued")
			assert.True(t, allEqual(readers(t, servers, r1.Keys), 1), "a reader that came after a waiting writer holds the lock")

			released := time.Now()
			require.NoError(t, cl.Release(ctx, r1))
			w := await(t, servers, writer, "the writer's lock when the last reader let go")
			if simulated(servers) {
				assert.Equal(t, time.Duration(0), time.Since(released), "the writer did not get the lock at the release")
				synctest.Wait()
			}
			select {
			case <-reader:
				t.Fatal("the reader got the lock while the writer holds it")
			default:
			}
			released = time.Now()
			require.NoError(t, cl.Release(ctx, w))
			r := await(t, servers, reader, "the reader's lock when the writer let go")
			if simulated(servers) {
				assert.Equal(t, time.Duration(0), time.Since(released), "the reader did not get the lock at the release")
			}
			require.NoError(t, cl.Release(ctx, r))
		}
	})
}

// TestReleaseWakesQueuedReaders: a writer's release leaves the lock free and wakes the
// readers first in the queue, each with an empty message on its channel, up to the next
// writer, which is not told; each woken reader takes its share with its next attempt, the
// writer is refused while they hold (and a reader behind it too), and the last reader's
// release wakes the writer, which then takes the lock.
func TestReleaseWakesQueuedReaders(t *testing.T) {
	onOneOfEachTimed(t, func(t *testing.T, s server) {
		servers := []server{s}
		cl := newCluster(t, servers)
		ctx := context.Background()
		holder := hold(t, cl, servers, "group")
		// waiter makes the attempt of waiter id (its ticket, from 1, its place in the queue).
		waiter := func(id string, attempt int, read bool, ticket int64) (*core.Held, error) {
			l := lockOn(servers, "group")
			l.Read = read
			return cl.AcquireAs(ctx, l, id+"."+strconv.Itoa(attempt), id, ticket)
		}
		for i, w := range []struct {
			id   string
			read bool
		}{{"r1", true}, {"r2", true}, {"w3", false}, {"r4", true}} {
			_, err := waiter(w.id, 1, w.read, int64(i+1))
			require.ErrorIs(t, err, core.ErrHeld)
		}
		msgs := map[string]<-chan string{}
		for _, id := range []string{"r1", "r2", "w3", "r4"} {
			msgs[id] = listen(t, s, holder.Keys.Wake(id))
		}

		require.NoError(t, cl.Release(ctx, holder))
		assert.Equal(t, "", get(t, s, holder.Keys.Lock), "a release gave the lock to someone")
		assert.Equal(t, "", next(t, servers, msgs["r1"]), "the first reader's message is not a wake-up")
		assert.Equal(t, "", next(t, servers, msgs["r2"]), "the reader behind it was not woken with it")
		assert.Equal(t, []int64{4}, queued(t, servers, holder.Keys), "a wake-up took a waiter out of the queue")
		quiet := time.After(100 * time.Millisecond) // on redis-server: a message would come by then
		if s.sim != nil {
			synctest.Wait() // a message would have come by now
			quiet = time.After(0)
		}
		select {
		case m := <-msgs["w3"]:
			t.Fatalf("the writer behind the readers was told %q", m)
		case m := <-msgs["r4"]:
			t.Fatalf("the reader behind the writer was told %q", m)
		case <-quiet:
		}

		// The woken readers take their shares, each with its next attempt.
		r1, err := waiter("r1", 2, true, 1)
		require.NoError(t, err, "the first woken reader could not take its share")
		r2, err := waiter("r2", 2, true, 2)
		require.NoError(t, err, "the second woken reader could not take its share")
		assert.Equal(t, "(readers)", get(t, s, holder.Keys.Lock))
		assert.Equal(t, []int64{2}, readers(t, servers, holder.Keys))
		assert.Equal(t, []int64{2}, queued(t, servers, holder.Keys), "the writer and the reader behind it stay queued")
		_, err = waiter("w3", 2, false, 3)
		require.ErrorIs(t, err, core.ErrHeld, "the writer took the lock from readers")
		_, err = waiter("r4", 2, true, 4)
		require.ErrorIs(t, err, core.ErrHeld, "a reader behind a waiting writer took a share")

		// The readers' releases: the last one wakes the writer.
		require.NoError(t, cl.Release(ctx, r1))
		assert.Equal(t, "(readers)", get(t, s, holder.Keys.Lock), "the lock key went with a reader still holding")
		require.NoError(t, cl.Release(ctx, r2))
		assert.Equal(t, "", get(t, s, holder.Keys.Lock), "the last reader's release gave the lock to someone")
		assert.Equal(t, "", next(t, servers, msgs["w3"]), "the writer's message is not a wake-up")
		w3, err := waiter("w3", 3, false, 3)
		require.NoError(t, err, "the woken writer could not take the lock")
		assert.Equal(t, "w3.3", get(t, s, holder.Keys.Lock))
		requireEveryKeyExpires(t, s)
		require.NoError(t, cl.Release(ctx, w3))
		assert.Equal(t, "", next(t, servers, msgs["r4"]), "the writer's release did not wake the reader behind it")
	})
}

// TestReaderAttempts: a release of a reader's attempt lets go of that attempt's entry or an
// earlier one's of the same waiter, never a later one's; an extension renews only a live
// entry of its own, and never re-creates one.
func TestReaderAttempts(t *testing.T) {
	inBubble(t, 1, func(t *testing.T, servers []server) { readerAttempts(t, servers[0]) })
}

func readerAttempts(t *testing.T, s server) {
	cl := newCluster(t, []server{s})
	ctx := context.Background()
	l := readLock("attempts")
	h2, err := cl.AcquireAs(ctx, l, "r.2", "r", 1)
	require.NoError(t, err)

	require.ErrorIs(t, cl.Release(ctx, core.HeldAs(l, "r.1", "r", 1)), core.ErrNotHeld, "a release of an earlier attempt let go of a later one's share")
	assert.Equal(t, []int64{1}, readers(t, []server{s}, l.Keys))
	_, err = cl.Extend(ctx, h2)
	require.NoError(t, err)
	_, err = cl.Extend(ctx, core.HeldAs(l, "r.1", "r", 1))
	require.ErrorIs(t, err, core.ErrNotHeld, "another attempt's extension renewed a share")

	require.NoError(t, cl.Release(ctx, core.HeldAs(l, "r.3", "r", 1)), "a release of a later attempt did not let go of an earlier one's share")
	assert.Equal(t, []int64{0}, readers(t, []server{s}, l.Keys))
	assert.Equal(t, "", get(t, s, l.Keys.Lock))
	_, err = cl.Extend(ctx, h2)
	require.ErrorIs(t, err, core.ErrNotHeld)
	assert.Equal(t, "", get(t, s, l.Keys.Lock), "an extension re-created the lock key")
}

// TestReaderExtensionOutlastsItsTTL: a reader that extends holds past its first TTL, and the
// lock key's TTL follows its entry, so a writer stays out.
func TestReaderExtensionOutlastsItsTTL(t *testing.T) {
	onOneOfEachTimed(t, func(t *testing.T, s server) {
		servers := []server{s}
		cl := newCluster(t, servers)
		ctx := context.Background()
		l := readLockOn(servers, "extend")
		l.TTL = time.Second
		h, err := cl.Acquire(ctx, l)
		require.NoError(t, err)
		long := readLockOn(servers, "extend")
		long.TTL = 5 * time.Second
		_, err = cl.Extend(ctx, core.HeldAs(long, h.Token(), "", 0))
		require.NoError(t, err)
		pttl, err := s.do("PTTL", l.Keys.Lock)
		require.NoError(t, err)
		if s.sim != nil {
			assert.Equal(t, int64(5000), pttl.(int64), "the lock key's TTL did not follow the extended entry")
			time.Sleep(time.Second) // past the first TTL
		} else {
			assert.Greater(t, pttl.(int64), int64(1000), "the lock key's TTL did not follow the extended entry")
		}
		_, err = cl.Acquire(ctx, lockOn(servers, "extend"))
		require.ErrorIs(t, err, core.ErrHeld)
	})
}

// TestCrashedReaderFreesTheLockByTTL: a reader that never lets go (it crashed) keeps a
// waiting writer out no longer than its TTL: the writer gets the lock as the TTL runs out.
func TestCrashedReaderFreesTheLockByTTL(t *testing.T) {
	for _, c := range simSetups[1:] { // N = 3
		c.run(t, crashedReaderFreesTheLockByTTL)
	}
}

func crashedReaderFreesTheLockByTTL(t *testing.T, servers []server) {
	cl := newCluster(t, servers)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	l := readLockOn(servers, "crash")
	l.TTL = ttl
	start := time.Now()
	_, err := cl.Acquire(ctx, l) // never released
	require.NoError(t, err)
	w := lock("crash")
	w.NodeTimeout = time.Second
	h, err := cl.AcquireWait(ctx, w, core.Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond})
	require.NoError(t, err)
	took := time.Since(start)
	if simulated(servers) {
		assert.Equal(t, ttl, took, "the writer waited %v for a crashed reader with TTL %v", took, ttl)
	} else {
		assert.Less(t, took, ttl+generous, "the writer waited %v for a crashed reader with TTL %v", took, ttl)
	}
	require.NoError(t, cl.Release(ctx, h))
}

// TestReaderTakesNoFence: a reader that asks for a fencing token is refused at once.
func TestReaderTakesNoFence(t *testing.T) {
	inBubble(t, 1, func(t *testing.T, servers []server) {
		cl := newCluster(t, servers)
		l := readLock("fence")
		l.Fence = true
		_, err := cl.AcquireWait(context.Background(), l, patient)
		require.ErrorIs(t, err, core.ErrInvalid)
	})
}

// TestReaderTakesOverItsShare: a woken reader whose attempt took a share (its reply lost)
// and that calls again, after a writer with an earlier ticket queued on that node, takes the
// share over under its new attempt (as a writer's later attempt takes a lock an earlier one
// took), rather than being refused and leaving the earlier share standing in the writer's
// way; its release then wakes the writer.
func TestReaderTakesOverItsShare(t *testing.T) {
	inBubble(t, 1, func(t *testing.T, servers []server) { readerTakesOverItsShare(t, servers[0]) })
}

func readerTakesOverItsShare(t *testing.T, s server) {
	cl := newCluster(t, []server{s})
	ctx := context.Background()
	holder := hold(t, cl, []server{s}, "takeover")
	r := readLock("takeover")
	_, err := cl.AcquireAs(ctx, r, "r.1", "r", 2)
	require.ErrorIs(t, err, core.ErrHeld)
	msgs := listen(t, s, holder.Keys.Wake("r"))
	require.NoError(t, cl.Release(ctx, holder))
	assert.Equal(t, "", next(t, []server{s}, msgs), "the reader was not woken")
	_, err = cl.AcquireAs(ctx, r, "r.2", "r", 2) // its reply lost, say
	require.NoError(t, err, "the woken reader could not take a share")

	_, err = cl.AcquireAs(ctx, lock("takeover"), "w.1", "w", 1) // an earlier ticket than the reader's
	require.ErrorIs(t, err, core.ErrHeld)
	h, err := cl.AcquireAs(ctx, r, "r.3", "r", 2)
	require.NoError(t, err, "the reader's next attempt did not take over its share")
	v, err := s.do("ZRANGE", holder.Keys.Readers, "0", "-1")
	require.NoError(t, err)
	assert.Equal(t, []any{"r.3"}, v, "the earlier attempt's share was not replaced by the new attempt's")

	wake := listen(t, s, holder.Keys.Wake("w"))
	require.NoError(t, cl.Release(ctx, h))
	assert.Equal(t, "", get(t, s, holder.Keys.Lock), "the reader's release gave the lock to someone")
	assert.Equal(t, "", next(t, []server{s}, wake), "the writer was not woken when the reader let go")
	w, err := cl.AcquireAs(ctx, lock("takeover"), "w.2", "w", 1)
	require.NoError(t, err, "the woken writer could not take the lock")
	require.NoError(t, cl.Release(ctx, w))
}
