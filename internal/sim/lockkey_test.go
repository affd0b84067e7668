package sim

import (
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
)

// TestIsLockKey classifies the keys that core makes for locks and semaphores of names
// that look like suffixes, hold braces, or are empty, under prefixes with and without a
// hash tag, and keys given literally.
func TestIsLockKey(t *testing.T) {
	names := []string{"job", "", "a:fence", "}x:queue", "a}b:readers", "x{y}:leader", "n:permit/1", "n:permits", ":permit:alive"}
	for _, prefix := range []string{"redlock:", "app{tag}:", "p:fence}"} {
		for _, name := range names {
			k := core.NewKeys(prefix, name)
			for _, tc := range []struct {
				key  string
				lock bool
			}{
				{k.Lock, true}, {k.Fence, false}, {k.Queue, false}, {k.Alive, false},
				{k.Waiters, false}, {k.Readers, false}, {k.Leader, false},
			} {
				assert.Equal(t, tc.lock, IsLockKey(tc.key), "prefix %q, name %q: key %q", prefix, name, tc.key)
			}
			s := core.NewSemaphoreKeys(prefix, name, 3)
			for _, p := range s.Permits {
				assert.True(t, IsLockKey(p), "prefix %q, name %q: permit %q", prefix, name, p)
			}
			for _, other := range []string{s.Fence, s.Queue, s.Alive, s.Waiters, s.Readers, s.Leader} {
				assert.False(t, IsLockKey(other), "prefix %q, name %q: semaphore key %q", prefix, name, other)
			}
		}
	}
	for _, tc := range []struct {
		key  string
		lock bool
	}{
		{"redlock:{job}", true},
		{"redlock:{job}:permit/0", true},
		{"redlock:{job}:permit/12", true},
		{"redlock:{job}:fence", false},
		{"redlock:{job}:permit:fence", false},
		{"redlock:{job}:permits", false},
		{"redlock:{job}:permit:permits", true}, // no such key: a kind IsLockKey does not know
		{"redlock:{job}:released", true},       // a channel's name, which no script should write
		{"redlock:{job}:new", true},
		{"redlock:{job}:fences", true},
		{"redlock:{job}:leader:x", true},
		{"plain", true},
		{"plain:fence", true}, // no '}': not the library's, the whole key is its suffix
	} {
		assert.Equal(t, tc.lock, IsLockKey(tc.key), "key %q", tc.key)
	}
}
