package simnet_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/go-redlock/redlock/internal/simnet"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// undeclared is the error that refuses a command naming key, a key not in KEYS.
func undeclared(key, cmd string) string {
	return "ERR script tried accessing undeclared key: " + key + " (" + cmd + ")"
}

// TestStrictKeysRefuseUndeclaredKeys runs scripts on a server with strict keys: a command
// whose keys are all in KEYS runs; one that names another key, in any of its key
// arguments, fails the script (redis.call) or returns the error (redis.pcall); a command
// the checks do not know is refused; key-less commands run.
func TestStrictKeysRefuseUndeclaredKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		srv := simnet.NewServer(t, "10.0.0.1:6379")
		srv.SetStrictKeys(true)
		c := simnet.Client(t, srv)
		eval := func(src string, keys []string, args ...any) (any, error) {
			return c.Eval(ctx, src, keys, args...).Result()
		}

		v, err := eval("redis.call('SET', KEYS[1], ARGV[1]); redis.call('ZADD', KEYS[2], 1, 'm'); "+
			"redis.call('PEXPIRE', KEYS[1], 60000); redis.call('DEL', KEYS[2], KEYS[1]); redis.call('SET', KEYS[1], 'again'); "+
			"return {redis.call('GET', KEYS[1]), redis.call('EXISTS', KEYS[1], KEYS[2]), #redis.call('MGET', KEYS[2], KEYS[1])}",
			[]string{"a", "z"}, "v")
		require.NoError(t, err, "every key declared")
		assert.Equal(t, []any{"again", int64(1), int64(2)}, v)

		a := []string{"a"}
		for _, tc := range []struct {
			src      string
			keys     []string
			key, cmd string
		}{
			{"return redis.call('GET', 'b')", a, "b", "GET"},
			{"return redis.call('get', KEYS[1] .. ':x')", a, "a:x", "GET"}, // built from data; named in upper case
			{"return redis.call('DEL', KEYS[1], 'b')", a, "b", "DEL"},      // a key past the first
			{"return redis.call('MGET', 'b', KEYS[1])", a, "b", "MGET"},    // the first of several
			{"return redis.call('ZADD', 'b', 1, KEYS[1])", a, "b", "ZADD"}, // a member is not a key
			{"return redis.call('HSET', 'b', KEYS[1], 'v')", a, "b", "HSET"},
			{"return redis.call('SET', 'a', 'v', 'PX', 1)", []string{"other"}, "a", "SET"},
			{"return redis.call('SET', 'a', 'v')", nil, "a", "SET"},
			{"redis.call('SET', 'b', '1'); return redis.call('SET', KEYS[1], 'after')", a, "b", "SET"},
		} {
			before, err := c.Get(ctx, "a").Result()
			require.NoError(t, err)
			_, err = eval(tc.src, tc.keys)
			require.Error(t, err, tc.src)
			assert.Contains(t, err.Error(), undeclared(tc.key, tc.cmd), tc.src)
			after, err := c.Get(ctx, "a").Result()
			require.NoError(t, err)
			assert.Equal(t, before, after, "%s: the script stopped at the refused call", tc.src)
			assert.Zero(t, c.Exists(ctx, "b").Val(), "%s: nothing written to the undeclared key", tc.src)
		}

		// redis.pcall returns the error as a table, and the script goes on.
		v, err = eval("local r = redis.pcall('SET', 'b', '1'); redis.call('SET', KEYS[1], 'went on'); return r.err", []string{"a"})
		require.NoError(t, err)
		assert.Equal(t, undeclared("b", "SET"), v)
		assert.Equal(t, "went on", c.Get(ctx, "a").Val())
		assert.Zero(t, c.Exists(ctx, "b").Val())
		_, err = eval("return redis.pcall('ZSCORE', 'b', 'm')", []string{"a"})
		assert.EqualError(t, err, undeclared("b", "ZSCORE"), "the error table returned is an error reply")

		// A command the checks do not know is refused, by call and by pcall.
		_, err = eval("return redis.call('EXPIRE', KEYS[1], 10)", []string{"a"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "ERR simlua: script called EXPIRE, a command that the script checks do not know")
		v, err = eval("return redis.pcall('expire', KEYS[1], 10).err", []string{"a"})
		require.NoError(t, err)
		assert.Contains(t, v, "script called EXPIRE")
		assert.Equal(t, int64(-1), c.Do(ctx, "PTTL", "a").Val(), "EXPIRE did not run")

		// Key-less commands run with no KEYS.
		v, err = eval("local t = redis.call('TIME'); local i = redis.call('INFO', 'server'); "+
			"return {#t, redis.call('PING').ok, redis.call('PUBLISH', 'ch', 'm'), type(i)}", nil)
		require.NoError(t, err)
		assert.Equal(t, []any{int64(2), "PONG", int64(0), "string"}, v)

		// The setting holds across a restart, and can be switched off.
		srv.Crash()
		srv.Restart()
		_ = c.Ping(ctx).Err() // the connection that the crash closed
		_, err = eval("return redis.call('GET', 'b')", nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), undeclared("b", "GET"), "after a restart")
		srv.SetStrictKeys(false)
		_, err = eval("return redis.call('GET', 'b')", nil)
		assert.ErrorIs(t, err, redis.Nil, "strict keys off")
	})
}

