package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/go-redlock/redlock/internal/simnet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests check the locks over several names at once (AcquireAll, TryAcquireAll,
// DoAll, NewMutexAll) on miniredis and redis-server at N = 1, 3 and 5. They time nothing:
// goroutines are ordered by what the servers hold (a key, a queue's length), and every
// wait is bounded by a generous timeout.

// allSetup is one way to run a test: N servers of one kind.
type allSetup struct {
	nodes  []redlock.Node
	stores []store
	more   func() []redlock.Node // fresh Nodes, with connections of their own, to the same servers
}

// client returns a Client over fresh Nodes to s's servers (as another process would have),
// with a node timeout that a loaded machine does not miss, closed at cleanup.
func (s allSetup) client(t *testing.T, opts ...redlock.Option) *redlock.Client {
	return closingClient(t, s.more(), append([]redlock.Option{patient}, opts...)...)
}

// onAllSetups runs f on miniredis and on redis-server, at each N of ns.
func onAllSetups(t *testing.T, ns []int, f func(t *testing.T, s allSetup)) {
	for _, k := range []string{"miniredis", "redis-server"} {
		for _, n := range ns {
			t.Run(fmt.Sprintf("%s/N=%d", k, n), func(t *testing.T) {
				var s allSetup
				if k == "miniredis" {
					nodes, servers := miniNodes(t, n)
					s.nodes, s.more = nodes, func() []redlock.Node { return nodesOf(t, servers) }
					for _, m := range servers {
						s.stores = append(s.stores, miniStore{m})
					}
				} else {
					nodes, servers := realNodes(t, n)
					s.nodes, s.more = nodes, func() []redlock.Node { return nodesFor(t, servers) }
					for _, r := range servers {
						s.stores = append(s.stores, realStore{r})
					}
				}
				f(t, s)
			})
		}
	}
}

var everyN = []int{1, 3, 5}

// cmd runs one command on st's server, over a connection of its own. It may run in a
// condition of require.Eventually, whose goroutine can outlive the test: it reports an
// error rather than failing the test.
func cmd(st store, args ...string) (any, error) {
	var addr string
	switch s := st.(type) {
	case miniStore:
		addr = s.m.Addr()
	case realStore:
		addr = s.s.Addr()
	default:
		return nil, fmt.Errorf("no address for %T", st)
	}
	return redistest.DoTimeout(addr, 5*time.Second, args...)
}

// everywhere reports whether cond holds of the reply to args on every server (false if a
// server fails to answer).
func everywhere(s allSetup, cond func(v any) bool, args ...string) bool {
	for _, st := range s.stores {
		if v, err := cmd(st, args...); err != nil || !cond(v) {
			return false
		}
	}
	return true
}

func isNil(v any) bool { return v == nil }

func notNil(v any) bool { return v != nil }

// queued returns a condition: a sorted set of exactly n members.
func queued(n int64) func(v any) bool { return func(v any) bool { return v == n } }

// heldEverywhere waits until every server holds each of names' lock keys (a lock returns at
// a quorum; the others follow).
func heldEverywhere(t *testing.T, s allSetup, names ...string) {
	t.Helper()
	for _, name := range names {
		require.Eventually(t, func() bool { return everywhere(s, notNil, "GET", lockKey(name)) },
			generous, time.Millisecond, "%s is not held on every server", name)
	}
}

// heldOnQuorum waits until a quorum of servers hold each of names' lock keys.
func heldOnQuorum(t *testing.T, s allSetup, names ...string) {
	t.Helper()
	for _, name := range names {
		require.Eventually(t, func() bool {
			n := 0
			for _, st := range s.stores {
				if v, err := cmd(st, "GET", lockKey(name)); err == nil && v != nil {
					n++
				}
			}
			return n > len(s.stores)/2
		}, generous, time.Millisecond, "%s is not held on a quorum", name)
	}
}

// freeEverywhere waits until no server holds any of names' lock keys.
func freeEverywhere(t *testing.T, s allSetup, names ...string) {
	t.Helper()
	for _, name := range names {
		require.Eventually(t, func() bool { return everywhere(s, isNil, "GET", lockKey(name)) },
			generous, time.Millisecond, "%s is still held on some server", name)
	}
}

// queuedEverywhere waits until name's queue has n waiters on every server.
func queuedEverywhere(t *testing.T, s allSetup, name string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return everywhere(s, queued(n), "ZCARD", lockKey(name)+":queue") },
		generous, time.Millisecond, "%s's queue does not have %d waiters on every server", name, n)
}

