package core

import (
	"crypto/rand"
	"encoding/base64"
)

// Keys are the Redis names one lock uses. The lock name sits in braces, so on Redis Cluster
// all of them hash to one slot and one script can touch them together.
type Keys struct {
	Lock    string // holds the owner's random token, with the lock's TTL
	Fence   string // the fencing counter; it has no TTL, so it outlives every holder
	Queue   string // the waiters in turn order: a sorted set of waiter ids by ticket
	Alive   string // when each waiter's place lapses: a sorted set of waiter ids by deadline
	Waiters string // each waiter's latest attempt, for a release to hand it the lock: a hash
	Channel string // a waiter is woken on Channel + ":" + its waiter id (see Wake)

	// The scripts' KEYS, made once by NewKeys and shared by every call (nil in Keys made
	// otherwise): see AcquireKeys and ReleaseKeys.
	acquire, release []string
}

// NewKeys returns the keys of the lock called name: "<prefix>{<name>}", then ":fence",
// ":queue", ":alive", ":waiters" and ":released" after it.
func NewKeys(prefix, name string) Keys {
	base := prefix + "{" + name + "}"
	k := Keys{Lock: base, Fence: base + ":fence", Queue: base + ":queue", Alive: base + ":alive", Waiters: base + ":waiters",
		Channel: base + ":released"}
	k.acquire, k.release = k.AcquireKeys(), k.ReleaseKeys()
	return k
}

// Wake returns the channel on which the waiter with id waiter is told that a release handed
// it the lock, or that its turn may have come.
func (k Keys) Wake(waiter string) string { return k.Channel + ":" + waiter }

// NewToken returns a fresh random owner token: 16 bytes from crypto/rand, base64url-encoded.
func NewToken() string {
	token, _ := newWaiter()
	return token
}

// newWaiter returns a fresh waiter id (a token, as NewToken's) and its first attempt's
// token, "<waiter id>.1", made in one allocation.
func newWaiter() (waiter, first string) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error since Go 1.24
	const n = 22           // base64 of 16 bytes, unpadded
	var buf [n + 2]byte
	base64.RawURLEncoding.Encode(buf[:n], b[:])
	buf[n], buf[n+1] = '.', '1'
	first = string(buf[:])
	return first[:n], first
}

// AcquireKeys returns the KEYS that core passes to the acquire script, in order: for
// backend tests (such as the conformance suite) that call the scripts as core does.
func (k Keys) AcquireKeys() []string { return []string{k.Lock, k.Fence, k.Queue, k.Alive, k.Waiters} }

// ReleaseKeys returns the KEYS that core passes to the release script, in order.
func (k Keys) ReleaseKeys() []string { return []string{k.Lock, k.Queue, k.Alive, k.Waiters, k.Fence} }

// acquireKeys and releaseKeys are AcquireKeys and ReleaseKeys without an allocation, for
// Keys from NewKeys whose fields were not changed since. Nodes only read them (see
// Node.Eval).
func (k Keys) acquireKeys() []string {
	if a := k.acquire; a != nil && a[0] == k.Lock && a[1] == k.Fence && a[2] == k.Queue && a[3] == k.Alive && a[4] == k.Waiters {
		return a
	}
	return k.AcquireKeys()
}

func (k Keys) releaseKeys() []string {
	if r := k.release; r != nil && r[0] == k.Lock && r[1] == k.Queue && r[2] == k.Alive && r[3] == k.Waiters && r[4] == k.Fence {
		return r
	}
	return k.ReleaseKeys()
}
