package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// store is the record the leaders write to, in Redis. It accepts a write only if the
// write's fencing token is at least the highest it has accepted, checking and writing in
// one step (a Lua script), and it keeps what the parent reports: each leader's term, in
// order, with its number of writes, and the writes it rejected.
type store struct {
	rdb *redis.Client
}

// The record's keys (one hash tag, for the script, should the record be on a Cluster).
var storeKeys = []string{
	"{examples:election}:latest",   // hash: leader, token: the latest accepted write
	"{examples:election}:terms",    // list: "<token> <leader>" for each new token, in order
	"{examples:election}:writes",   // hash: token -> the writes accepted with it
	"{examples:election}:rejected", // list: the writes rejected, and what they came after
}

// fencedWrite writes as ARGV[2] with the token ARGV[1], if the token is at least the
// latest. Tokens travel as 20-digit, zero-padded decimal strings, which Lua orders as the
// numbers they spell (every uint64 fits in 20 digits); a missing token ("") is below them.
var fencedWrite = redis.NewScript(`
local latest = redis.call('HMGET', KEYS[1], 'token', 'leader')
local token, leader = latest[1] or '', latest[2] or ''
if ARGV[1] < token then
  redis.call('RPUSH', KEYS[4], ARGV[2] .. ' with token ' .. ARGV[1] .. ' after ' .. leader .. ' with token ' .. token)
  return 0
end
if ARGV[1] > token then
  redis.call('RPUSH', KEYS[2], ARGV[1] .. ' ' .. ARGV[2])
end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'leader', ARGV[2])
redis.call('HINCRBY', KEYS[3], ARGV[1], 1)
return 1
`)

// write writes as leader with token, and reports whether the record accepted it.
func (s *store) write(ctx context.Context, token uint64, leader string) (bool, error) {
	n, err := fencedWrite.Run(ctx, s.rdb, storeKeys, fmt.Sprintf("%020d", token), leader).Int()
	return n == 1, err
}

// reset empties the record.
func (s *store) reset(ctx context.Context) error {
	return s.rdb.Del(ctx, storeKeys...).Err()
}

// term is one leader's time in the lead, as the record saw it.
type term struct {
	Leader string
	Token  uint64
	Writes int
}

// read returns the terms in order, and the rejected writes.
func (s *store) read(ctx context.Context) (terms []term, rejected []string, err error) {
	var list, rej *redis.StringSliceCmd
	var writes *redis.MapStringStringCmd
	if _, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		list = p.LRange(ctx, storeKeys[1], 0, -1)
		writes = p.HGetAll(ctx, storeKeys[2])
		rej = p.LRange(ctx, storeKeys[3], 0, -1)
		return nil
	}); err != nil {
		return nil, nil, err
	}
	for _, t := range list.Val() {
		token, leader, _ := strings.Cut(t, " ")
		n, err1 := strconv.ParseUint(token, 10, 64)
		w, err2 := strconv.Atoi(writes.Val()[token])
		if err1 != nil || err2 != nil {
			return nil, nil, fmt.Errorf("bad term %q in the record", t)
		}
		terms = append(terms, term{Leader: leader, Token: n, Writes: w})
	}
	return terms, rej.Val(), nil
}