// queuedBehind waits until name's queue has n waiters on every server besides the place
// of name's holder (read from a server that holds it), which a server keeps where the
// holder's take did not land.
func queuedBehind(t *testing.T, s allSetup, name string, n int64) {
	t.Helper()
	var holder string
	for _, st := range s.stores {
		if v, err := cmd(st, "GET", lockKey(name)); err == nil && v != nil {
			holder, _, _ = strings.Cut(fmt.Sprint(v), ".") // the waiter id of owner "<id>.<attempt>"
			break
		}
	}
	require.NotEmpty(t, holder, "no server holds %s", name)
	var seen atomic.Value // the queues last read, for the failure's message
	seen.Store("")
	require.Eventually(t, func() bool {
		for i, st := range s.stores {
			v, err := cmd(st, "ZRANGE", lockKey(name)+":queue", "0", "-1")
			seen.Store(fmt.Sprintf("server %d: %v (%v)", i, v, err))
			ids, ok := v.([]any)
			if err != nil || !ok {
				return false
			}
			count := int64(0)
			for _, id := range ids {
				if fmt.Sprint(id) != holder {
					count++
				}
			}
			if count != n {
				return false
			}
		}
		return true
	}, generous, time.Millisecond, "%s's queue does not have %d waiters behind its holder %s on every server: %s",
		name, n, holder, seen.Load())
}

// TestAcquireAllIsAllOrNothing: with one name held by another Client, TryAcquireAll takes
// none of them (the other name is untouched on every server), and its error names the lock
// as given; once free, it takes every name on a quorum, under one token larger than every
// token its names had, which single-name locks of either name and overlapping sets then
// find held, from this Client as from another; Release frees them all, and each name's
// next token is larger than the set's.
func TestAcquireAllIsAllOrNothing(t *testing.T) {
	onAllSetups(t, everyN, func(t *testing.T, s allSetup) {
		c, other := s.client(t), s.client(t)
		ctx := ctxT(t, time.Minute)
		var before uint64
		for _, name := range []string{"a", "b"} { // each name has had a token
			l, err := other.TryAcquire(ctx, name)
			require.NoError(t, err)
			before = max(before, l.Token())
			require.NoError(t, l.Release(ctx))
		}
		b, err := other.TryAcquire(ctx, "b")
		require.NoError(t, err)
		heldEverywhere(t, s, "b") // TryAcquire returns at a quorum: else the set could be granted where b is not yet
		_, err = c.TryAcquireAll(ctx, []string{"b", "a"})
		require.ErrorIs(t, err, redlock.ErrHeld)
		assert.Contains(t, err.Error(), `"[b a]"`, "the error does not name the lock as given")
		assert.True(t, everywhere(s, isNil, "GET", lockKey("a")), "a was taken without b")
		require.NoError(t, b.Release(ctx))

		set, err := c.TryAcquireAll(ctx, []string{"b", "a"})
		require.NoError(t, err)
		assert.Equal(t, "[b a]", set.Name())
		assert.Greater(t, set.Token(), before, "the set's token is not above every name's")
		// A quorum: a node whose call from the refused attempt was still under way (a loaded
		// machine) is spared, not called again, and may never hold the set.
		heldOnQuorum(t, s, "a", "b")
		for _, cl := range []*redlock.Client{c, other} {
			for _, name := range []string{"a", "b"} {
				_, err := cl.TryAcquire(ctx, name)
				assert.ErrorIs(t, err, redlock.ErrHeld, "a Lease of %s while the set holds it", name)
				assert.False(t, cl.NewMutex(name).TryLock(), "a Mutex of %s while the set holds it", name)
			}
			_, err := cl.TryAcquireAll(ctx, []string{"b", "c"})
			assert.ErrorIs(t, err, redlock.ErrHeld, "an overlapping set while the set holds")
			l, err := cl.TryAcquire(ctx, "c")
			require.NoError(t, err, "c is not in the set")
			require.NoError(t, l.Release(ctx))
		}
		require.NoError(t, set.Release(ctx))
		freeEverywhere(t, s, "a", "b")
		for _, name := range []string{"a", "b"} {
			l, err := other.TryAcquire(ctx, name)
			require.NoError(t, err)
			assert.Greater(t, l.Token(), set.Token(), "%s's next token is not above the set's", name)
			require.NoError(t, l.Release(ctx))
		}
	})
}

