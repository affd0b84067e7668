package core_test

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockKey matches a lock key of NewKeys and NewSemaphoreKeys: a name's lock key ends with its
// name's last '}', a permit's with ":permit/<i>"; every other key of a name ends with a
// suffix of its own (":fence", ":queue", ...).
var lockKey = regexp.MustCompile(`(\}|:permit/[0-9]+)$`)

// TestLockKeyPattern: lockKey tells the lock keys from the other keys of a name.
func TestLockKeyPattern(t *testing.T) {
	k, sem := core.NewKeys("q:", "x"), core.NewSemaphoreKeys("q:", "x", 2)
	for _, key := range append([]string{k.Lock}, sem.Permits...) {
		assert.True(t, lockKey.MatchString(key), key)
	}
	for _, key := range []string{k.Fence, k.Queue, k.Alive, k.Waiters, k.Readers, k.Leader, sem.Queue, sem.Readers, sem.Fence} {
		assert.False(t, lockKey.MatchString(key), key)
	}
}

// TestOnlyThreeScriptsWriteALockKey: over simulated servers that refuse a key a script did not
// declare in KEYS and record which script wrote which key, every kind of holding (a writer's
// lock, a fenced one, a reader's share, a semaphore's permit, a set of names), taken, waited
// for, extended, raised, proclaimed, read and released, writes lock keys only through
// acquire, extend and release: the queue only refuses and wakes.
func TestOnlyThreeScriptsWriteALockKey(t *testing.T) {
	inBubble(t, 3, func(t *testing.T, servers []server) {
		for _, s := range servers { // strict about KEYS, as every simulated server here
			s.sim.RecordWriters(core.Scripts()...)
		}
		cl := newCluster(t, servers)
		ctx := context.Background()
		patient := core.Backoff{Min: time.Millisecond, Max: 10 * time.Millisecond}
		fenced := lockOn(servers, "w")
		fenced.Fence = true
		set := setLock(t, servers, "w", "s")
		for _, l := range []*core.Lock{lockOn(servers, "w"), fenced, readLockOn(servers, "w"), semLock("sem", 2), set} {
			holder, err := cl.Acquire(ctx, l)
			require.NoError(t, err, l.Keys.Name)
			var wg sync.WaitGroup
			wg.Go(func() { // a waiter, woken by the release
				h, err := cl.AcquireWait(ctx, lockOn(servers, "w"), patient)
				if assert.NoError(t, err, l.Keys.Name) {
					assert.NoError(t, cl.Release(ctx, h))
				}
			})
			time.Sleep(50 * time.Millisecond)
			_, err = cl.Extend(ctx, holder)
			require.NoError(t, err, l.Keys.Name)
			if l.Fence {
				require.NoError(t, cl.Raise(ctx, holder, holder.Fence+1), l.Keys.Name)
			}
			if !l.Read && l.Keys.Permits == nil && l.Keys.Set == nil {
				require.NoError(t, cl.Proclaim(ctx, holder, "me"))
				_, _, _, err = cl.Leader(ctx, l.Keys, l.NodeTimeout)
				require.NoError(t, err)
			}
			require.NoError(t, cl.Release(ctx, holder), l.Keys.Name)
			wg.Wait()
		}
		for _, name := range []string{"w", "s", "sem"} {
			_, err := cl.Status(ctx, "q:", name, time.Second)
			require.NoError(t, err)
		}
		writers := map[string]bool{}
		for _, s := range servers {
			for key, scripts := range s.sim.Writers() {
				if !lockKey.MatchString(key) {
					continue
				}
				for _, name := range scripts {
					writers[name] = true
					assert.Contains(t, []string{"acquire", "extend", "release"}, name, "%s wrote the lock key %s", name, key)
				}
			}
		}
		assert.Equal(t, []string{"acquire", "extend", "release"}, slices.Sorted(maps.Keys(writers)), "the writers of lock keys")
	})
}
