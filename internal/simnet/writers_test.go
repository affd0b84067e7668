package simnet_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/simnet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWritersRecordWhichScriptWroteWhichKey runs toy scripts on a server that records its
// writers: each key is recorded with the scripts that wrote it, named or by SHA-1, whether
// the write changed it or not; reads and clients' own commands are not recorded; a command
// the record cannot classify is refused.
func TestWritersRecordWhichScriptWroteWhichKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		srv := simnet.NewServer(t, "10.0.0.1:6379")
		c := simnet.Client(t, srv)
		take := core.NewScript("take", "redis.call('SET', KEYS[1], ARGV[1], 'NX'); redis.call('ZADD', KEYS[2], 1, ARGV[1]); return 1")
		peek := core.NewScript("peek", "return {redis.call('GET', KEYS[1]), redis.call('EXISTS', KEYS[1], KEYS[2]), "+
			"#redis.call('ZRANGE', KEYS[2], 0, -1), redis.call('PTTL', KEYS[1]), redis.call('TYPE', KEYS[2]).ok}")
		drop := core.NewScript("drop", "redis.call('DEL', KEYS[1], KEYS[3]); return type(redis.pcall('HSET', KEYS[2], 'f', 'v'))")
		const unnamed = "redis.call('PEXPIRE', KEYS[1], 1000); return redis.call('INCR', 'built:' .. ARGV[1])"
		run := func(sc *core.Script, keys ...string) {
			t.Helper()
			require.NoError(t, c.Eval(ctx, sc.Source(), keys, "x").Err(), sc.Name())
		}

		require.NoError(t, c.Eval(ctx, take.Source(), []string{"before", "q"}, "t0").Err())
		assert.Nil(t, srv.Writers(), "no record before RecordWriters")

		srv.RecordWriters(take, peek, drop)
		run(take, "lock", "queue")
		run(take, "lock", "queue") // a SET NX that finds the key set writes nothing, but is a write
		run(peek, "lock", "queue")
		run(peek, "missing", "alsomissing")
		require.NoError(t, c.Set(ctx, "direct", "1", 0).Err()) // not a script's
		run(drop, "lock", "queue", "gone")                     // the HSET fails (WRONGTYPE): still a write
		v, err := c.Eval(ctx, unnamed, []string{"queue"}, "n").Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), v)
		unnamedSHA := core.NewScript("", unnamed).SHA1()

		// The record holds across a restart.
		srv.Crash()
		srv.Restart()
		_ = c.Ping(ctx).Err() // the connection that the crash closed
		run(drop, "other", "h", "lock")

		want := map[string][]string{
			"lock":    {"drop", "take"},
			"queue":   {unnamedSHA, "drop", "take"},
			"gone":    {"drop"},
			"built:n": {unnamedSHA}, // a key built from data: recorded, strict keys being off
			"other":   {"drop"},
			"h":       {"drop"},
		}
		slices.Sort(want["queue"])
		got := srv.Writers()
		assert.Equal(t, want, got)
		got["lock"][0] = "changed"
		delete(got, "queue")
		assert.Equal(t, want, srv.Writers(), "the map returned is the caller's")

		// A command the record cannot classify is refused, so that no write escapes it.
		_, err = c.Eval(ctx, "return redis.call('EXPIRE', KEYS[1], 10)", []string{"lock"}).Result()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "ERR simlua: script called EXPIRE, a command that the script checks do not know")

		// RecordWriters starts the record again, empty.
		srv.RecordWriters()
		run(take, "lock", "queue")
		assert.Equal(t, map[string][]string{"lock": {take.SHA1()}, "queue": {take.SHA1()}}, srv.Writers(),
			"take is not named this time")
	})
}

// TestWritersAreSafeForConcurrentUse runs scripts from several goroutines while Writers
// reads the record (for the race detector), and checks the record they leave.
func TestWritersAreSafeForConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		srv := simnet.NewServer(t, "10.0.0.1:6379")
		set := core.NewScript("set", "return redis.call('SET', KEYS[1], ARGV[1])")
		srv.RecordWriters(set)
		var wg sync.WaitGroup
		for i := range 4 {
			c := simnet.Client(t, srv)
			wg.Go(func() {
				for j := range 20 {
					assert.NoError(t, c.Eval(ctx, set.Source(), []string{"k" + string(rune('a'+i))}, j).Err())
					_ = srv.Writers()
				}
			})
		}
		wg.Wait()
		assert.Equal(t, map[string][]string{"ka": {"set"}, "kb": {"set"}, "kc": {"set"}, "kd": {"set"}}, srv.Writers())
	})
}
