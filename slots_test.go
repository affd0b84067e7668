package redlock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/simnet"
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

// failingExtends is a Node whose extensions of the lock key key fail with a node error while
// fail is set; it records the time of each extension of key it sees.
type failingExtends struct {
	redlock.Node
	key   string
	fail  *atomic.Bool
	mu    *sync.Mutex
	times *[]time.Duration // since start
	start time.Time
}

func (n failingExtends) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if s.Name() == "extend" && len(keys) > 0 && keys[0] == n.key {
		n.mu.Lock()
		*n.times = append(*n.times, time.Since(n.start))
		n.mu.Unlock()
		if n.fail.Load() {
			return nil, errors.New("ERR injected: the extension failed")
		}
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestAcquireAllSlotBySlotNeverPastAPartsValidity: a Mutex over names in two slots ("b"
// first, then "a"), at a TTL of 1 s, takes "b" and waits for "a", which another Client
// holds; every extension of "b" fails with a node error. Its keeper tries again a node
// timeout after each failure (as a Lease does), and once "b"'s validity ran out the
// acquisition lets go of everything and starts over: when a third Client has taken "b" (at
// 1.2 s) and "a" is free (at 1.5 s), the Mutex is not locked while that Client holds "b";
// it is, once "b" is released. In a bubble, over simulated servers.
func TestAcquireAllSlotBySlotNeverPastAPartsValidity(t *testing.T) {
	bubble(t, func(t *testing.T) {
		start := time.Now()
		sims, servers := simNodes(t, 3)
		var fail atomic.Bool
		fail.Store(true)
		var mu sync.Mutex
		var times []time.Duration
		nodes := make([]redlock.Node, len(sims))
		for i, n := range sims {
			fe := failingExtends{Node: n, key: lockKey("b"), fail: &fail, mu: &mu, times: &times, start: start}
			if i > 0 {
				fe.times = new([]time.Duration) // node 0's are recorded
			}
			nodes[i] = clusterNode{Node: fe}
		}
		ctx := context.Background()
		holder := closingClient(t, simnet.Nodes(t, servers))
		taker := closingClient(t, simnet.Nodes(t, servers))
		a, err := holder.TryAcquire(ctx, "a", redlock.WithTTL(time.Minute))
		require.NoError(t, err)

		// Its retry backoff (2.5 to 5 s) keeps it from taking "b" again before the third Client.
		m := closingClient(t, nodes, redlock.WithTTL(time.Second), redlock.WithRetry(5*time.Second, 5*time.Second)).
			NewMutexAll([]string{"a", "b"})
		locked := make(chan error, 1)
		go func() { locked <- m.LockContext(ctx) }()
		synctest.Wait()
		for i, s := range servers {
			require.True(t, s.Miniredis().Exists(lockKey("b")), "node %d: the set does not hold b", i)
		}

		time.Sleep(time.Until(start.Add(1200 * time.Millisecond)))
		b, err := taker.TryAcquire(ctx, "b", redlock.WithTTL(time.Minute))
		require.NoError(t, err, "b was not free after its validity ran out")
		// The set's nodes give it no pub/sub: its waiter calls again every 250 ms (its refresh
		// interval), and finds "a" free at 1.5 s.
		time.Sleep(time.Until(start.Add(1400 * time.Millisecond)))
		require.NoError(t, a.Release(ctx))
		time.Sleep(time.Until(start.Add(1500 * time.Millisecond)))
		synctest.Wait()
		select {
		case err := <-locked:
			t.Fatalf("the Mutex was locked (error %v) at %v, while another Client holds b until %v", err, time.Since(start), b.Until().Sub(start))
		default:
		}
		mu.Lock()
		assert.Len(t, times, 4, "extension attempts of b before its validity ran out: %v", times)
		for i := 1; i < len(times); i++ {
			assert.Equal(t, 100*time.Millisecond, times[i]-times[i-1], "the keeper did not try again a node timeout after a failure: %v", times)
		}
		mu.Unlock()

		fail.Store(false)
		require.NoError(t, b.Release(ctx))
		require.NoError(t, <-locked)
		synctest.Wait() // it returned at a quorum: the third node follows
		for i, s := range servers {
			for _, name := range []string{"a", "b"} {
				assert.True(t, s.Miniredis().Exists(lockKey(name)), "node %d: the Mutex does not hold %s", i, name)
			}
		}
		require.NoError(t, m.UnlockContext(ctx))
	})
}

// TestAcquireAllSlotBySlotExtendsADuePartFirst: a Mutex over names in two slots ("b", then
// "a"), at a TTL of 1 s, holds "b" while it waits for "a"; the keeper's extension of "b" at
// a third of its validity left (0.66 s) fails. When the Mutex takes "a" (at 0.75 s, before
// the keeper tries again), it extends "b" before it is locked: with more than a third of
// the validity left on every name; if that extension fails too, it lets go of both and
// starts over. (A Mutex takes no token: no raise extends "b" on the way.) In a bubble, over
// simulated servers (the Mutex's nodes give it no pub/sub: its waiter calls again every
// 250 ms, its refresh interval).
func TestAcquireAllSlotBySlotExtendsADuePartFirst(t *testing.T) {
	for _, recovers := range []bool{true, false} {
		t.Run(map[bool]string{true: "extended", false: "starts over"}[recovers], func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				start := time.Now()
				sims, servers := simNodes(t, 3)
				var fail atomic.Bool
				fail.Store(true)
				var mu sync.Mutex
				nodes := make([]redlock.Node, len(sims))
				for i, n := range sims {
					nodes[i] = clusterNode{Node: failingExtends{Node: n, key: lockKey("b"), fail: &fail, mu: &mu, times: new([]time.Duration), start: start}}
				}
				ctx := context.Background()
				holder := closingClient(t, simnet.Nodes(t, servers))
				a, err := holder.TryAcquire(ctx, "a", redlock.WithTTL(time.Minute))
				require.NoError(t, err)
				m := closingClient(t, nodes, redlock.WithTTL(time.Second), redlock.WithRetry(5*time.Second, 5*time.Second)).
					NewMutexAll([]string{"a", "b"})
				locked := make(chan error, 1)
				go func() { locked <- m.LockContext(ctx) }()

				time.Sleep(time.Until(start.Add(700 * time.Millisecond)))
				fail.Store(!recovers)
				require.NoError(t, a.Release(ctx))
				time.Sleep(time.Until(start.Add(750 * time.Millisecond)))
				synctest.Wait()
				ttls := func(name string) (ttls []time.Duration) {
					for _, s := range servers {
						ttls = append(ttls, s.Miniredis().TTL(lockKey(name)))
					}
					return ttls
				}
				if recovers {
					select {
					case err := <-locked:
						require.NoError(t, err)
					default:
						t.Fatal("the Mutex was not locked once both names were free")
					}
					for _, name := range []string{"a", "b"} {
						for i, ttl := range ttls(name) {
							assert.Equal(t, time.Second, ttl, "node %d: %s was not extended before the Mutex was locked", i, name)
						}
					}
					require.NoError(t, m.UnlockContext(ctx))
					return
				}
				select {
				case err := <-locked:
					t.Fatalf("the Mutex was locked (error %v) though b's last extension failed, with %v left of b", err, ttls("b"))
				default:
				}
				for i, s := range servers {
					for _, name := range []string{"a", "b"} {
						assert.False(t, s.Miniredis().Exists(lockKey(name)), "node %d: %s is held after the Mutex started over", i, name)
					}
				}
				fail.Store(false)
				require.NoError(t, <-locked) // after the backoff
				took := time.Since(start)    // the backoff is jittered in its upper half
				assert.True(t, took >= 3250*time.Millisecond && took <= 5750*time.Millisecond, "the Mutex did not start over after its backoff: %v", took)
				require.NoError(t, m.UnlockContext(ctx))
			})
		})
	}
}
