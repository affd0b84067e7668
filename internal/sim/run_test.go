package sim

import (
	"slices"
	"testing"
	"testing/synctest"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunRecordsWriters runs a fault-free Mutex workload and reads its record of writers:
// the lock key was written by acquire and release, every writer is one of core's scripts,
// named, and the map returned is the caller's.
func TestRunRecordsWriters(t *testing.T) {
	var res Result
	synctest.Test(t, func(t *testing.T) {
		res = Run(Config{Seed: 1, Kind: None, Workload: wMutex, N: 3})
	})
	require.Empty(t, res.Violations)
	require.NotZero(t, res.Grants)
	w := res.Writers()
	lock := core.NewKeys("redlock:", lockName).Lock
	assert.Subset(t, w[lock], []string{"acquire", "release"}, "the writers of %s", lock)
	var names []string
	for _, s := range core.Scripts() {
		names = append(names, s.Name())
	}
	for key, scripts := range w {
		require.NotEmpty(t, scripts, key)
		assert.True(t, slices.IsSorted(scripts), "%s: %v", key, scripts)
		for _, s := range scripts {
			assert.Contains(t, names, s, "a writer of %s", key)
		}
	}
	require.Contains(t, w, lock+":queue")
	first := w[lock][0]
	w[lock][0] = "changed"
	delete(w, lock+":queue")
	again := res.Writers()
	assert.Equal(t, first, again[lock][0], "the map returned is the caller's")
	assert.Contains(t, again, lock+":queue", "the map returned is the caller's")
}