// TestAcquireAllWaitersCrossed: a waiter for {a, b} and one for {b, a} (goroutines of one
// Client, or of two), queued while single-name Leases hold a and b, both hold their set,
// whichever name is let go of first.
func TestAcquireAllWaitersCrossed(t *testing.T) {
	t.Parallel() // see bubble_test.go
	onAllSetups(t, everyN, func(t *testing.T, s allSetup) {
		for _, first := range []string{"a", "b"} {
			for _, clients := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s first, %d clients", first, clients), func(t *testing.T) {
					holder := s.client(t)
					waiters := []*redlock.Client{s.client(t)}
					if clients == 2 {
						waiters = append(waiters, s.client(t))
					}
					ctx := ctxT(t, time.Minute)
					held := map[string]*redlock.Lease{}
					for _, name := range []string{"a", "b"} {
						l, err := holder.TryAcquire(ctx, name)
						require.NoError(t, err)
						held[name] = l
					}
					done := make(chan error, 2)
					for i, names := range [][]string{{"a", "b"}, {"b", "a"}} {
						go func() {
							l, err := waiters[i%len(waiters)].AcquireAll(ctx, names)
							if err == nil {
								err = l.Release(ctx)
							}
							done <- err
						}()
						queuedEverywhere(t, s, "a", int64(i+1))
					}
					require.NoError(t, held[first].Release(ctx))
					require.NoError(t, held[map[string]string{"a": "b", "b": "a"}[first]].Release(ctx))
					for range 2 {
						require.NoError(t, within(t, false, done, "a set waiter's turn"))
					}
					freeEverywhere(t, s, "a", "b")
				})
			}
		}
	})
}

// TestAcquireAllNotStarved: a set waiter for {a, b}, queued while b is held, is not starved
// by a stream of fenced single-name Leases of a that started waiting after it (each on a
// Client of its own, as processes would be): none of them holds a before the set had its
// turn, which b's release hands it.
func TestAcquireAllNotStarved(t *testing.T) {
	onAllSetups(t, everyN, func(t *testing.T, s allSetup) {
		const lockers, rounds = 3, 3
		ctx := ctxT(t, 2*time.Minute)
		b, err := s.client(t).TryAcquire(ctx, "b")
		require.NoError(t, err)
		var setHeld atomic.Bool
		got := make(chan error, 1)
		go func() {
			l, err := s.client(t).AcquireAll(ctx, []string{"a", "b"})
			if err == nil {
				setHeld.Store(true)
				err = l.Release(ctx)
			}
			got <- err
		}()
		queuedEverywhere(t, s, "a", 1)
		var early atomic.Int32 // holders of a before the set's turn
		var wg sync.WaitGroup
		for range lockers {
			c := s.client(t, redlock.WithRetry(time.Millisecond, 5*time.Millisecond))
			wg.Go(func() {
				for range rounds {
					l, err := c.Acquire(ctx, "a")
					if !assert.NoError(t, err) {
						return
					}
					if !setHeld.Load() {
						early.Add(1)
					}
					assert.NoError(t, l.Release(ctx))
				}
			})
		}
		// Every locker waits behind the set on every server before b is let go of (or one
		// already held a: the assertion below says so).
		require.Eventually(t, func() bool {
			return early.Load() > 0 || everywhere(s, queued(1+lockers), "ZCARD", lockKey("a")+":queue")
		}, generous, time.Millisecond, "a's queue does not have the set waiter and the %d lockers on every server", lockers)
		require.NoError(t, b.Release(ctx))
		require.NoError(t, within(t, false, got, "the set's turn"))
		wg.Wait()
		assert.Zero(t, early.Load(), "a Lease of a that queued after the set waiter held a first")
	})
}

