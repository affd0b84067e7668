package simlua_test

import (
	"bufio"
	"bytes"
	"strconv"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/simlua"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// process is a miniredis process whose scripts run on an engine.
type process struct {
	m   *miniredis.Miniredis
	eng *simlua.Engine
}

// newProcess returns a process whose scripts run on an engine made with o, and whose
// pre-hook, after the engine's Hook, calls then (if non-nil) with each command the engine
// leaves to miniredis. It is closed when t's test ends.
func newProcess(t *testing.T, o simlua.Options, then func(p *server.Peer, cmd string, args []string) bool) *process {
	m := miniredis.NewMiniRedis()
	t.Cleanup(m.Close)
	c, err := m.Dial() // the first Dial makes the server that m.Server returns
	require.NoError(t, err)
	require.NoError(t, c.Close())
	eng, err := simlua.New(m, o)
	require.NoError(t, err)
	m.Server().SetPreHook(func(p *server.Peer, cmd string, args ...string) bool {
		if eng.Hook(p, cmd, args) {
			return true
		}
		return then != nil && then(p, cmd, args)
	})
	return &process{m: m, eng: eng}
}

// do runs a command on the process, as a client's, and returns its reply as
// server.ParseReply reads it: an error reply as the error.
func (pr *process) do(args ...string) (any, error) {
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	pr.m.Server().Dispatch(server.NewPeer(w), args)
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return server.ParseReply(bufio.NewReader(&out))
}

// eval runs src by EVAL with keys and args.
func (pr *process) eval(src string, keys []string, args ...string) (any, error) {
	cmd := append([]string{"EVAL", src, strconv.Itoa(len(keys))}, keys...)
	return pr.do(append(cmd, args...)...)
}

// TestRunningNamesTheScriptOfACommand checks that a pre-hook reads, for each command a
// script sends, the SHA-1 of that script, and that a client's command is not a script's.
func TestRunningNamesTheScriptOfACommand(t *testing.T) {
	type seen struct {
		cmd, sha string
		nested   bool
	}
	var mu sync.Mutex
	var got []seen
	var pr *process
	pr = newProcess(t, simlua.Options{}, func(p *server.Peer, cmd string, _ []string) bool {
		sha, ok := pr.eng.Running(p)
		assert.Equal(t, ok, pr.eng.Nested(p), cmd)
		mu.Lock()
		got = append(got, seen{cmd, sha, ok})
		mu.Unlock()
		return false
	})
	one := core.NewScript("one", "return redis.call('SET', KEYS[1], 'v')")
	two := core.NewScript("two", "redis.call('GET', KEYS[1]); return redis.pcall('DEL', KEYS[1])")
	_, err := pr.eval(one.Source(), []string{"k"})
	require.NoError(t, err)
	_, err = pr.do("GET", "k")
	require.NoError(t, err)
	v, err := pr.eval(two.Source(), []string{"k"})
	require.NoError(t, err)
	assert.Equal(t, 1, v)
	assert.Equal(t, []seen{
		{"SET", one.SHA1(), true},
		{"GET", "", false},
		{"GET", two.SHA1(), true},
		{"DEL", two.SHA1(), true},
	}, got)
}

// TestChecksAreReadAtEachScript switches the checks between two EVALs of one script: each
// runs under the checks of its start; a refused command is passed to Refused with the
// script's SHA-1, and a refused EVAL_RO is not.
func TestChecksAreReadAtEachScript(t *testing.T) {
	var mu sync.Mutex
	var checks simlua.Checks
	var refused []string
	pr := newProcess(t, simlua.Options{
		Checks: func() simlua.Checks { mu.Lock(); defer mu.Unlock(); return checks },
		Refused: func(sha, msg string) {
			mu.Lock()
			defer mu.Unlock()
			refused = append(refused, sha+" "+msg)
		},
	}, nil)
	set := func(c simlua.Checks) { mu.Lock(); defer mu.Unlock(); checks = c }
	sc := core.NewScript("built", "return redis.call('SET', 'built:' .. ARGV[1], 1)")

	_, err := pr.eval(sc.Source(), nil, "a")
	require.NoError(t, err, "no checks")
	_, err = pr.do("EVAL_RO", "return 1", "0")
	require.NoError(t, err, "no checks: miniredis runs EVAL_RO")

	rec := simlua.NewRecord()
	set(simlua.Checks{Writes: rec})
	_, err = pr.eval(sc.Source(), nil, "b")
	require.NoError(t, err, "a record alone refuses no key")
	_, err = pr.do("EVAL_RO", "return 1", "0")
	assert.ErrorContains(t, err, "EVAL_RO cannot run while scripts are checked")
	_, err = pr.do("EVALSHA", core.NewScript("", "return 2").SHA1(), "0")
	assert.ErrorContains(t, err, "NOSCRIPT", "checked: a script the engine was not given")

	set(simlua.Checks{StrictKeys: true, Writes: rec})
	_, err = pr.eval(sc.Source(), nil, "c")
	const msg = "ERR script tried accessing undeclared key: built:c (SET)"
	require.Error(t, err)
	assert.Contains(t, err.Error(), msg)
	_, err = pr.do("EVALSHA", sc.SHA1(), "0", "d")
	require.Error(t, err, "EVALSHA of the script that EVAL gave")
	assert.Contains(t, err.Error(), "built:d (SET)")

	set(simlua.Checks{})
	_, err = pr.eval(sc.Source(), nil, "e")
	require.NoError(t, err, "no checks again")

	assert.Equal(t, []string{sc.SHA1() + " " + msg, sc.SHA1() + " ERR script tried accessing undeclared key: built:d (SET)"}, refused)
	assert.Equal(t, map[string][]string{"built:b": {sc.SHA1()}}, rec.Writers(nil), "only the writes made while the record was kept")
	for _, k := range []string{"built:a", "built:b", "built:e"} {
		assert.True(t, pr.m.Exists(k), k)
	}
	for _, k := range []string{"built:c", "built:d"} {
		assert.False(t, pr.m.Exists(k), k)
	}
}

// TestInfoAnswersScripts checks that a script's INFO reads Options.Info's text, new at each
// call, and is dispatched to the server when Info declines.
func TestInfoAnswersScripts(t *testing.T) {
	var mu sync.Mutex
	text, answer := "uptime_in_seconds:1\r\n", true
	pr := newProcess(t, simlua.Options{Info: func() (string, bool) { mu.Lock(); defer mu.Unlock(); return text, answer }},
		func(p *server.Peer, cmd string, _ []string) bool {
			if cmd == "INFO" {
				p.WriteBulk("dispatched")
				return true
			}
			return false
		})
	const src = "return redis.call('INFO', 'server')"
	v, err := pr.eval(src, nil)
	require.NoError(t, err)
	assert.Equal(t, "uptime_in_seconds:1\r\n", v)
	mu.Lock()
	text = "uptime_in_seconds:2\r\n"
	mu.Unlock()
	v, err = pr.eval(src, nil)
	require.NoError(t, err)
	assert.Equal(t, "uptime_in_seconds:2\r\n", v)
	mu.Lock()
	answer = false
	mu.Unlock()
	v, err = pr.eval(src, nil)
	require.NoError(t, err)
	assert.Equal(t, "dispatched", v)
}

// TestLastSaveAnswersScripts checks that a script's LASTSAVE reads Options.LastSave's time,
// and, when LastSave declines, goes to the server: miniredis's refusal, which redis.pcall
// returns as an error.
func TestLastSaveAnswersScripts(t *testing.T) {
	var mu sync.Mutex
	saved, answer := int64(946684800), true
	pr := newProcess(t, simlua.Options{LastSave: func() (int64, bool) { mu.Lock(); defer mu.Unlock(); return saved, answer }}, nil)
	const src = "local r = redis.pcall('LASTSAVE'); if type(r) == 'table' then return r.err end; return r"
	v, err := pr.eval(src, nil)
	require.NoError(t, err)
	assert.EqualValues(t, 946684800, v)
	mu.Lock()
	answer = false
	mu.Unlock()
	v, err = pr.eval(src, nil)
	require.NoError(t, err)
	assert.Contains(t, v, "Unknown Redis command")
}
