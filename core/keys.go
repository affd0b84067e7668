package core

import (
	"crypto/rand"
	"encoding/base64"
)

// Keys are the Redis names one lock uses. The lock name sits in braces, so on Redis Cluster
// the lock key and the fence key hash to one slot and one script can touch both.
type Keys struct {
	Lock    string // holds the owner's random token, with the lock's TTL
	Fence   string // the fencing counter; it has no TTL, so it outlives every holder
	Channel string // release notifications are published here
}

// NewKeys returns the keys of the lock called name: "<prefix>{<name>}", then ":fence" and
// ":released" after it.
func NewKeys(prefix, name string) Keys {
	base := prefix + "{" + name + "}"
	return Keys{Lock: base, Fence: base + ":fence", Channel: base + ":released"}
}

// NewToken returns a fresh random owner token: 16 bytes from crypto/rand, base64url-encoded.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error since Go 1.24
	return base64.RawURLEncoding.EncodeToString(b[:])
}
