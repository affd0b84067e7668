package main

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/fence"
)

// recordTTL is how long the store's record lives after its last write: far longer than the
// lock's longest holding here (a 500ms TTL, never extended). See package fence on choosing it.
const recordTTL = time.Hour

// Store is the resource the lock protects: one record, kept in Redis by package fence's
// guarded write (fence.Redis) as a hash with the fields "value" and "token". It accepts a
// write only if the write's fencing token is not older than the highest it has accepted,
// checking and writing in one script, in one round trip.
//
// The check is >=, not >: a lease keeps one token, so its holder may write several times,
// and a newer holder always has a larger token.
type Store struct {
	rdb redis.UniversalClient
	key string
}

// Write stores value if token is at least the highest token accepted so far, and reports
// whether it did. A refused write is not an error here: fence.ErrStale says the writer no
// longer holds the lock. Token 0 (the zero Lease's) is an error matching redlock.ErrInvalid.
func (s *Store) Write(ctx context.Context, token uint64, value string) (bool, error) {
	g, err := fence.NewRedis(goredis.New(s.rdb), recordTTL)
	if err != nil {
		return false, err
	}
	err = g.Write(ctx, s.key, token, value)
	if errors.Is(err, fence.ErrStale) {
		return false, nil
	}
	return err == nil, err
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
