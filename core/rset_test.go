package core_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests check a reader's lock over several names at once (Read with core.NewSetKeys):
// a share of every name or of none, readers of overlapping names together, writers of any
// of the names excluded, and a set of shares taken whole once woken.

// readSetLock is a reader's request for every one of names at once.
func readSetLock(t *testing.T, servers []server, names ...string) *core.Lock {
	t.Helper()
	l := setLock(t, servers, names...)
	l.Read, l.Fence = true, false
	return l
}

// sharesOf returns, per server, how many readers' entries the lock called name has.
func sharesOf(t *testing.T, servers []server, name string) []int64 {
	return readers(t, servers, core.NewKeys("q:", name))
}

// TestReadSetSharesAndExcludes: readers of {a, b}, of a and of {b, c} hold together; a
// writer of b and a writer of {a, c} are refused while they do; a reader set one of whose
// names a writer holds takes a share of none; when the readers let go every key goes.
func TestReadSetSharesAndExcludes(t *testing.T) {
	onEachSetup(t, func(t *testing.T, servers []server) {
		cl := newCluster(t, servers)
		ctx := context.Background()
		var held []*core.Held
		for _, l := range []*core.Lock{readSetLock(t, servers, "a", "b"), readLockOn(servers, "a"), readSetLock(t, servers, "c", "b")} {
			h, err := cl.Acquire(ctx, l)
			require.NoError(t, err, "readers of overlapping names were refused")
			held = append(held, h)
		}
		settle(t, servers, func() bool {
			return allEqual(sharesOf(t, servers, "a"), 2) && allEqual(sharesOf(t, servers, "b"), 2) && allEqual(sharesOf(t, servers, "c"), 1)
		}, "each reader is a share of each of its names")
		assert.Equal(t, everywhere(servers, "(readers)"), holders(t, servers, "c"))
		_, err := cl.Acquire(ctx, lockOn(servers, "b"))
		require.ErrorIs(t, err, core.ErrHeld, "a writer of b took it from a reader set")
		_, err = cl.Acquire(ctx, setLock(t, servers, "a", "c"))
		require.ErrorIs(t, err, core.ErrHeld, "a writer set took names that reader sets hold")
		for _, h := range held {
			require.NoError(t, cl.Release(ctx, h))
		}
		for _, name := range []string{"a", "b", "c"} {
			settle(t, servers, func() bool { return assert.ObjectsAreEqual(everywhere(servers, ""), holders(t, servers, name)) },
				"%s is still held after every reader let go", name)
		}

		w := hold(t, cl, servers, "b")
		_, err = cl.Acquire(ctx, readSetLock(t, servers, "a", "b"))
		require.ErrorIs(t, err, core.ErrHeld, "a reader set took a name a writer holds")
		assert.Equal(t, everywhere(servers, ""), holders(t, servers, "a"), "a refused reader set kept a share of a free name")
		assert.True(t, allEqual(sharesOf(t, servers, "a"), 0), "a refused reader set kept a share of a free name")
		for _, s := range servers {
			requireEveryKeyExpires(t, s)
		}
		require.NoError(t, cl.Release(ctx, w))
	})
}

