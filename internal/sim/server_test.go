package sim

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2/server"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/simlua"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reports collects the violations that servers report; safe for concurrent use.
type reports struct {
	mu  sync.Mutex
	got []string
}

func (r *reports) report(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fmt.Sprintf(format, args...))
}

func (r *reports) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// testServer returns a running server whose scripts run under sc, and that crashes when
// t's test ends.
func testServer(t *testing.T, name string, sc scripting) *simServer {
	s := newServer(name, clock{start: time.Now(), rate: 1}, rand.New(rand.NewPCG(1, 2)), sc)
	t.Cleanup(s.crash)
	return s
}

// eval runs script sc on s with keys and args, as a Node does (noting its name first), and
// returns its reply as miniredis's server.ParseReply reads it: an error reply as the error.
func eval(s *simServer, sc *core.Script, keys []string, args ...string) (any, error) {
	s.scripts.note(sc)
	cmd := append([]string{"EVAL", sc.Source(), strconv.Itoa(len(keys))}, keys...)
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	s.sync().Server().Dispatch(server.NewPeer(w), append(cmd, args...))
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return server.ParseReply(bufio.NewReader(&out))
}

// TestServerChecksKeysWhenStrict runs a script that names a key it was not given in KEYS
// on a server with strict keys, where the command is refused and reported as a violation
// naming the script, and on one without, where it runs; and one that names only its KEYS,
// which runs on both.
func TestServerChecksKeysWhenStrict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		built := core.NewScript("built", "return redis.call('SET', KEYS[1] .. ':' .. ARGV[1], 'v')")
		declared := core.NewScript("declared", "return redis.call('SET', KEYS[1], 'v')")
		for _, strict := range []bool{true, false} {
			var r reports
			s := testServer(t, "s0", scripting{scripts: &scriptNames{}, strict: strict, writes: simlua.NewRecord(), report: r.report})
			_, err := eval(s, built, []string{"k"}, "x")
			if strict {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "ERR script tried accessing undeclared key: k:x (SET)")
				assert.Equal(t, []string{"s0: the checks refused a command of script built: ERR script tried accessing undeclared key: k:x (SET)"}, r.all())
				assert.False(t, s.sync().Exists("k:x"), "the SET did not run")
			} else {
				require.NoError(t, err)
				assert.Empty(t, r.all())
				assert.True(t, s.sync().Exists("k:x"))
			}
			v, err := eval(s, declared, []string{"k"})
			require.NoError(t, err, "strict %v", strict)
			assert.Equal(t, server.Simple("OK"), v)
		}
	})
}

// TestServersShareTheRecordOfWriters runs scripts on two servers that share one record,
// across a restart of one: the record names each key's writers, merged over both, and
// counts neither reads nor a refused command; a command the checks do not know is
// reported.
func TestServersShareTheRecordOfWriters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r reports
		sc := scripting{scripts: &scriptNames{}, writes: simlua.NewRecord(), report: r.report}
		s0, s1 := testServer(t, "s0", sc), testServer(t, "s1", sc)
		take := core.NewScript("take", "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('INCR', KEYS[2])")
		peek := core.NewScript("peek", "return redis.call('GET', KEYS[1])")
		drop := core.NewScript("drop", "return redis.call('DEL', KEYS[1])")
		odd := core.NewScript("odd", "return redis.call('EXPIRE', KEYS[1], 10)")
		for _, call := range []struct {
			s    *simServer
			sc   *core.Script
			keys []string
		}{
			{s0, take, []string{"lock", "lock:fence"}},
			{s1, peek, []string{"lock"}},
			{s1, drop, []string{"lock"}},
		} {
			_, err := eval(call.s, call.sc, call.keys, "tok")
			require.NoError(t, err, call.sc.Name())
		}
		s1.crash()
		s1.restart()
		_, err := eval(s1, take, []string{"other", "other:fence"}, "tok")
		require.NoError(t, err)
		_, err = eval(s0, odd, []string{"lock"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "script called EXPIRE, a command that the script checks do not know")
		assert.Equal(t, []string{"s0: the checks refused a command of script odd: ERR simlua: script called EXPIRE, a command that the script checks do not know (see internal/simlua/commands.go)"}, r.all())
		assert.Equal(t, map[string][]string{
			"lock": {"drop", "take"}, "lock:fence": {"take"}, "other": {"take"}, "other:fence": {"take"},
		}, sc.writes.Writers(sc.scripts.name))
	})
}
