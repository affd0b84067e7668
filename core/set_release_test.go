package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSetReleaseHandsOnEachName: a set's release hands each of its names to the waiter
// queued on that name alone, in the same call (the name is never free in between), and
// deletes the names no one waits for; the set's acquisition takes every name at once
// whether fenced or not (unfenced without the restart guard, the acquire script's first
// case, before its prelude).
func TestSetReleaseHandsOnEachName(t *testing.T) {
	onOneOfEach(t, func(t *testing.T, s server) {
		servers := []server{s}
		cl := newCluster(t, servers)
		ctx := context.Background()
		for _, fenced := range []bool{false, true} {
			k, err := core.NewSetKeys("q:", []string{"a", "b"})
			require.NoError(t, err)
			l := lockOn(servers, "a")
			l.Keys, l.Fence = k, fenced
			set, err := cl.Acquire(ctx, l)
			require.NoError(t, err, "fenced %v", fenced)
			assert.Equal(t, fenced, set.Fence > 0, "fenced %v: the set's token", fenced)
			for _, name := range []string{"a", "b"} {
				assert.Equal(t, set.Token(), get(t, s, core.NewKeys("q:", name).Lock), "fenced %v: %s", fenced, name)
			}

			w := lockOn(servers, "b")
			w.Fence = true // the acquire script, so that it queues
			got := make(chan *core.Held, 1)
			go func() {
				h, err := cl.AcquireWait(ctx, w, patient)
				if assert.NoError(t, err) {
					got <- h
				}
			}()
			require.Eventually(t, func() bool { return allEqual(queued(t, servers, w.Keys), 1) },
				generous, time.Millisecond, "the waiter for b did not queue")

			require.NoError(t, cl.Release(ctx, set))
			assert.Equal(t, "", get(t, s, core.NewKeys("q:", "a").Lock), "fenced %v: a, which no one waits for, was not freed", fenced)
			assert.NotEqual(t, "", get(t, s, w.Keys.Lock), "fenced %v: b was left free, not handed to its waiter", fenced)
			var h *core.Held
			select {
			case h = <-got:
			case <-time.After(generous):
				t.Fatalf("fenced %v: the waiter for b was not given it", fenced)
			}
			assert.Equal(t, h.Token(), get(t, s, w.Keys.Lock), "fenced %v: b", fenced)
			require.NoError(t, cl.Release(ctx, h))
		}
	})
}
