package core_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests check a lock over several names at once (core.NewSetKeys) on the acquire and
// release scripts: all or nothing, one fence above every name's, waiters of
// overlapping sets that never block each other for good, and no starvation by single-name
// holders.

// setLock is a fenced request for every one of names at once, with a node timeout that
// suits servers.
func setLock(t *testing.T, servers []server, names ...string) *core.Lock {
	t.Helper()
	k, err := core.NewSetKeys("q:", names)
	require.NoError(t, err)
	l := lockOn(servers, names[0])
	l.Keys, l.Fence = k, true
	return l
}

// fencedOn is lockOn(servers, name), fenced: its grants carry fencing tokens.
func fencedOn(servers []server, name string) *core.Lock {
	l := lockOn(servers, name)
	l.Fence = true
	return l
}

// holders returns what each server's lock key of name holds ("" for none, the error for a
// failed read: it runs in Eventually's goroutines, which must not fail the test).
func holders(t *testing.T, servers []server, name string) []string {
	k := core.NewKeys("q:", name)
	h := make([]string, len(servers))
	for i, s := range servers {
		switch v, err := s.do("GET", k.Lock); {
		case err == redis.Nil:
		case err != nil:
			h[i] = "error: " + err.Error()
		default:
			h[i] = v.(string)
		}
	}
	return h
}

func everywhere(servers []server, v string) []string {
	h := make([]string, len(servers))
	for i := range h {
		h[i] = v
	}
	return h
}

func TestNewSetKeys(t *testing.T) {
	_, err := core.NewSetKeys("q:", nil)
	require.ErrorIs(t, err, core.ErrInvalid)
	k, err := core.NewSetKeys("q:", []string{"b", "a", "b"})
	require.NoError(t, err)
	require.Len(t, k.Set, 2, "a name given twice counts once")
	assert.Equal(t, core.NewKeys("q:", "a"), k.Set[0])
	assert.Equal(t, core.NewKeys("q:", "b"), k.Set[1])
	assert.Equal(t, core.NewKeys("q:", "a").Channel, k.Channel, "a set's waiter is woken on its first name's channel")
}

// TestSetIsAllOrNothing: a set whose one name is held takes none of them; once free, it
// takes every name on every node, and single-name locks of its names are refused until it
// lets go of all of them.
func TestSetIsAllOrNothing(t *testing.T) {
	for _, c := range setups {
		t.Run(c.name, func(t *testing.T) {
			servers := c.servers(t, c.n)
			cl := newCluster(t, servers)
			ctx := context.Background()
			b := holdFenced(t, ctx, cl, servers, "b") // else the set is granted where b is not yet
			_, err := cl.Acquire(ctx, setLock(t, servers, "a", "b"))
			require.ErrorIs(t, err, core.ErrHeld)
			assert.Equal(t, everywhere(servers, ""), holders(t, servers, "a"), "a was taken without b")
			require.NoError(t, cl.Release(ctx, b))
			require.Eventually(t, func() bool { // the release returns at a quorum
				return assert.ObjectsAreEqual(everywhere(servers, ""), holders(t, servers, "b"))
			}, generous, time.Millisecond, "b is still held after its release")

			set, err := cl.Acquire(ctx, setLock(t, servers, "b", "a"))
			require.NoError(t, err)
			for _, name := range []string{"a", "b"} {
				heldBy(t, servers, name, set)
				_, err = cl.Acquire(ctx, fencedOn(servers, name))
				require.ErrorIs(t, err, core.ErrHeld, "a single-name lock of %s while the set holds it", name)
			}
			_, err = cl.Extend(ctx, set)
			require.NoError(t, err)
			require.NoError(t, cl.Release(ctx, set))
			for _, name := range []string{"a", "b"} {
				require.Eventually(t, func() bool {
					return assert.ObjectsAreEqual(everywhere(servers, ""), holders(t, servers, name))
				}, generous, time.Millisecond, "%s is still held after the set's release", name)
			}
			_, err = cl.Extend(ctx, set)
			require.ErrorIs(t, err, core.ErrNotHeld)
		})
	}
}

