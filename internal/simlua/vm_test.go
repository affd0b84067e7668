package simlua_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-redlock/redlock/internal/simnet"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPooledScriptsAnswerAsMiniredis runs scripts on a server with pooled scripts and on
// one without, and compares their replies and errors, and what they leave in the data.
func TestPooledScriptsAnswerAsMiniredis(t *testing.T) {
	scripts := []struct {
		src  string
		keys []string
		args []any
	}{
		{"return 1", nil, nil},
		{"return {1, 'two', {3}, false, nil, 6}", nil, nil},
		{"return KEYS[1] .. ARGV[1] .. #KEYS .. #ARGV", []string{"k"}, []any{"a", "b"}},
		{"return redis.call('SET', KEYS[1], ARGV[1], 'PX', 60000)", []string{"k"}, []any{"v"}},
		{"return redis.call('GET', KEYS[1])", []string{"k"}, nil},
		{"return redis.call('GET', 'missing')", nil, nil},
		{"return redis.call('INCR', 'n')", nil, nil},
		{"return redis.call('ZADD', 'z', 1, 'a', 2, 'b')", nil, nil},
		{"return redis.call('ZRANGE', 'z', 0, -1, 'WITHSCORES')", nil, nil},
		{"return redis.call('HGETALL', 'nohash')", nil, nil},
		{"return redis.pcall('GET', 'z')", nil, nil},
		{"return redis.call('GET', 'z')", nil, nil},
		{"return redis.pcall('NOSUCH')", nil, nil},
		{"return redis.call('NOSUCH')", nil, nil},
		{"local info = redis.pcall('INFO', 'server'); return string.match(info, 'uptime_in_seconds:(%d+)')", nil, nil},
		{"local info = redis.pcall('INFO', 'server'); return #string.match(info, 'run_id:(%x+)')", nil, nil},
		{"return {string.match('a1b22c', '(%a)(%d+)')}", nil, nil},
		{"return string.match('xx:12ab', 'xx:(%x+)')", nil, nil},
		{"return string.match('id:zz id:9', 'id:(%d+)')", nil, nil},
		{"return string.match(ARGV[1], '%.(%d+)$')", nil, []any{"tok.12"}},
		{"return string.match(ARGV[1], '%.(%d+)$')", nil, []any{"a.1.23"}},
		{"return string.match(ARGV[1], '%.(%d+)$')", nil, []any{"a.12b"}},
		{"return string.match(ARGV[1], '%.(%d+)$')", nil, []any{"a.12.b"}},
		{"return string.match(ARGV[1], '%.(%d+)$')", nil, []any{"12"}},
		{"return string.match(ARGV[1], '%.(%d+)$')", nil, []any{"a."}},
		{"return string.match(ARGV[1], '(%x+)$')", nil, []any{"zz:0aF"}},
		{"return string.match(ARGV[1], 'a%:b(%d+)')", nil, []any{"a:b7 a:b8"}},
		{"return string.match(ARGV[1], 'a%$(%d+)$')", nil, []any{"a$1"}},
		{"return string.match(ARGV[1], '%d(%d+)$')", nil, []any{"123"}},
		{"return string.match(ARGV[1], '.(%d+)$')", nil, []any{"x12"}},
		{"return string.match(ARGV[1], '%.(%d+)%$')", nil, []any{"a.1$"}},
		{"return redis.status_reply('FINE')", nil, nil},
		{"return redis.call('SET', 'st', 'v').ok", nil, nil},
		{"return redis.pcall('GET', 'z').err", nil, nil},
		{"return redis.error_reply('MY failure').err", nil, nil},
		{"return redis.error_reply('MY failure')", nil, nil},
		{"return redis.error_reply('plain')", nil, nil},
		{"return redis.sha1hex('abc')", nil, nil},
		{"x = 1", nil, nil},
		{"return select('#', ...)", nil, nil},
		{"return arg", nil, nil},
		{"local a; return type(a)", nil, nil},
		{"local function f(...) return arg.n end; return f(1, 2)", nil, nil},
		{"return undefined_global", nil, nil},
		{"error('boom')", nil, nil},
		{"return cjson.encode({1, 2})", nil, nil},
		{"return tonumber(redis.call('TIME')[1]) > 0", nil, nil},
		{"return 3.7", nil, nil},
		{"return redis.call('EXISTS', 'k', 'n', 'nope')", nil, nil},
		{"return redis.call('PUBLISH', 'ch', 'msg')", nil, nil},
		{"return type(KEYS[2])", []string{"only"}, nil},
		{"local r = redis.call('MGET', 'missing', 'k'); return {type(r[1]), r[2], #r}", nil, nil},
		{"return redis.call('SCAN', 0, 'COUNT', 100)", nil, nil},
		{"local r = redis.call('SCAN', 0); return {type(r[1]), type(r[2])}", nil, nil},
		{"return redis.call('PING').ok .. redis.call('TYPE', 'z').ok", nil, nil},
		{"return redis.pcall('INCR', 'z').err", nil, nil},
		{"return #redis.call('ZRANGE', 'missing', 0, -1)", nil, nil},
		{"return {redis.call('ECHO', ''), redis.call('ECHO', 'a\\r\\nb')}", nil, nil},
		{"return redis.call('ZSCORE', 'z', 'b')", nil, nil},
		{"this is not lua", nil, nil},
	}
	ctx := context.Background()
	servers := simnet.NewServers(t, 2)
	servers[1].SetPooledScripts(true)
	clients := []*redis.Client{simnet.Client(t, servers[0]), simnet.Client(t, servers[1])}
	for i, sc := range scripts {
		var got [2]string
		for j, c := range clients {
			v, err := c.Eval(ctx, sc.src, sc.keys, sc.args...).Result()
			got[j] = fmt.Sprintf("%#v %v", v, err)
		}
		assert.Equal(t, got[0], got[1], "script %d: %s", i, sc.src)
	}
	assert.Equal(t, servers[0].Miniredis().Dump(), servers[1].Miniredis().Dump(), "the scripts' writes")

	// EVALSHA finds a script that EVAL ran; a restart forgets it.
	c := clients[1]
	sha, err := c.ScriptLoad(ctx, "return 'loaded'").Result()
	require.NoError(t, err)
	v, err := c.EvalSha(ctx, sha, nil).Result()
	require.NoError(t, err)
	assert.Equal(t, "loaded", v)
	require.NoError(t, c.Eval(ctx, "return 'evaled'", nil).Err())
	v, err = c.EvalSha(ctx, "3c5c8d2d7f4e1d0b8b7a0a8f2a7b2f9b0e1c7c51", nil).Result()
	assert.ErrorContains(t, err, "NOSCRIPT", "%v", v)
	servers[1].Crash()
	servers[1].Restart()
	_ = c.Ping(ctx).Err() // the connection that the crash closed
	_, err = c.EvalSha(ctx, sha, nil).Result()
	assert.ErrorContains(t, err, "NOSCRIPT", "a new process has no scripts")
}