// TestStrictKeysAreOffByDefault runs scripts that name undeclared keys and commands the
// checks do not know on a server as NewServer makes it, pooled and not: both run.
func TestStrictKeysAreOffByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		for _, pooled := range []bool{false, true} {
			srv := simnet.NewServer(t, "10.0.0.1:6379")
			srv.SetPooledScripts(pooled)
			c := simnet.Client(t, srv)
			v, err := c.Eval(ctx, "redis.call('SET', 'built:' .. ARGV[1], 1); redis.call('EXPIRE', 'built:' .. ARGV[1], 10); "+
				"return redis.call('GET', 'built:' .. ARGV[1])", nil, "x").Result()
			require.NoError(t, err, "pooled %v", pooled)
			assert.Equal(t, "1", v, "pooled %v", pooled)
			srv.Crash()
		}
	})
}

// TestStrictKeysCheckEveryScriptCall checks that no way of running a script escapes the
// checks: EVALSHA of a script given by SCRIPT LOAD or by EVAL is checked; EVALSHA of a
// script miniredis was given before the checks began answers NOSCRIPT (the client then
// gives it by EVAL, and it is checked); EVAL_RO and EVALSHA_RO are refused.
func TestStrictKeysCheckEveryScriptCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		srv := simnet.NewServer(t, "10.0.0.1:6379")
		c := simnet.Client(t, srv)
		const early, loaded = "return redis.call('GET', 'early')", "return redis.call('GET', 'loaded')"
		_, err := c.Eval(ctx, early, nil).Result()
		require.ErrorIs(t, err, redis.Nil, "miniredis runs it, unchecked, and keeps it")
		earlySHA, err := c.ScriptLoad(ctx, early).Result()
		require.NoError(t, err)

		srv.SetStrictKeys(true)
		_, err = c.EvalSha(ctx, earlySHA, nil).Result()
		assert.ErrorContains(t, err, "NOSCRIPT", "miniredis has it, the engine does not")
		_, err = redis.NewScript(early).Run(ctx, c, nil).Result() // EVALSHA, then EVAL on NOSCRIPT
		require.Error(t, err)
		assert.Contains(t, err.Error(), undeclared("early", "GET"))
		_, err = c.EvalSha(ctx, earlySHA, nil).Result()
		require.Error(t, err)
		assert.Contains(t, err.Error(), undeclared("early", "GET"), "given by EVAL: the engine has it")

		loadedSHA, err := c.ScriptLoad(ctx, loaded).Result()
		require.NoError(t, err)
		_, err = c.EvalSha(ctx, loadedSHA, nil).Result()
		require.Error(t, err)
		assert.Contains(t, err.Error(), undeclared("loaded", "GET"), "given by SCRIPT LOAD: the engine has it")

		_, err = c.EvalRO(ctx, early, nil).Result()
		assert.ErrorContains(t, err, "EVAL_RO cannot run while scripts are checked")
		_, err = c.EvalShaRO(ctx, earlySHA, nil).Result()
		assert.ErrorContains(t, err, "EVALSHA_RO cannot run while scripts are checked")
	})
}