// TestSetTokenExceedsEveryName: the set's fencing token is larger than every token any of
// its names had, however far apart the names' counters are, and each name's next token is
// larger than the set's (on N = 3, where b's counter is far ahead on one node only, through
// the raise).
func TestSetTokenExceedsEveryName(t *testing.T) {
	for _, c := range setups {
		t.Run(c.name, func(t *testing.T) {
			servers := c.servers(t, c.n)
			cl := newCluster(t, servers)
			ctx := context.Background()
			// b's counter far ahead of a's (and of the floor an acquisition proposes).
			// On one node only, at N = 3, so that the nodes disagree and the set's token is
			// raised on a quorum.
			far := strconv.FormatInt(time.Now().Add(time.Minute).UnixMicro(), 10)
			for _, s := range servers[:max(1, len(servers)-2)] {
				_, err := s.do("SET", core.NewKeys("q:", "b").Fence, far, "PX", "60000")
				require.NoError(t, err)
			}
			var before uint64
			for _, name := range []string{"a", "b"} {
				h, err := cl.Acquire(ctx, fencedOn(servers, name))
				require.NoError(t, err)
				before = max(before, h.Fence)
				require.NoError(t, cl.Release(ctx, h))
			}
			set, err := cl.Acquire(ctx, setLock(t, servers, "a", "b"))
			require.NoError(t, err)
			assert.Greater(t, set.Fence, before, "the set's token is not above every name's")
			require.NoError(t, cl.Release(ctx, set))
			for _, name := range []string{"a", "b"} {
				h, err := cl.Acquire(ctx, fencedOn(servers, name))
				require.NoError(t, err)
				assert.Greater(t, h.Fence, set.Fence, "%s's next token is not above the set's", name)
				require.NoError(t, cl.Release(ctx, h))
			}
		})
	}
}

// TestCrossedSetWaitersNeverDeadlock: a waiter for {a, b} and one for {b, a}, queued while
// a and b are held by others, both get their set, in the order they queued, whichever
// name is let go of first; each, woken, takes its set whole.
func TestCrossedSetWaitersNeverDeadlock(t *testing.T) {
	for _, c := range setups {
		for _, first := range []string{"a", "b"} {
			t.Run(c.name+"/"+first+" first", func(t *testing.T) {
				servers := c.servers(t, c.n)
				cl := newCluster(t, servers)
				ctx, cancel := context.WithTimeout(context.Background(), generous)
				defer cancel()
				held := map[string]*core.Held{}
				for _, name := range []string{"a", "b"} {
					held[name] = holdFenced(t, ctx, cl, servers, name)
				}
				order := make(chan int, 2)
				var wg sync.WaitGroup
				for i, names := range [][]string{{"a", "b"}, {"b", "a"}} {
					wg.Go(func() {
						h, err := cl.AcquireWait(ctx, setLock(t, servers, names...), patient)
						if !assert.NoError(t, err, "waiter %d", i) {
							order <- -1
							return
						}
						order <- i
						time.Sleep(5 * time.Millisecond)
						assert.NoError(t, cl.Release(context.Background(), h))
					})
					k := core.NewKeys("q:", "a")
					require.Eventually(t, func() bool { return allEqual(queued(t, servers, k), int64(i+1)) },
						generous, time.Millisecond, "waiter %d is not queued", i)
				}
				second := map[string]string{"a": "b", "b": "a"}[first]
				require.NoError(t, cl.Release(ctx, held[first]))
				require.Eventually(t, func() bool { // the release returns at a quorum
					return assert.ObjectsAreEqual(everywhere(servers, ""), holders(t, servers, first))
				}, generous, time.Millisecond, "%s does not stay free, kept for the set's waiter", first)
				require.NoError(t, cl.Release(ctx, held[second]))
				for want := range 2 {
					require.Equal(t, want, await(t, servers, order, "a set waiter's turn"), "the set waiters did not go in ticket order")
				}
				wg.Wait()
			})
		}
	}
}