// TestAcquireAllMutexWaitsBehindSetWaiter: a name that a set waiter is first for, while it
// waits for another name, is refused to a Lease and to a Mutex (TryLock, and Lock, which
// waits behind the set waiter in every server's queue): no caller barges past a live
// waiter. b's release wakes the set waiter, which takes both names; the Mutex holds a only
// after the set let go.
func TestAcquireAllMutexWaitsBehindSetWaiter(t *testing.T) {
	onAllSetups(t, everyN, func(t *testing.T, s allSetup) {
		ctx := ctxT(t, time.Minute)
		other := s.client(t)
		b, err := other.TryAcquire(ctx, "b")
		require.NoError(t, err)
		var setHeld atomic.Bool // stored before the set lets go
		got := make(chan error, 1)
		go func() {
			l, err := s.client(t).AcquireAll(ctx, []string{"a", "b"})
			if err == nil {
				setHeld.Store(true)
				err = l.Release(ctx)
			}
			got <- err
		}()
		queuedEverywhere(t, s, "a", 1)
		freeEverywhere(t, s, "a") // free, but the set waiter goes first
		_, err = other.TryAcquire(ctx, "a")
		require.ErrorIs(t, err, redlock.ErrHeld, "a Lease took a, which the set waiter is first for")
		m := other.NewMutex("a")
		require.False(t, m.TryLock(), "a Mutex's TryLock took a, which the set waiter is first for")

		locked := make(chan error, 1)
		go func() {
			err := m.LockContext(ctx)
			if err == nil && !setHeld.Load() {
				err = errors.New("the Mutex held a before the set waiter had its turn")
			}
			locked <- err
		}()
		queuedEverywhere(t, s, "a", 2) // the set waiter, then the Mutex
		select {
		case err := <-locked:
			t.Fatalf("the Mutex returned while the set waiter was first for a: %v", err)
		default:
		}
		require.NoError(t, b.Release(ctx))
		require.NoError(t, within(t, false, got, "the set's turn after b's release"))
		require.NoError(t, within(t, false, locked, "the Mutex's turn after the set's release"))
		require.NoError(t, m.UnlockContext(ctx))
		freeEverywhere(t, s, "a", "b")
	})
}

