package redlock_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clusterNode passes for a Redis Cluster client (ShardedPubSub), so that a set whose names
// fall in several slots is taken slot by slot, over a server that is not one: it sends
// PUBLISH for SPUBLISH. An acquisition of the lock key gate, if set, waits until its
// context ends, after it says so on arrived.
type clusterNode struct {
	redlock.Node
	gate    string
	arrived chan<- struct{}
}

func (n clusterNode) ShardedPubSub() bool { return true }

func (n clusterNode) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if s.Name() == "acquire" && n.gate != "" && len(keys) > 0 && keys[0] == n.gate {
		n.arrived <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if i := slices.Index(args, "SPUBLISH"); i >= 0 {
		args = slices.Clone(args)
		args[i] = "PUBLISH"
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestAcquireAllSlotBySlotPartLost: a TryAcquireAll over names in two slots whose first
// slot's names are lost (their keys deleted) while it takes the second fails with an
// error that names the lock, and holds nothing.
func TestAcquireAllSlotBySlotPartLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t.Cleanup(func() { time.Sleep(time.Minute) })
		sims, servers := simNodes(t, 3)
		arrived := make(chan struct{}, len(sims))
		nodes := make([]redlock.Node, len(sims))
		for i, n := range sims { // "b" comes first in slot order, then "a"
			nodes[i] = clusterNode{Node: n, gate: lockKey("a"), arrived: arrived}
		}
		client := newClient(t, nodes, redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(2*time.Second))
		t.Cleanup(func() { _ = client.Close() })

		done := make(chan error, 1)
		go func() {
			_, err := client.TryAcquireAll(context.Background(), []string{"a", "b"})
			done <- err
		}()
		for range nodes {
			<-arrived // "b" is held, and "a" is being asked for
		}
		for _, s := range servers {
			require.True(t, s.Miniredis().Exists(lockKey("b")))
			s.Miniredis().Del(lockKey("b"))
		}
		err := <-done // the extension of "b" finds it gone
		require.Error(t, err)
		assert.True(t, strings.Contains(err.Error(), `"[a b]"`), "the error does not name the lock: %v", err)
		synctest.Wait()
		for i, s := range servers {
			for _, name := range []string{"a", "b"} {
				assert.False(t, s.Miniredis().Exists(lockKey(name)), "node %d holds %s", i, name)
			}
		}
	})
}