// TestSetWaiterIsNotStarved: while a set waiter for {a, b} waits for b, a stays free for
// it: single-name waiters of a that come after it queue behind it, and none holds a until
// the set waiter had its turn, which it takes whole once a release of b wakes it.
func TestSetWaiterIsNotStarved(t *testing.T) {
	const lockers = 4
	for _, c := range setups[:2] {
		t.Run(c.name, func(t *testing.T) {
			servers := c.servers(t, c.n)
			cl := newCluster(t, servers)
			ctx, cancel := context.WithTimeout(context.Background(), generous)
			defer cancel()
			b := holdFenced(t, ctx, cl, servers, "b")
			var setHeld atomic.Bool
			var early atomic.Int32 // single holders of a before the set's turn
			got := waitInBackground(t, ctx, cl, setLock(t, servers, "a", "b"))
			a := core.NewKeys("q:", "a")
			require.Eventually(t, func() bool { return allEqual(queued(t, servers, a), 1) }, generous, time.Millisecond)
			var wg sync.WaitGroup
			for range lockers { // a stream of single-name lockers of a
				wg.Go(func() {
					for range 3 {
						h, err := cl.AcquireWait(ctx, fencedOn(servers, "a"), core.Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond})
						if !assert.NoError(t, err) {
							return
						}
						if !setHeld.Load() {
							early.Add(1)
						}
						time.Sleep(time.Millisecond)
						assert.NoError(t, cl.Release(context.Background(), h))
					}
				})
			}
			// Every locker queued behind the set waiter on every server before b is let go of
			// (or one already held a: the assertion below says so).
			require.Eventually(t, func() bool { return early.Load() > 0 || allEqual(queued(t, servers, a), 1+lockers) },
				generous, time.Millisecond, "the %d single-name waiters of a are not queued behind the set waiter on every server", lockers)
			require.NoError(t, cl.Release(ctx, b))
			set := await(t, servers, got, "the set's turn")
			setHeld.Store(true) // before the set lets go of a, which no single holder has until then
			require.NoError(t, cl.Release(ctx, set))
			wg.Wait()
			assert.Zero(t, early.Load(), "a single-name waiter that queued after the set waiter took a first")
		})
	}
}

// TestSetScriptsRunTwice: a set's acquire and release run twice with the same arguments leave
// the state of one run: the set held once, a waiter queued once, everything let go.
func TestSetScriptsRunTwice(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		ctx := context.Background()
		tw, _, plain := twiceClusters(t, s)
		servers := []server{s}
		l := setLock(t, servers, "a", "b")
		l.NodeTimeout = 10 * time.Second

		set, err := tw.Acquire(ctx, l)
		require.NoError(t, err)
		assert.Equal(t, []string{set.Token()}, holders(t, servers, "a"))
		assert.Equal(t, []string{set.Token()}, holders(t, servers, "b"))
		_, err = tw.Extend(ctx, set)
		require.NoError(t, err)
		require.NoError(t, tw.Release(ctx, set))
		assert.Equal(t, []string{""}, holders(t, servers, "a"))
		assert.Equal(t, []string{""}, holders(t, servers, "b"))

		b, err := plain.Acquire(ctx, fencedOn(servers, "b"))
		require.NoError(t, err)
		_, err = tw.AcquireAs(ctx, l, "w.1", "w", 1)
		require.ErrorIs(t, err, core.ErrHeld)
		for _, name := range []string{"a", "b"} {
			assert.Equal(t, []int64{1}, queued(t, servers, core.NewKeys("q:", name)), "the set waiter is queued once in %s", name)
		}
		assert.Equal(t, []string{""}, holders(t, servers, "a"), "a was taken without b")
		require.NoError(t, tw.Release(ctx, b)) // wakes w; the second run finds b free, and wakes it again
		assert.Equal(t, []string{""}, holders(t, servers, "b"), "a release gave b to someone")
		_, err = tw.AcquireAs(ctx, l, "w.2", "w", 1) // its next attempt, woken; the second run finds the set w.2's
		require.NoError(t, err, "the woken set waiter could not take the set")
		assert.Equal(t, []string{"w.2"}, holders(t, servers, "a"))
		assert.Equal(t, []string{"w.2"}, holders(t, servers, "b"))
		w := core.HeldAs(l, "w.2", "w", 1)
		w.Until = time.Now().Add(time.Minute) // within its validity: a second run's "gone" counts
		require.NoError(t, tw.Release(ctx, w))
		assert.Equal(t, []string{""}, holders(t, servers, "a"))
		assert.Equal(t, []string{""}, holders(t, servers, "b"))
		for _, name := range []string{"a", "b"} {
			assert.Equal(t, []int64{0}, queued(t, servers, core.NewKeys("q:", name)), "the set waiter left %s's queue", name)
		}
	})
}

