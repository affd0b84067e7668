package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Store is the resource the lock protects: one record, kept in Redis as a hash with the
// fields "value" and "token". It accepts a write only if the write's fencing token is at
// least the highest it has accepted, checking and writing in one step (a Lua script).
//
// The check is >=, not >: a lease keeps one token, so its holder may write several times,
// and a newer holder always has a larger token.
type Store struct {
	rdb redis.Cmdable
	key string
}

// writeIfNewer writes the record if ARGV[1], the write's token, is at least the stored one.
//
// Tokens travel as 20-digit, zero-padded decimal strings (every uint64 fits in 20 digits).
// Lua orders strings of one length as the numbers they spell, so the comparison is exact for
// every uint64, and a missing token (false, made "") is below them all. Comparing with
// tonumber would work too, today: Redis's Lua numbers are doubles, exact for integers below
// 2^53 (about 9.0e15), and tokens are about 1.8e15 (server time in microseconds). The strings
// make that argument unnecessary.
var writeIfNewer = redis.NewScript(`
local highest = redis.call('HGET', KEYS[1], 'token') or ''
if ARGV[1] >= highest then
  redis.call('HSET', KEYS[1], 'value', ARGV[2], 'token', ARGV[1])
  return 1
end
return 0
`)

// Write stores value if token is at least the highest token accepted so far, and reports
// whether it did.
func (s *Store) Write(ctx context.Context, token uint64, value string) (bool, error) {
	n, err := writeIfNewer.Run(ctx, s.rdb, []string{s.key}, fmt.Sprintf("%020d", token), value).Int()
	return n == 1, err
}

// Read returns the stored value and the token it was written with: the highest accepted.
func (s *Store) Read(ctx context.Context) (value string, token uint64, err error) {
	fields, err := s.rdb.HMGet(ctx, s.key, "value", "token").Result()
	if err != nil {
		return "", 0, err
	}
	v, ok1 := fields[0].(string)
	t, ok2 := fields[1].(string)
	if !ok1 || !ok2 {
		return "", 0, errors.New("the store holds no record")
	}
	token, err = strconv.ParseUint(t, 10, 64)
	return v, token, err
}