// TestAllExcludesMutexesAndReaders: goroutines lock single names through Mutexes, RWMutex
// writers and readers, and overlapping sets through NewMutexAll, NewRWMutexAll (readers and
// writers) and AcquireAll, a few
// rounds each, over two Clients (so that goroutines of one Client mix sets and single
// names, and the Client's local queue of a name meets sets): no name ever has a writer
// beside another holder, and every wait ends.
func TestAllExcludesMutexesAndReaders(t *testing.T) {
	t.Parallel() // see bubble_test.go
	onAllSetups(t, everyN, func(t *testing.T, s allSetup) {
		const rounds = 4
		names := []string{"x", "y", "z"}
		var writers, readers [3]atomic.Int32
		ctx := ctxT(t, 3*time.Minute)
		clients := []*redlock.Client{
			s.client(t, redlock.WithRetry(time.Millisecond, 10*time.Millisecond)),
			s.client(t, redlock.WithRetry(time.Millisecond, 10*time.Millisecond)),
		}
		write := func(idx []int) {
			for _, i := range idx {
				assert.Equal(t, int32(1), writers[i].Add(1), "%s has two writers", names[i])
				assert.Zero(t, readers[i].Load(), "%s has a reader beside a writer", names[i])
			}
			runtime.Gosched()
			for _, i := range idx {
				writers[i].Add(-1)
			}
		}
		namesOf := func(idx []int) []string {
			n := make([]string, len(idx))
			for j, i := range idx {
				n[j] = names[i]
			}
			return n
		}
		type worker func(c *redlock.Client, g int)
		workers := []worker{
			func(c *redlock.Client, g int) { // a Mutex of one name
				m := c.NewMutex(names[g%3])
				for range rounds {
					if !assert.NoError(t, m.LockContext(ctx)) {
						return
					}
					write([]int{g % 3})
					assert.NoError(t, m.UnlockContext(ctx))
				}
			},
			func(c *redlock.Client, g int) { // an RWMutex's readers and writer
				rw := c.NewRWMutex(names[g%3])
				for r := range rounds {
					if r%2 == 0 {
						if !assert.NoError(t, rw.RLockContext(ctx)) {
							return
						}
						assert.Zero(t, writers[g%3].Load(), "%s has a writer beside a reader", names[g%3])
						readers[g%3].Add(1)
						runtime.Gosched()
						readers[g%3].Add(-1)
						assert.NoError(t, rw.RUnlockContext(ctx))
						continue
					}
					if !assert.NoError(t, rw.LockContext(ctx)) {
						return
					}
					write([]int{g % 3})
					assert.NoError(t, rw.UnlockContext(ctx))
				}
			},
			func(c *redlock.Client, g int) { // a Mutex over several names
				idx := [][]int{{0, 1}, {1, 2}, {2, 0}, {0, 1, 2}}[g%4]
				m := c.NewMutexAll(namesOf(idx))
				for range rounds {
					if !assert.NoError(t, m.LockContext(ctx)) {
						return
					}
					write(idx)
					assert.NoError(t, m.UnlockContext(ctx))
				}
			},
			func(c *redlock.Client, g int) { // an RWMutex over several names: readers and writer
				idx := [][]int{{1, 2}, {0, 1, 2}, {2, 0}}[g%3]
				rw := c.NewRWMutexAll(namesOf(idx))
				for r := range rounds {
					if r%2 == 1 {
						if !assert.NoError(t, rw.LockContext(ctx)) {
							return
						}
						write(idx)
						assert.NoError(t, rw.UnlockContext(ctx))
						continue
					}
					if !assert.NoError(t, rw.RLockContext(ctx)) {
						return
					}
					for _, i := range idx {
						assert.Zero(t, writers[i].Load(), "%s has a writer beside a reader set", names[i])
						readers[i].Add(1)
					}
					runtime.Gosched()
					for _, i := range idx {
						readers[i].Add(-1)
					}
					assert.NoError(t, rw.RUnlockContext(ctx))
				}
			},
			func(c *redlock.Client, g int) { // Leases over several names
				idx := [][]int{{2, 1}, {0, 2}, {1, 0}}[g%3]
				for range rounds {
					l, err := c.AcquireAll(ctx, namesOf(idx))
					if !assert.NoError(t, err) {
						return
					}
					write(idx)
					assert.NoError(t, l.Release(ctx))
				}
			},
		}
		var wg sync.WaitGroup
		for g := range 10 {
			wg.Go(func() { workers[g%len(workers)](clients[g%2], g) })
		}
		wg.Wait()
	})
}

