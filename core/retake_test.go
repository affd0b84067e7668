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

// TestExtendTakesNodesThatNeverHeld: a holder granted while two of five servers refused it
// (another owner's key, since gone, stood there) takes the lock on them with its next
// extension, their fence counters raised to its token, and then holds on every node; such
// nodes count only before its validity ends. A node that held the lock and lost it counts
// as one that no longer does.
func TestExtendTakesNodesThatNeverHeld(t *testing.T) {
	bubble(t, func(t *testing.T) {
		servers := simServers(t, 5)
		c := newCluster(t, servers)
		ctx := context.Background()
		acquire := func(name string) (*core.Lock, *core.Held) {
			l := lock(name)
			l.TTL, l.Fence = time.Second, true
			for _, s := range servers[3:] {
				_, err := s.do("SET", l.Keys.Lock, "another", "PX", "60000")
				require.NoError(t, err)
			}
			h, err := c.Acquire(ctx, l)
			require.NoError(t, err)
			synctest.Wait() // the refusals the acquisition did not wait for have come
			for _, s := range servers[3:] {
				_, err := s.do("DEL", l.Keys.Lock)
				require.NoError(t, err)
			}
			return l, h
		}

		l, h := acquire("back")
		until, err := c.Extend(ctx, h)
		require.NoError(t, err)
		assert.Equal(t, until, h.Until)
		synctest.Wait() // the nodes the extension did not wait for have answered
		for i, s := range servers {
			v, err := s.do("GET", l.Keys.Lock)
			require.NoError(t, err, "node %d", i)
			assert.Equal(t, h.Token(), v, "node %d", i)
			n, err := s.do("GET", l.Keys.Fence)
			require.NoError(t, err, "node %d", i)
			counter, _ := strconv.ParseUint(n.(string), 10, 64)
			assert.GreaterOrEqual(t, counter, h.Fence, "node %d: a later holder could get a smaller token", i)
		}
		// Now it holds on all five: two may lose it and it still extends; three may not.
		for _, s := range servers[:2] {
			_, err = s.do("DEL", l.Keys.Lock)
			require.NoError(t, err)
		}
		_, err = c.Extend(ctx, h)
		require.NoError(t, err, "three of five still held it")
		_, err = servers[2].do("DEL", l.Keys.Lock)
		require.NoError(t, err)
		_, err = c.Extend(ctx, h)
		require.ErrorIs(t, err, core.ErrNotHeld, "nodes that lost the lock counted as holding it")

		// After the validity, nodes that never held it no longer count.
		_, h = acquire("late")
		time.Sleep(time.Until(h.Until) + time.Millisecond) // the granted keys have not expired yet
		_, err = c.Extend(ctx, h)
		require.NoError(t, err, "the three granting nodes extend it")
		_, h = acquire("later")
		_, err = servers[0].do("DEL", lock("later").Keys.Lock)
		require.NoError(t, err)
		time.Sleep(time.Until(h.Until) + time.Millisecond)
		_, err = c.Extend(ctx, h)
		require.ErrorIs(t, err, core.ErrNotHeld, "nodes that took the lock after the validity counted")
	})
}

// TestExtendCountsALateGrant: a node whose grant came after the acquisition returned (a
// straggler's) holds the lock for its owner once that reply is read, as a node that granted
// in time does: when the lock is lost there and on another node, Extend says so (ErrNotHeld)
// rather than take the free key again on the straggler.
func TestExtendCountsALateGrant(t *testing.T) {
	bubble(t, func(t *testing.T) {
		servers := simServers(t, 3)
		nodes := make([]core.Node, len(servers))
		for i, s := range servers {
			nodes[i] = nodeFor(t, s)
		}
		slow := nodeFor(t, servers[2])
		nodes[2] = slowAcquire{Node: slow, Subscriber: slow, delay: 10 * time.Millisecond}
		c, err := core.NewCluster(nodes)
		require.NoError(t, err)
		ctx := context.Background()
		first, err := c.Acquire(ctx, lock("first")) // identifies the nodes: it hears them all
		require.NoError(t, err)
		require.NoError(t, c.Release(ctx, first))

		l := lock("late")
		h, err := c.Acquire(ctx, l)
		require.NoError(t, err)
		synctest.Wait()
		exists := func(s server) any {
			v, err := s.do("EXISTS", l.Keys.Lock)
			require.NoError(t, err)
			return v
		}
		require.Equal(t, int64(0), exists(servers[2]), "the test needs the third node's grant to come after the acquisition returned")
		advance(10 * time.Millisecond)
		v, err := servers[2].do("GET", l.Keys.Lock)
		require.NoError(t, err)
		require.Equal(t, h.Token(), v, "the third node did not grant late")

		for _, s := range servers[1:] { // lost on two nodes, one of them the straggler
			_, err := s.do("DEL", l.Keys.Lock)
			require.NoError(t, err)
		}
		_, err = c.Extend(ctx, h)
		require.ErrorIs(t, err, core.ErrNotHeld, "a node that granted late was taken again as one that never held the lock")
		synctest.Wait()
		assert.Equal(t, int64(0), exists(servers[2]), "the extension took the lost lock again on the straggler")
	})
}
