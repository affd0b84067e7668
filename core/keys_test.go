package core_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
)

// lockNames are the names the key tests try: those whose "{<name>}" would have an empty or
// cut-short hash tag, unicode, binary bytes, and plain ones.
var lockNames = []string{
	"}x", "{", "}{", "a{b}c", "{}", "}", "{}}", "}}", "{{", "x}", "}{x}", "}{0123456789abcdef}{}x",
	"ünïcødé ключ 锁 🔒", "\x00\xff}\x01{", "\xff\xfe", "jobs:nightly", "a",
}

// keyPrefixes are the prefixes they are tried under: the default, none, and prefixes with
// braces that CheckPrefix accepts.
var keyPrefixes = []string{"redlock:", "", "app}:", "{app}:", "x{", "a{b", "}", "a{b}{}", "ü{"}

// allKeys returns every key and channel of k, with the wake channels of two waiters.
func allKeys(k core.Keys) []string {
	return []string{k.Lock, k.Fence, k.Queue, k.Alive, k.Waiters, k.Readers, k.Leader, k.Channel, k.Wake("w1"), k.Wake(core.NewToken())}
}

// oneTag reports an error unless every key and channel of k has the same non-empty hash tag,
// and so the same Redis Cluster slot.
func oneTag(k core.Keys) error {
	keys := allKeys(k)
	tag := redistest.HashTag(keys[0])
	for _, key := range keys {
		if got := redistest.HashTag(key); got == key || got != tag {
			return fmt.Errorf("%q has hash tag %q (slot %d), %q has %q (slot %d)", keys[0], tag, redistest.KeySlot(keys[0]), key, got, redistest.KeySlot(key))
		}
	}
	return nil
}

// TestKeysShareOneSlotForEveryName: every name's keys and wake channels share one hash tag,
// hence one slot, under every prefix that CheckPrefix accepts.
func TestKeysShareOneSlotForEveryName(t *testing.T) {
	for _, prefix := range keyPrefixes {
		if err := core.CheckPrefix(prefix); err != nil {
			t.Fatalf("CheckPrefix(%q) = %v, want nil", prefix, err)
		}
		for _, name := range lockNames {
			if err := oneTag(core.NewKeys(prefix, name)); err != nil {
				t.Errorf("NewKeys(%q, %q): %v", prefix, name, err)
			}
		}
	}
}

// TestKeysKeepTheirFormat: a name whose normal form has a hash tag keeps "<prefix>{<name>}",
// so that releases that used it exclude each other; a name that starts with '}', under a
// prefix without '{', takes "<prefix>}{<16 hex digits>}{<name>}".
func TestKeysKeepTheirFormat(t *testing.T) {
	k := core.NewKeys("redlock:", "jobs:nightly")
	want := []string{"redlock:{jobs:nightly}", "redlock:{jobs:nightly}:fence", "redlock:{jobs:nightly}:queue",
		"redlock:{jobs:nightly}:alive", "redlock:{jobs:nightly}:waiters", "redlock:{jobs:nightly}:readers",
		"redlock:{jobs:nightly}:leader", "redlock:{jobs:nightly}:released", "redlock:{jobs:nightly}:released:w1"}
	if got := allKeys(k)[:9]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("NewKeys(redlock:, jobs:nightly) = %q, want %q", got, want)
	}
	for _, prefix := range keyPrefixes {
		for _, name := range lockNames {
			got := core.NewKeys(prefix, name).Lock
			normal := prefix + "{" + name + "}"
			if !strings.HasPrefix(name, "}") || strings.Contains(prefix, "{") {
				if got != normal {
					t.Errorf("NewKeys(%q, %q).Lock = %q, want %q", prefix, name, got, normal)
				}
				continue
			}
			tag, rest, ok := strings.Cut(strings.TrimPrefix(got, prefix+"}{"), "}")
			if !strings.HasPrefix(got, prefix+"}{") || !ok || len(tag) != 16 || strings.Trim(tag, "0123456789abcdef") != "" || rest != "{"+name+"}" {
				t.Errorf("NewKeys(%q, %q).Lock = %q, want %q", prefix, name, got, prefix+"}{<16 hex digits>}{"+name+"}")
			}
		}
	}
}

// TestKeysNeverShared: under one prefix, two names never share a key or a channel: every
// name of up to 4 bytes of '{', '}', 'a' and ':' (and the test names), under every prefix of
// up to 3 bytes of '{', '}' and 'a' that CheckPrefix accepts.
func TestKeysNeverShared(t *testing.T) {
	names := append(strings4("{}a:"), lockNames...)
	prefixes := 0
	for _, prefix := range append(strings3("{}a"), keyPrefixes...) {
		if core.CheckPrefix(prefix) != nil {
			continue
		}
		prefixes++
		owner := map[string]string{}
		for _, name := range names {
			k := core.NewKeys(prefix, name)
			if err := oneTag(k); err != nil {
				t.Errorf("NewKeys(%q, %q): %v", prefix, name, err)
			}
			for _, key := range allKeys(k)[:7] { // the random waiter's channel cannot collide
				if other, ok := owner[key]; ok && other != name {
					t.Fatalf("under prefix %q, names %q and %q share %q", prefix, other, name, key)
				}
				owner[key] = name
			}
		}
	}
	t.Logf("%d names under each of %d prefixes", len(names), prefixes)
}

// TestCheckPrefix: a prefix whose first '{' is followed at once by '}' is refused with
// ErrInvalid: under it, the keys of a lock fall in different slots whatever its name. Every
// other prefix is accepted (and TestKeysNeverShared shows its keys share one tag).
func TestCheckPrefix(t *testing.T) {
	for _, prefix := range []string{"{}", "a{}", "redlock:{}:", "}{}", "a{}{b}", "{}}"} {
		err := core.CheckPrefix(prefix)
		if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), "hash tag") {
			t.Errorf("CheckPrefix(%q) = %v, want an error matching ErrInvalid that says why", prefix, err)
		}
		for _, name := range lockNames {
			if oneTag(core.NewKeys(prefix, name)) == nil {
				t.Errorf("NewKeys(%q, %q) has one hash tag: CheckPrefix refuses a prefix that works", prefix, name)
			}
		}
	}
	for _, prefix := range append(keyPrefixes, "a{b}{}", "{ }", "{{}") {
		if err := core.CheckPrefix(prefix); err != nil {
			t.Errorf("CheckPrefix(%q) = %v, want nil", prefix, err)
		}
	}
}

// strings3 returns every string of up to 3 bytes of alphabet, strings4 of up to 4.
func strings3(alphabet string) []string { return upTo(alphabet, 3) }
func strings4(alphabet string) []string { return upTo(alphabet, 4) }

func upTo(alphabet string, n int) []string {
	all := []string{""}
	last := []string{""}
	for range n {
		var next []string
		for _, s := range last {
			for _, c := range alphabet {
				next = append(next, s+string(c))
			}
		}
		all, last = append(all, next...), next
	}
	return all
}