// TestReadSetIsWokenWhole: a reader set waiting for b, which a writer holds, keeps a from
// no reader (a reader of a that comes after takes its share at once: readers exclude no
// reader), but from a writer of a that comes after, which queues behind it; the writer's
// release of b wakes the set, which takes a share of both names with its next attempt, at
// the release's instant, and leaves their queues; the writer of a stays out until the set
// lets go.
func TestReadSetIsWokenWhole(t *testing.T) {
	onEachSetup(t, func(t *testing.T, servers []server) {
		cl := newCluster(t, servers)
		ctx, cancel := context.WithTimeout(context.Background(), generous)
		defer cancel()
		w := hold(t, cl, servers, "b")
		set := waitInBackground(t, ctx, cl, readSetLock(t, servers, "a", "b"))
		a, b := core.NewKeys("q:", "a"), core.NewKeys("q:", "b")
		settle(t, servers, func() bool { return allEqual(queued(t, servers, a), 1) && allEqual(queued(t, servers, b), 1) },
			"the reader set is not queued on a and b")
		assert.Equal(t, everywhere(servers, ""), holders(t, servers, "a"), "a refused reader set took a share of a")
		r, err := cl.Acquire(ctx, readLockOn(servers, "a"))
		require.NoError(t, err, "a waiting reader set kept a reader of a out")
		_, err = cl.Acquire(ctx, fencedOn(servers, "a"))
		require.ErrorIs(t, err, core.ErrHeld, "a writer took a from a reader")
		require.NoError(t, cl.Release(ctx, r))
		settle(t, servers, func() bool { return assert.ObjectsAreEqual(everywhere(servers, ""), holders(t, servers, "a")) },
			"a is still held after its reader let go")
		if simulated(servers) {
			advance(time.Microsecond) // a later ticket than the set's (equal ones go by id)
		}
		writer := waitInBackground(t, ctx, cl, fencedOn(servers, "a"))
		settle(t, servers, func() bool { return allEqual(queued(t, servers, a), 2) }, "the writer of a is not queued behind the set")
		assert.Equal(t, everywhere(servers, ""), holders(t, servers, "a"), "a was taken while a reader set waits for it")

		released := time.Now()
		require.NoError(t, cl.Release(ctx, w))
		s := await(t, servers, set, "the reader set's shares when b was let go")
		if simulated(servers) {
			assert.Equal(t, time.Duration(0), time.Since(released), "the reader set did not get its shares at the release")
		}
		// A quorum holds it: a node where the release of b landed after the set's attempt
		// refused it, as Redlock allows.
		settle(t, servers, func() bool {
			a, b := sharesOf(t, servers, "a"), sharesOf(t, servers, "b")
			return onQuorum(len(servers), func(i int) bool { return a[i] == 1 && b[i] == 1 })
		}, "the set does not hold its shares on a quorum")
		settle(t, servers, func() bool {
			q := queued(t, servers, b)
			return onQuorum(len(servers), func(i int) bool { return q[i] == 0 })
		}, "the set did not leave the queue of b it took")
		select {
		case <-writer:
			t.Fatal("the writer of a got it while the reader set holds a share")
		default:
		}
		require.NoError(t, cl.Release(ctx, s))
		require.NoError(t, cl.Release(ctx, await(t, servers, writer, "the writer of a's lock when the set let go")))
	})
}

// TestWriterSetWaitsForReadSets: a writer set of {b, c} waits while a reader set of {a, b}
// holds b, and a reader of c that comes after it waits behind it; the reader set's release
// wakes the writer, which takes both names, and the writer's release the reader of c,
// which takes its share.
func TestWriterSetWaitsForReadSets(t *testing.T) {
	onEachSetup(t, func(t *testing.T, servers []server) {
		cl := newCluster(t, servers)
		ctx, cancel := context.WithTimeout(context.Background(), generous)
		defer cancel()
		r, err := cl.Acquire(ctx, readSetLock(t, servers, "a", "b"))
		require.NoError(t, err)
		settle(t, servers, func() bool { return allEqual(sharesOf(t, servers, "b"), 1) }, "the reader set holds no share of b")
		writer := waitInBackground(t, ctx, cl, setLock(t, servers, "b", "c"))
		c := core.NewKeys("q:", "c")
		settle(t, servers, func() bool { return allEqual(queued(t, servers, c), 1) }, "the writer set is not queued on c")
		if simulated(servers) {
			advance(time.Microsecond)
		}
		reader := waitInBackground(t, ctx, cl, readLockOn(servers, "c"))
		settle(t, servers, func() bool { return allEqual(queued(t, servers, c), 2) }, "the reader of c is not queued behind the writer set")

		require.NoError(t, cl.Release(ctx, r))
		w := await(t, servers, writer, "the writer set's lock when the reader set let go")
		if simulated(servers) {
			synctest.Wait()
		}
		select {
		case <-reader:
			t.Fatal("the reader of c got a share while the writer set holds c")
		default:
		}
		require.NoError(t, cl.Release(ctx, w))
		require.NoError(t, cl.Release(ctx, await(t, servers, reader, "the reader of c's share when the writer set let go")))
	})
}

