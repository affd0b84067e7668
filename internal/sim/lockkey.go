package sim

import "strings"

// IsLockKey reports whether key, one of the library's keys (core.NewKeys,
// core.NewSemaphoreKeys), is a lock key: one that holds an owner's token, which only the
// scripts that take, extend and release a lock may write. A semaphore's permit
// ("<lock key>:permit/<i>") is one. The others end, after the last '}' of the key (which
// closes its name), in one of ":fence", ":queue", ":alive", ":waiters", ":readers" and
// ":leader", or ":permits" (a semaphore's record of its number of permits), or in
// ":permit" and one of the first six (a semaphore's queue, fence, ...). Any other key is a
// lock key: one of a kind that IsLockKey does not know counts as one, so that a script
// that writes it is noticed.
func IsLockKey(key string) bool {
	suffix := key[strings.LastIndexByte(key, '}')+1:]
	if suffix == ":permits" {
		return false
	}
	if rest, ok := strings.CutPrefix(suffix, ":permit"); ok && strings.HasPrefix(rest, ":") {
		suffix = rest
	}
	switch suffix {
	case ":fence", ":queue", ":alive", ":waiters", ":readers", ":leader":
		return false
	}
	return true
}
