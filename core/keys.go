package core

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Keys are the Redis names one lock uses, all in one Redis Cluster slot. Make them with
// NewKeys, NewSemaphoreKeys or NewSetKeys, and do not change a field afterwards.
type Keys struct {
	Name    string // the lock's name as given to NewKeys: errors name the lock by it
	Lock    string // holds the owner's random token, with the lock's TTL
	Fence   string // the fencing counter; it outlives every holder by FenceIdle
	Queue   string // the waiters in turn order: a sorted set of waiter ids by ticket
	Alive   string // when each waiter's place lapses: a sorted set of waiter ids by deadline
	Waiters string // each waiter's latest attempt, for a release to hand it the lock: a hash
	Readers string // the readers that hold the lock: a sorted set of tokens by the end of their time
	Leader  string // an election's record of its leader: "<token> <value>" (see Proclaim)
	Channel string // a waiter is woken on Channel + ":" + its waiter id (see Wake)
	// Permits are a semaphore's permits, a lock key each; nil for a lock. A semaphore's
	// Readers key holds its record of len(Permits).
	Permits []string
	// Set are the keys of each name of a lock over several names; nil for a lock of one
	// name. A set's other fields are its first name's.
	Set []Keys

	scriptKeys *scriptKeys // the scripts' KEYS, shared by calls: never written; nil if not made here
}

type scriptKeys struct{ acquire, release []string }

// NewKeys returns the keys of the lock called name, with prefix before each. The lock key
// is normally
//
//	<prefix>{<name>}
//
// and the others follow it: ":fence", ":queue", ":alive", ":waiters", ":readers", ":leader",
// and the channel ":released". They share one Redis Cluster hash tag: the name up to its
// first '}', or one within the prefix. A name that would give an empty tag (one that is
// empty or starts with '}', under a prefix without '{') takes the form
//
//	<prefix>}{<tag>}{<name>}
//
// with tag the 16 lowercase hex digits of the first 8 bytes of the name's SHA-256. Two names
// never share a key under one prefix. CheckPrefix refuses a prefix that makes every tag
// empty.
func NewKeys(prefix, name string) Keys {
	var base string
	if !strings.Contains(prefix, "{") && (name == "" || name[0] == '}') {
		sum := sha256.Sum256([]byte(name))
		base = prefix + "}{" + hex.EncodeToString(sum[:8]) + "}{" + name + "}"
	} else {
		base = prefix + "{" + name + "}"
	}
	return keysAt(name, base)
}

// keysAt returns the keys of the lock called name whose lock key is base.
func keysAt(name, base string) Keys {
	k := Keys{Name: name, Lock: base, Fence: base + ":fence", Queue: base + ":queue", Alive: base + ":alive", Waiters: base + ":waiters",
		Readers: base + ":readers", Leader: base + ":leader", Channel: base + ":released"}
	keys := k.ScriptKeys()
	k.scriptKeys = &scriptKeys{acquire: keys, release: keys}
	return k
}

// named returns the name errors give the lock: its Name, else its lock key.
func (k *Keys) named() string {
	if k.Name != "" {
		return k.Name
	}
	return k.Lock
}

// CheckPrefix returns an error that matches ErrInvalid if prefix cannot prefix lock keys on
// Redis Cluster: its first '{' is followed at once by '}', which empties every hash tag. It
// returns nil for any other prefix.
func CheckPrefix(prefix string) error {
	if i := strings.IndexByte(prefix, '{'); i >= 0 && strings.HasPrefix(prefix[i+1:], "}") {
		return fmt.Errorf("%w: key prefix %q: its first '{' is followed at once by '}', which gives every lock key an empty Redis Cluster hash tag, so one lock's keys would fall in different slots", ErrInvalid, prefix)
	}
	return nil
}

// Wake returns the channel on which the waiter with id waiter is woken or handed the lock.
func (k Keys) Wake(waiter string) string { return k.Channel + ":" + waiter }

// NewToken returns a fresh random owner token: 16 bytes from crypto/rand, base64url-encoded.
func NewToken() string { return newToken("") }

// newToken returns a fresh owner token that carries description d (see the package doc,
// Tokens): NewToken's, after "<d>@" if d is not "", in one allocation. d must pass
// CheckDescription.
func newToken(d string) string {
	token, _ := newWaiter(d)
	return token
}

// newWaiter returns a fresh waiter id that carries description d, "<d>@<random>" (just
// "<random>" for d ""), the random part as NewToken's, and its first attempt's token,
// "<waiter id>.1", in one allocation. d must pass CheckDescription.
func newWaiter(d string) (waiter, first string) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error since Go 1.24
	const n = 22           // base64 of 16 bytes, unpadded
	var buf [MaxDescriptionLen + 1 + n + 2]byte
	at := 0
	if d != "" {
		at = copy(buf[:MaxDescriptionLen], d)
		buf[at] = '@'
		at++
	}
	base64.RawURLEncoding.Encode(buf[at:at+n], b[:])
	buf[at+n], buf[at+n+1] = '.', '1'
	first = string(buf[:at+n+2])
	return first[:at+n], first
}

