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
			l := lock("late-extensions-" + strconv.FormatBool(fenced))
			l.TTL, l.Fence = 10*time.Second, fenced
			_, err := servers[2].do("SET", l.Keys.Lock, "another", "PX", "60000")
			require.NoError(t, err)
			h, err := c.Acquire(ctx, l)
			require.NoError(t, err)
			synctest.Wait()
			_, err = servers[2].do("DEL", l.Keys.Lock)
			require.NoError(t, err)
			slow.calls.Store(0) // the grant's raise, if any, is already under way
			start := time.Now()
			for range 2 { // each returns at the quorum of the first two nodes
				_, err = c.Extend(ctx, h)
				require.NoError(t, err)
			}
			require.Less(t, time.Since(start), l.NodeTimeout, "the extensions were not made within one node timeout")
			require.NoError(t, c.Release(ctx, h))
			synctest.Wait()
			time.Sleep(time.Second) // every call has landed
			for i, s := range servers {
				v, err := s.do("GET", l.Keys.Lock)
				if err != nil {
					require.ErrorIs(t, err, redis.Nil)
				}
				assert.Nil(t, v, "node %d still holds the released lock (fenced: %v)", i, fenced)
			}
		}
	})
}