// TestAcquireAllOneClient: goroutines of one Client that hold or wait for a set and a name
// in it, or two overlapping sets, go by what Redis says, not by the Client's local queue:
// the set waits while a Lease of the Client holds one of its names, and then a fenced
// single-name attempt of a name it waits for is refused; the set, once held, refuses the
// Client's single names and overlapping sets; a Mutex of one of its names and another set
// wait in Redis and hold after it, and the Mutex's local queue works on.
func TestAcquireAllOneClient(t *testing.T) {
	onAllSetups(t, everyN, func(t *testing.T, s allSetup) {
		c := s.client(t)
		ctx := ctxT(t, time.Minute)
		a, err := c.Acquire(ctx, "a")
		require.NoError(t, err)
		heldEverywhere(t, s, "a") // Acquire returns at a quorum: else the set could be granted where a is not yet
		_, err = c.TryAcquireAll(ctx, []string{"a", "b"})
		require.ErrorIs(t, err, redlock.ErrHeld)
		assert.True(t, everywhere(s, isNil, "GET", lockKey("b")), "b was taken without a")

		type result struct {
			l   *redlock.Lease
			err error
		}
		setCh := make(chan result, 1)
		go func() {
			l, err := c.AcquireAll(ctx, []string{"b", "a"})
			setCh <- result{l, err}
		}()
		queuedEverywhere(t, s, "b", 1)
		_, err = c.TryAcquire(ctx, "b")
		require.ErrorIs(t, err, redlock.ErrHeld, "a Lease took b, which the set waits for")
		require.NoError(t, a.Release(ctx))
		r := within(t, false, setCh, "the set")
		require.NoError(t, r.err)
		set := r.l
		// AcquireAll returns at a quorum: the other servers may follow later.
		heldOnQuorum(t, s, "a", "b")

		_, err = c.TryAcquire(ctx, "a")
		require.ErrorIs(t, err, redlock.ErrHeld)
		assert.NotContains(t, err.Error(), "goroutine of this Client", "a single name's local queue saw the set")
		m := c.NewMutex("b")
		require.False(t, m.TryLock())
		_, err = c.TryAcquireAll(ctx, []string{"b", "c"})
		require.ErrorIs(t, err, redlock.ErrHeld)

		mutexDone, otherSet := make(chan error, 1), make(chan error, 1)
		go func() { mutexDone <- m.LockContext(ctx) }()
		// The Mutex only: a holder leaves the queue where it takes. A server where the set's
		// take lost the race with a's release (the set returned at a quorum) keeps its place
		// until its release.
		queuedBehind(t, s, "b", 1)
		go func() {
			l, err := c.AcquireAll(ctx, []string{"c", "b"})
			if err == nil {
				err = l.Release(ctx)
			}
			otherSet <- err
		}()
		queuedBehind(t, s, "b", 2)
		require.NoError(t, set.Release(ctx))
		require.NoError(t, within(t, false, mutexDone, "the Mutex"))
		require.NoError(t, m.UnlockContext(ctx))
		require.NoError(t, within(t, false, otherSet, "the second set"))
		require.True(t, m.TryLock(), "the Mutex's local queue place was not given back")
		require.NoError(t, m.UnlockContext(ctx))
	})
}

// TestAcquireAllExtendsAndIsLost: a set that extends itself keeps every name past its first
// validity; deleting one name's key on every server ends it with ErrLost (Done, Err, a
// Mutex's Lost, the lost handler), and the other name is freed by the release. So does
// deleting a reader set's share of one name (an RWMutex over several names, read), whose
// RUnlock reports the loss to the WithErrorHandler function.
func TestAcquireAllExtendsAndIsLost(t *testing.T) {
	t.Parallel() // see bubble_test.go
	onAllSetups(t, everyN, func(t *testing.T, s allSetup) {
		ctx := ctxT(t, time.Minute)
		// A TTL that leaves room for the node timeout of a loaded machine.
		opts := []redlock.Option{redlock.WithTTL(3 * time.Second), redlock.WithNodeTimeout(500 * time.Millisecond)}
		c := s.client(t, opts...)
		lost := make(chan error, 1)
		l, err := c.AcquireAll(ctx, []string{"a", "b"}, redlock.WithAutoExtend(true),
			redlock.WithLostHandler(func(err error) { lost <- err }))
		require.NoError(t, err)
		first := l.Until()
		require.Eventually(t, func() bool { return l.Until().After(first) }, generous, time.Millisecond, "the set was not extended")
		require.NoError(t, l.Err())
		heldEverywhere(t, s, "a", "b")
		for _, st := range s.stores {
			deleteKey(t, st, lockKey("b"))
		}
		within(t, false, l.Done(), "the set's end")
		require.ErrorIs(t, l.Err(), redlock.ErrLost)
		require.ErrorIs(t, within(t, false, lost, "the lost handler"), redlock.ErrLost)
		require.ErrorIs(t, l.Release(ctx), redlock.ErrLost)
		freeEverywhere(t, s, "a")

		m := c.NewMutexAll([]string{"b", "a"})
		require.NoError(t, m.LockContext(ctx))
		for _, st := range s.stores {
			deleteKey(t, st, lockKey("a"))
		}
		within(t, false, m.Lost(), "the Mutex's loss")
		require.ErrorIs(t, m.UnlockContext(ctx), redlock.ErrLost)
		freeEverywhere(t, s, "b")

		reported := make(chan error, 1)
		rw := c.NewRWMutexAll([]string{"b", "a"}, redlock.WithErrorHandler(func(err error) { reported <- err }))
		require.NoError(t, rw.RLockContext(ctx))
		heldEverywhere(t, s, "a", "b")
		for _, st := range s.stores {
			deleteKey(t, st, lockKey("a")+":readers")
		}
		within(t, false, rw.Lost(), "the reader set's loss")
		rw.RUnlock()
		require.ErrorIs(t, within(t, false, reported, "RUnlock's error, reported"), redlock.ErrLost)
		freeEverywhere(t, s, "b")
	})
}