// MaxDescriptionLen is the longest description of a holder (Lock.Description), in bytes.
const MaxDescriptionLen = 128

// CheckDescription returns an error that matches ErrInvalid if d cannot describe a holder
// (Lock.Description): it is longer than MaxDescriptionLen bytes, is not valid UTF-8, or
// has a character that is not printable, a space or an '@' (tokens carry it, and hold none
// of those: see the package doc, Tokens). It returns nil for "", no description.
func CheckDescription(d string) error {
	switch {
	case len(d) > MaxDescriptionLen:
		return fmt.Errorf("%w: a description of %d bytes: at most %d", ErrInvalid, len(d), MaxDescriptionLen)
	case !utf8.ValidString(d):
		return fmt.Errorf("%w: description %q is not valid UTF-8", ErrInvalid, d)
	}
	for _, r := range d {
		if r == ' ' || r == '@' || !unicode.IsPrint(r) {
			return fmt.Errorf("%w: description %q has %q: a description is printable, without spaces or '@'", ErrInvalid, d, r)
		}
	}
	return nil
}

// describedBy returns the description that token carries (see the package doc, Tokens):
// what comes before its first '@', or "" if it has none.
func describedBy(token string) string {
	d, _, ok := strings.Cut(token, "@")
	if !ok {
		return ""
	}
	return d
}

// NewSemaphoreKeys returns the keys of the semaphore called name with permits permits (at
// least 1). With L the lock key of NewKeys(prefix, name), permit i is the lock key
// "L:permit/<i>"; the queue, fence and channel follow "L:permit" as NewKeys's follow the
// lock key ("L:permit:queue", ...); the record of the number of permits, its Readers, is
// "L:permits". They share the hash tag of name's keys, and are none of any lock's: every
// key ends with its name's last '}' and then suffixes without '}', so a key tells its name,
// and no suffix of NewKeys starts with ":permit".
func NewSemaphoreKeys(prefix, name string, permits int) Keys {
	lock := NewKeys(prefix, name).Lock
	k := keysAt(name, lock+":permit")
	k.Readers = lock + ":permits"
	k.Permits = make([]string, permits)
	for i := range k.Permits {
		k.Permits[i] = k.Lock + "/" + strconv.Itoa(i)
	}
	k.Lock = k.Permits[0]
	k.scriptKeys = &scriptKeys{acquire: append(k.ScriptKeys(), k.Permits...), release: append(k.ScriptKeys(), k.Permits...)}
	return k
}

// NewSetKeys returns the keys of a lock over every one of names at once, each name's keys
// those of NewKeys(prefix, name): a holder of the set holds each name, so single-name locks
// and sets exclude each other. The names are sorted, and a name given twice counts once; no
// name is an error matching ErrInvalid. Its other fields are its first name's. On Redis
// Cluster the names must share one slot (a prefix with a hash tag).
func NewSetKeys(prefix string, names []string) (Keys, error) {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	if len(names) == 0 {
		return Keys{}, fmt.Errorf("%w: a lock over several names needs at least one name", ErrInvalid)
	}
	set := make([]Keys, len(names))
	sk := &scriptKeys{}
	for i, name := range names {
		set[i] = NewKeys(prefix, name)
		sk.acquire = append(sk.acquire, set[i].ScriptKeys()...)
	}
	sk.release = sk.acquire
	k := set[0]
	k.Name, k.Set, k.scriptKeys = "["+strings.Join(names, " ")+"]", set, sk
	return k, nil
}

// permit returns the keys of a semaphore's permit i, held: its Lock is the permit's key.
func (k Keys) permit(i int) Keys {
	k.Lock = k.Permits[i]
	sk := *k.scriptKeys
	sk.release = slices.Clone(sk.release)
	sk.release[0] = k.Lock
	k.scriptKeys = &sk
	return k
}

// ScriptKeys returns the KEYS that core passes to the acquire, release, rlock and runlock
// scripts (a semaphore's permits and a set's other names follow them), for backend tests.
func (k Keys) ScriptKeys() []string {
	return []string{k.Lock, k.Fence, k.Queue, k.Alive, k.Waiters, k.Readers}
}

// callKeys returns ScriptKeys for core's acquire calls, or its release calls (a held
// permit's first), shared where NewKeys made them: not to be written.
func (k *Keys) callKeys(release bool) []string {
	switch {
	case k.scriptKeys == nil:
		return k.ScriptKeys()
	case release:
		return k.scriptKeys.release
	}
	return k.scriptKeys.acquire
}

// extendKeys returns the KEYS of the extend script: a writer's, each name's lock key and
// fence counter; a reader's, each name's lock key and readers key; a semaphore's held
// permit, the permit, the fence counter and the record of K.
func (k Keys) extendKeys(read bool) []string {
	if k.Permits != nil {
		return []string{k.Lock, k.Fence, k.Readers}
	}
	set := k.Set
	if set == nil {
		set = []Keys{k}
	}
	keys := make([]string, 0, 2*len(set))
	for _, n := range set {
		if read {
			keys = append(keys, n.Lock, n.Readers)
		} else {
			keys = append(keys, n.Lock, n.Fence)
		}
	}
	return keys
}
