package core_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lateExtends is a Node whose extend scripts (extensions and raises) reach the server late
// by d, and everything else at once: a release overtakes them.
type lateExtends struct {
	core.Node
	d time.Duration
}

func (n lateExtends) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if s.Name() == "extend" {
		time.Sleep(n.d)
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestReleaseFollowsLateExtensions: an extension (or a raise) may take the lock where its key
// is free, so a release waits for the extension's calls that had not answered: else a late
// one would land after the release and leave the key held for a TTL. Here the third node
// never held the lock, and its extend calls arrive after the release's.
func TestReleaseFollowsLateExtensions(t *testing.T) {
	bubble(t, func(t *testing.T) {
		servers := simServers(t, 3)
		nodes := []core.Node{nodeFor(t, servers[0]), nodeFor(t, servers[1]), lateExtends{nodeFor(t, servers[2]), 50 * time.Millisecond}}
		c, err := core.NewCluster(nodes)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		ctx := context.Background()
		for _, fenced := range []bool{false, true} { // fenced: the raise too, where the counters disagree
			l, h := heldButByThird(t, c, servers, "late-extension-"+strconv.FormatBool(fenced), fenced)
			_, err = c.Extend(ctx, h) // returns at the quorum of the first two nodes
			require.NoError(t, err)
			require.NoError(t, c.Release(ctx, h))
			freedAfterAllLanded(t, servers, l, fenced)
		}
	})
}

// slowerFirst is a Node whose extend scripts (extensions and raises) reach the server late,
// each by 30 ms less than the one before, from 80 ms (at least 10 ms), and everything else
// at once: of two extensions made one after the other, the first one's call lands last.
type slowerFirst struct {
	core.Node
	calls *atomic.Int64
}

func (n slowerFirst) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if s.Name() == "extend" {
		k := n.calls.Add(1) - 1
		time.Sleep(max(80*time.Millisecond-time.Duration(k)*30*time.Millisecond, 10*time.Millisecond))
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestReleaseFollowsEveryLateExtension: two extensions made within one node timeout, each
// returning at the quorum of the first two nodes while its call to the third, which never
// held the lock, is still under way; the first one's call lands last. The release must
// follow both calls, not only the last extension's: else the first one's lands after the
// release, takes the free key, and leaves the lock held for a TTL. Fenced, the grant's
// raise is a third extension under way there.
func TestReleaseFollowsEveryLateExtension(t *testing.T) {
	bubble(t, func(t *testing.T) {
		servers := simServers(t, 3)
		slow := slowerFirst{nodeFor(t, servers[2]), new(atomic.Int64)}
		c, err := core.NewCluster([]core.Node{nodeFor(t, servers[0]), nodeFor(t, servers[1]), slow})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		ctx := context.Background()
		for _, fenced := range []bool{false, true} {
			l, h := heldButByThird(t, c, servers, "late-extensions-"+strconv.FormatBool(fenced), fenced)
			slow.calls.Store(0) // the grant's raise, if any, is already under way
			start := time.Now()
			for range 2 { // each returns at the quorum of the first two nodes
				_, err = c.Extend(ctx, h)
				require.NoError(t, err)
			}
			require.Less(t, time.Since(start), l.NodeTimeout, "the extensions were not made within one node timeout")
			require.NoError(t, c.Release(ctx, h))
			freedAfterAllLanded(t, servers, l, fenced)
		}
	})
}

// heldButByThird acquires a lock of name on c (TTL 10 s) that the third of servers never
// held (another owner held it there during the acquisition; the key is free there now).
func heldButByThird(t *testing.T, c *core.Cluster, servers []server, name string, fenced bool) (*core.Lock, *core.Held) {
	t.Helper()
	l := lock(name)
	l.TTL, l.Fence = 10*time.Second, fenced
	_, err := servers[2].do("SET", l.Keys.Lock, "another", "PX", "60000")
	require.NoError(t, err)
	h, err := c.Acquire(context.Background(), l)
	require.NoError(t, err)
	synctest.Wait()
	_, err = servers[2].do("DEL", l.Keys.Lock)
	require.NoError(t, err)
	return l, h
}

// freedAfterAllLanded checks, once every call has landed, that no server holds l.
func freedAfterAllLanded(t *testing.T, servers []server, l *core.Lock, fenced bool) {
	t.Helper()
	synctest.Wait()
	time.Sleep(time.Second)
	for i, s := range servers {
		v, err := s.do("GET", l.Keys.Lock)
		if err != nil {
			require.ErrorIs(t, err, redis.Nil)
		}
		assert.Nil(t, v, "node %d still holds the released lock (fenced: %v)", i, fenced)
	}
}