// TestDoAll: DoAll runs fn holding every name; fn's context ends, with ErrLost as its
// cause, when one name is lost, and DoAll returns it; a panic in fn goes on after the
// names are released.
func TestDoAll(t *testing.T) {
	t.Parallel() // see bubble_test.go
	onAllSetups(t, everyN, func(t *testing.T, s allSetup) {
		ctx := ctxT(t, time.Minute)
		c := s.client(t, redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(500*time.Millisecond))
		err := c.DoAll(ctx, []string{"a", "b"}, func(fctx context.Context) error {
			heldEverywhere(t, s, "a", "b")
			for _, st := range s.stores {
				deleteKey(t, st, lockKey("a"))
			}
			within(t, false, fctx.Done(), "fn's context's end")
			require.ErrorIs(t, context.Cause(fctx), redlock.ErrLost)
			return nil
		})
		require.ErrorIs(t, err, redlock.ErrLost)
		assert.Contains(t, err.Error(), `"[a b]"`)
		freeEverywhere(t, s, "b")

		require.PanicsWithValue(t, "boom", func() {
			_ = c.DoAll(ctx, []string{"a", "b"}, func(context.Context) error { panic("boom") })
		})
		freeEverywhere(t, s, "a", "b")
		l, err := c.TryAcquireAll(ctx, []string{"a", "b"})
		require.NoError(t, err, "the names were not released after the panic")
		require.NoError(t, l.Release(ctx))
	})
}

// TestAllBadInput: no names, or a bad one, is ErrInvalid from every call over several
// names, naming the lock as given; so is an option that does not apply. A name given twice
// counts once.
func TestAllBadInput(t *testing.T) {
	nodes, servers := miniNodes(t, 3)
	c := newClient(t, nodes, patient)
	ctx := ctxT(t, time.Minute)
	long := strings.Repeat("x", redlock.MaxNameLen+1)
	for _, names := range [][]string{nil, {}, {"a", ""}, {"a", long}} {
		t.Run(fmt.Sprint(len(names)), func(t *testing.T) {
			check := func(t *testing.T, err error) {
				t.Helper()
				require.ErrorIs(t, err, redlock.ErrInvalid)
				want := fmt.Sprintf("%q", fmt.Sprint(names))
				if len(want) > 66 {
					want = want[:40] // quoted cuts long names short
				}
				assert.Contains(t, err.Error(), want, "the error does not name the lock as given")
			}
			_, err := c.AcquireAll(ctx, names)
			check(t, err)
			_, err = c.TryAcquireAll(ctx, names)
			check(t, err)
			check(t, c.DoAll(ctx, names, func(context.Context) error { return nil }))
			m := c.NewMutexAll(names)
			check(t, m.LockContext(ctx))
			assert.False(t, m.TryLock())
			assert.Panics(t, m.Lock)
			rw := c.NewRWMutexAll(names)
			check(t, rw.RLockContext(ctx))
			check(t, rw.LockContext(ctx))
			assert.False(t, rw.TryRLock())
			assert.Panics(t, rw.RLock)
		})
	}
	_, err := c.TryAcquireAll(ctx, []string{"a"}, redlock.WithRetry(time.Millisecond, time.Second))
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorIs(t, c.DoAll(ctx, []string{"a"}, nil), redlock.ErrInvalid)
	require.ErrorIs(t, c.DoAll(ctx, []string{"a"}, func(context.Context) error { return nil }, redlock.WithAutoExtend(false)), redlock.ErrInvalid)
	require.ErrorIs(t, c.NewMutexAll([]string{"a"}, redlock.WithAutoExtend(false)).LockContext(ctx), redlock.ErrInvalid)
	require.ErrorIs(t, c.NewRWMutexAll([]string{"a"}, redlock.WithAutoExtend(false)).RLockContext(ctx), redlock.ErrInvalid)
	for _, s := range servers {
		assert.Empty(t, s.Keys(), "a refused call left keys")
	}

	l, err := c.TryAcquireAll(ctx, []string{"b", "a", "b"})
	require.NoError(t, err)
	assert.Equal(t, "[b a b]", l.Name())
	for _, s := range servers {
		for _, name := range []string{"a", "b"} {
			v, err := s.Get(lockKey(name))
			require.NoError(t, err)
			assert.NotEmpty(t, v)
		}
	}
	require.NoError(t, l.Release(ctx))
	m := c.NewMutexAll([]string{"a", "a"})
	require.NoError(t, m.LockContext(ctx))
	require.NoError(t, m.UnlockContext(ctx))
	rw := c.NewRWMutexAll([]string{"a", "a"})
	require.NoError(t, rw.RLockContext(ctx))
	require.NoError(t, rw.RUnlockContext(ctx))
}

