package core_test

import (
	"context"
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSetReleaseWakesOnEachName: a set's release frees each of its names and wakes the
// waiter queued on that name alone, which then takes it; the set's acquisition takes every
// name at once
// whether fenced or not (unfenced without the restart guard, the acquire script's first
// case, before its prelude).
func TestSetReleaseWakesOnEachName(t *testing.T) {
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
			// A waiter of its own each round: one that left is refused for 10 s.
			id := map[bool]string{false: "u", true: "f"}[fenced]
			_, err = cl.AcquireAs(ctx, w, id+".1", id, 1)
			require.ErrorIs(t, err, core.ErrHeld, "fenced %v", fenced)
			require.Equal(t, []int64{1}, queued(t, servers, w.Keys), "fenced %v: the waiter for b did not queue", fenced)
			msgs := listen(t, s, w.Keys.Wake(id))

			require.NoError(t, cl.Release(ctx, set))
			for _, name := range []string{"a", "b"} {
				assert.Equal(t, "", get(t, s, core.NewKeys("q:", name).Lock), "fenced %v: %s was not freed", fenced, name)
			}
			assert.Equal(t, "", next(t, servers, msgs), "fenced %v: the waiter for b was not woken", fenced)
			h, err := cl.AcquireAs(ctx, w, id+".2", id, 1)
			require.NoError(t, err, "fenced %v: the woken waiter could not take b", fenced)
			assert.Equal(t, h.Token(), get(t, s, w.Keys.Lock), "fenced %v: b", fenced)
			require.NoError(t, cl.Release(ctx, h))
		}
	})
}