// TestSetWaiterIsWokenWhole: a set waiter whose refresh interval and backoff are far
// longer than the test gets its set when the holder of its last held name lets go: the
// release wakes it, and it takes every name with one more attempt.
func TestSetWaiterIsWokenWhole(t *testing.T) {
	for _, c := range setups {
		t.Run(c.name, func(t *testing.T) {
			servers := c.servers(t, c.n)
			cl, nodes := landedCluster(t, servers)
			ctx, cancel := context.WithTimeout(context.Background(), generous)
			defer cancel()
			landed := func() (n int64) {
				for _, node := range nodes {
					n += node.acquires.Load()
				}
				return n
			}
			b := holdFenced(t, ctx, cl, servers, "b")
			l := setLock(t, servers, "a", "b")
			l.NodeTimeout = 10 * time.Second // a refresh interval of 25 s: longer than the await
			for _, node := range nodes {     // the waiter's attempts (see slowAcquires)
				node.slow.Store(int64(300 * time.Millisecond))
			}
			got := waitInBackground(t, ctx, cl, l)
			// The holder's call and the waiter's first two attempts (the second after it
			// subscribed) ran on every server: then it waits, and calls no more for 25 s.
			n := int64(len(servers))
			require.Eventually(t, func() bool { return landed() == 3*n }, generous, time.Millisecond,
				"the set waiter did not call twice")
			require.NoError(t, cl.Release(ctx, b))
			set := await(t, servers, got, "the set when b was let go")
			assert.Equal(t, 3, set.Attempts, "the woken set waiter did not take the set with its next attempt")
			require.Eventually(t, func() bool { return landed() == 4*n }, generous, time.Millisecond)
			// A quorum holds it: a node where the release of b landed after the set's attempt
			// refused it, as Redlock allows.
			for _, name := range []string{"a", "b"} {
				h, q := holders(t, servers, name), queued(t, servers, core.NewKeys("q:", name))
				assert.True(t, onQuorum(len(servers), func(i int) bool { return h[i] == set.Token() && q[i] == 0 }),
					"the set does not hold %s on a quorum, out of its queue: %v, %v", name, h, q)
			}
			require.NoError(t, cl.Release(ctx, set))
		})
	}
}

// landed is a go-redis Node (a Subscriber) that counts the acquire scripts that ran on its
// server (the count rises once the server replied), and holds back each reply by slow
// nanoseconds after that.
type landed struct {
	*goredis.Node
	acquires, slow atomic.Int64
}

func (n *landed) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	r, err := n.Node.Eval(ctx, s, keys, args...)
	if s.Name() == "acquire" {
		n.acquires.Add(1)
		time.Sleep(time.Duration(n.slow.Load()))
	}
	return r, err
}

// landedCluster returns a Cluster over servers whose nodes count the acquire scripts that
// ran (see landed).
func landedCluster(t *testing.T, servers []server) (*core.Cluster, []*landed) {
	nodes := make([]core.Node, len(servers))
	counts := make([]*landed, len(servers))
	for i, s := range servers {
		counts[i] = &landed{Node: nodeFor(t, s)}
		nodes[i] = counts[i]
	}
	cl, err := core.NewCluster(nodes)
	require.NoError(t, err)
	return cl, counts
}

// onQuorum reports whether cond holds for a quorum (n/2+1) of n servers, by index.
func onQuorum(n int, cond func(i int) bool) bool {
	yes := 0
	for i := range n {
		if cond(i) {
			yes++
		}
	}
	return yes >= n/2+1
}

// heldBy waits until every server holds name under h's token: an acquisition returns at a
// quorum, and a test whose next step needs the others too waits for them.
func heldBy(t *testing.T, servers []server, name string, h *core.Held) {
	t.Helper()
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(everywhere(servers, h.Token()), holders(t, servers, name)) },
		generous, time.Millisecond, "%s is not held on every server", name)
}

// holdFenced acquires name through cl (fenced: see fencedOn) and waits until every server
// holds it (see heldBy).
func holdFenced(t *testing.T, ctx context.Context, cl *core.Cluster, servers []server, name string) *core.Held {
	t.Helper()
	h, err := cl.Acquire(ctx, fencedOn(servers, name))
	require.NoError(t, err)
	heldBy(t, servers, name, h)
	return h
}

// waitInBackground runs cl.AcquireWait(ctx, l, patient) in a goroutine, and returns the
// channel on which it delivers the lock held (nothing on an error, which fails the test).
func waitInBackground(t *testing.T, ctx context.Context, cl *core.Cluster, l *core.Lock) <-chan *core.Held {
	got := make(chan *core.Held, 1)
	go func() {
		h, err := cl.AcquireWait(ctx, l, patient)
		if assert.NoError(t, err) {
			got <- h
		}
	}()
	return got
}