// TestReadSetExtension: a reader set's extension renews its share of every name; once its
// share of one name is gone, the extension fails and renews none.
func TestReadSetExtension(t *testing.T) {
	inBubble(t, 1, func(t *testing.T, servers []server) {
		s := servers[0]
		cl := newCluster(t, servers)
		ctx := context.Background()
		l := readSetLock(t, servers, "a", "b")
		h, err := cl.Acquire(ctx, l)
		require.NoError(t, err)
		time.Sleep(l.TTL / 2)
		_, err = cl.Extend(ctx, h)
		require.NoError(t, err)
		time.Sleep(l.TTL * 3 / 4) // past the first TTL: only the extension holds them
		assert.Equal(t, []int64{1}, sharesOf(t, servers, "a"))
		assert.Equal(t, []int64{1}, sharesOf(t, servers, "b"))
		assert.Equal(t, "(readers)", get(t, s, l.Keys.Set[1].Lock))

		_, err = s.do("ZREM", l.Keys.Set[1].Readers, h.Token())
		require.NoError(t, err)
		_, err = cl.Extend(ctx, h)
		require.ErrorIs(t, err, core.ErrNotHeld, "a reader set extended with its share of b gone")
		v, err := s.do("ZSCORE", l.Keys.Set[0].Readers, h.Token())
		require.NoError(t, err)
		assert.Less(t, v.(float64), float64(time.Now().Add(l.TTL/2).UnixMilli()), "a failed extension renewed the share of a")
	})
}

// TestReadSetsAndWritersExclude: goroutines read and write random sets of three names, or
// single names (a lock's own keys), through AcquireWait; no name ever has a writer with
// another holder, and every wait ends.
func TestReadSetsAndWritersExclude(t *testing.T) {
	for _, c := range setups[:2] {
		t.Run(c.name, func(t *testing.T) {
			servers := c.servers(t, c.n)
			cl := newCluster(t, servers)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			names := []string{"x", "y", "z"}
			const writer = 1000 // a writer's weight in holding; a reader's is 1
			var holding [3]atomic.Int32
			requests := [][]int{{0}, {1, 2}, {2}, {0, 1}, {1, 2}, {2, 0}, {0, 1, 2}, {2, 1}, {1}}
			var wg sync.WaitGroup
			for g := range 2 * len(requests) {
				read := g%2 == 1
				wg.Go(func() {
					for r := range 5 {
						idx := requests[(g/2+r)%len(requests)]
						set := make([]string, len(idx))
						for i, n := range idx {
							set[i] = names[n]
						}
						l := fencedOn(servers, set[0]) // one name: its own keys
						if len(set) > 1 {
							l = setLock(t, servers, set...)
						}
						l.Read, l.Fence = read, !read
						h, err := cl.AcquireWait(ctx, l, core.Backoff{Min: time.Millisecond, Max: 10 * time.Millisecond})
						if !assert.NoError(t, err, "goroutine %d round %d", g, r) {
							return
						}
						for _, n := range idx {
							switch v := holding[n].Add(map[bool]int32{true: 1, false: writer}[read]); {
							case read:
								assert.Less(t, v, int32(writer), "%s has a reader and a writer", names[n])
							default:
								assert.Equal(t, int32(writer), v, "%s has a writer and another holder", names[n])
							}
						}
						time.Sleep(time.Millisecond)
						for _, n := range idx {
							holding[n].Add(-map[bool]int32{true: 1, false: writer}[read])
						}
						assert.NoError(t, cl.Release(context.Background(), h))
					}
				})
			}
			wg.Wait()
		})
	}
}