// TestAcquireAllClose: Close releases a held set (its Lease ends with ErrClosed, a Mutex
// over several names loses its holding) and wakes a set waiter with ErrClosed.
func TestAcquireAllClose(t *testing.T) {
	onAllSetups(t, []int{3}, func(t *testing.T, s allSetup) {
		ctx := ctxT(t, time.Minute)
		c := s.client(t)
		l, err := c.AcquireAll(ctx, []string{"a", "b"})
		require.NoError(t, err)
		m := c.NewMutexAll([]string{"c", "d"})
		require.NoError(t, m.LockContext(ctx))
		waited := make(chan error, 1)
		go func() {
			_, err := c.AcquireAll(ctx, []string{"b", "c"})
			waited <- err
		}()
		queuedEverywhere(t, s, "b", 1)
		require.NoError(t, c.Close())
		require.ErrorIs(t, within(t, false, waited, "the waiter's end"), redlock.ErrClosed)
		require.ErrorIs(t, l.Err(), redlock.ErrClosed)
		within(t, false, m.Lost(), "the Mutex's loss")
		freeEverywhere(t, s, "a", "b", "c", "d")
	})
}

// TestHeldInASetWithANodeDown: with one node of three down, a name that a Mutex over
// several names holds reads as held (ErrHeld) to TryAcquire and TryAcquireAll, from the
// Client that holds the set (which knows the node is down: it does not wait for it) as
// from another, every time. In a bubble, over simulated servers.
func TestHeldInASetWithANodeDown(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nodes, servers := simNodes(t, 3)
		c := closingClient(t, nodes, redlock.WithTTL(time.Minute))
		other := closingClient(t, simnet.Nodes(t, servers), redlock.WithTTL(time.Minute))
		servers[2].Crash()
		ctx := context.Background()
		m := c.NewMutexAll([]string{"a", "b"})
		require.NoError(t, m.LockContext(ctx))
		for i := range 5 {
			for name, cl := range map[string]*redlock.Client{"the holder's Client": c, "another Client": other} {
				_, err := cl.TryAcquire(ctx, "a")
				require.ErrorIs(t, err, redlock.ErrHeld, "%s, try %d", name, i)
				_, err = cl.TryAcquireAll(ctx, []string{"b", "c"})
				require.ErrorIs(t, err, redlock.ErrHeld, "%s, try %d", name, i)
			}
		}
		require.NoError(t, m.UnlockContext(ctx))
	})
}
