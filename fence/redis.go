package fence

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"

	"github.com/go-redlock/redlock/core"
)

var (
	//go:embed write.lua
	writeSource string
	//go:embed token.lua
	tokenSource string

	writeScript = core.NewScript("fence-write", writeSource)
	tokenScript = core.NewScript("fence-token", tokenSource)
)

// split is where a 20-digit token is cut in the scripts' replies: its first and last 10
// digits, each below 2^53.
const split = 10_000_000_000

// Redis writes records in one Redis server (or Redis Cluster) only under a fencing token
// that is not older than the highest the record has seen. Make one with NewRedis; it is
// safe for concurrent use, and keeps no state of its own between calls.
//
// A record is a hash at the key the caller names, with two fields: "value", the value last
// written, and "token", the token it was written with, as 20 zero-padded decimal digits.
// Read the value with your driver (HGET key value). Write nothing else to the key: a
// "token" field this package did not write makes Write fail with ErrCorrupt.
type Redis struct {
	node core.Node
	ttl  time.Duration
	px   string // ttl in milliseconds, for PEXPIRE
}

// NewRedis returns the guarded writes to the Redis server behind node, which any backend
// gives (goredis.New, redigo.New, rueidis.New, valkey.New: a redlock.Node). It may be a node
// of the lock or a server of its own; the records' keys are the caller's, so they must not
// collide with the lock's ("redlock:" keys). Every accepted write sets the record's TTL to
// ttl, which is required (no default) and must be at least a millisecond; it is rounded up
// to whole milliseconds (down within the last millisecond below the largest time.Duration,
// where rounding up would pass it). See the package documentation for how to choose it: longer than the
// lock's longest possible holding.
//
// Errors: one matching redlock.ErrInvalid if node is nil or ttl is below a millisecond.
func NewRedis(node core.Node, ttl time.Duration) (*Redis, error) {
	if isNil(node) {
		return nil, invalid("NewRedis: nil node")
	}
	if ttl < time.Millisecond {
		return nil, invalid("NewRedis: TTL %v is below 1ms: every record needs a TTL", ttl)
	}
	ms := ttl / time.Millisecond
	if ttl%time.Millisecond != 0 && ms < math.MaxInt64/time.Millisecond {
		ms++ // up, unless that passes the largest time.Duration
	}
	return &Redis{node: node, ttl: ms * time.Millisecond, px: strconv.FormatInt(int64(ms), 10)}, nil
}

// TTL returns the records' TTL, as NewRedis rounded it.
func (r *Redis) TTL() time.Duration {
	if r == nil {
		return 0
	}
	return r.ttl
}

// Write stores value in the record at key, with token, and sets the record's TTL, if token
// is not older than the highest token the record holds: in one script, one round trip. It
// returns nil when it wrote. Writing again with the same token is accepted, so a write that
// a driver sent twice (after a broken connection) does no harm.
//
// Errors: a *StaleError (matching ErrStale) if the record holds a higher token, which is
// left as it was, TTL included; one matching redlock.ErrInvalid if key is empty, token is 0
// (the zero Lease's: no lock), or r was not made by NewRedis; one matching ErrCorrupt if the
// record's token field is not one this package wrote; otherwise the node's error (a
// WRONGTYPE error if key holds another type than a hash, ctx's error, one matching
// redlock.ErrClosed if the driver client is closed). Every error names the key.
func (r *Redis) Write(ctx context.Context, key string, token uint64, value string) error {
	if err := r.check("Write", key, token); err != nil {
		return err
	}
	reply, err := r.node.Eval(ctx, writeScript, []string{key}, fmt.Sprintf("%020d", token), value, r.px)
	if err != nil {
		return fmt.Errorf("redlock: fence write %s on %s: %w", quoted(key), r.node, err)
	}
	switch {
	case len(reply) == 1 && reply[0] == 1:
		return nil
	case len(reply) == 1 && reply[0] == -1:
		return fmt.Errorf("%w: %s on %s", ErrCorrupt, quoted(key), r.node)
	case len(reply) == 3 && reply[0] == 0:
		highest, ok := join(reply[1], reply[2])
		if !ok {
			return fmt.Errorf("%w: %s on %s: a token above the largest uint64", ErrCorrupt, quoted(key), r.node)
		}
		return &StaleError{Resource: key, Token: token, Highest: highest}
	}
	return fmt.Errorf("redlock: fence write %s on %s: unexpected reply %v", quoted(key), r.node, reply)
}

// Token returns the highest token the record at key holds, or 0 if there is no record (it
// was never written, or it expired). It reads; it changes nothing.
//
// Errors: one matching redlock.ErrInvalid if key is empty or r was not made by NewRedis; one
// matching ErrCorrupt if the record's token field is not one this package wrote; otherwise
// the node's error. Every error names the key.
func (r *Redis) Token(ctx context.Context, key string) (uint64, error) {
	if err := r.check("Token", key, 1); err != nil {
		return 0, err
	}
	reply, err := r.node.Eval(ctx, tokenScript, []string{key})
	if err != nil {
		return 0, fmt.Errorf("redlock: fence token %s on %s: %w", quoted(key), r.node, err)
	}
	switch {
	case len(reply) == 0:
		return 0, nil
	case len(reply) == 1 && reply[0] == -1:
		return 0, fmt.Errorf("%w: %s on %s", ErrCorrupt, quoted(key), r.node)
	case len(reply) == 2:
		highest, ok := join(reply[0], reply[1])
		if !ok {
			return 0, fmt.Errorf("%w: %s on %s: a token above the largest uint64", ErrCorrupt, quoted(key), r.node)
		}
		return highest, nil
	}
	return 0, fmt.Errorf("redlock: fence token %s on %s: unexpected reply %v", quoted(key), r.node, reply)
}

// check validates a call's input.
func (r *Redis) check(op, key string, token uint64) error {
	switch {
	case r == nil || r.node == nil:
		return invalid("Redis.%s: a Redis made without NewRedis", op)
	case key == "":
		return invalid("Redis.%s: empty key", op)
	case token == 0:
		return invalid("Redis.%s %s: token 0 is the zero Lease's, which holds no lock", op, quoted(key))
	}
	return nil
}

// join rebuilds a token from the first and last 10 of its 20 digits; ok is false for 20
// digits above the largest uint64.
func join(high, low int64) (uint64, bool) {
	// The largest uint64, 18446744073709551615, is high 1844674407 and low 3709551615.
	const maxHigh, maxLow = 1844674407, 3709551615
	if high < 0 || low < 0 || low >= split || high > maxHigh || high == maxHigh && low > maxLow {
		return 0, false // 20 digits that no uint64 has: written by someone else
	}
	return uint64(high)*split + uint64(low), true
}

// isNil reports whether n is nil or a nil pointer in an interface, such as the nil *Node a
// backend's New returns for a nil client.
func isNil(n core.Node) bool {
	if n == nil {
		return true
	}
	v := reflect.ValueOf(n)
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}
