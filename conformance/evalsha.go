package conformance

import (
	"strconv"
	"strings"
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// counting is a script that counts its runs in KEYS[1] and replies the count.
var counting = core.NewScript("conformance-counting", "return {redis.call('INCR', KEYS[1])}")

// evalshaChecks: each Eval runs the script exactly once, and once the server has the script,
// Eval sends EVALSHA only, as the server's own counters (INFO commandstats) tell.
func evalshaChecks() []check {
	const calls = 5
	return []check{
		{"runs-once", func(t *testing.T, e *env) {
			addr := e.server(t)
			n := e.node(t, addr)
			key := core.NewKeys(prefix(t), "counting").Lock
			for i := int64(1); i <= calls; i++ {
				got := mustEval(t, n, counting, []string{key})
				runs, _ := strconv.ParseInt(admin(t, addr, "GET", key).(string), 10, 64)
				require.Equal(t, i, runs, "after %d Evals of a script that counts its runs, it ran %d times (the last replied %s): each Eval must run the script exactly once; send EVAL only after EVALSHA failed with NOSCRIPT, never both (a pipelined EVALSHA and EVAL run it twice once it is cached)", i, runs, format(got))
				assert.Equal(t, []int64{i}, got, "Eval #%d of a script that counts its runs replied %s, want {%d}", i, format(got), i)
			}
		}},
		{"steady-state", func(t *testing.T, e *env) {
			if e.kind == Miniredis {
				t.Skip("conformance: miniredis has no INFO commandstats: checked on redis-server (the runs-once check covers miniredis)")
			}
			addr := e.server(t)
			n := e.node(t, addr)
			key := core.NewKeys(prefix(t), "counting").Lock
			mustEval(t, n, counting, []string{key}) // the server has the script from here on
			adminAll(t, addr, "CONFIG", "RESETSTAT")
			for range calls {
				mustEval(t, n, counting, []string{key})
			}
			evalsha, eval := commandCalls(t, addr, "evalsha"), commandCalls(t, addr, "eval")
			assert.Zero(t, eval, "%d Evals of a script the server has sent EVAL %d times: once the script is cached, the Node must send EVALSHA with Script.SHA1() (EVAL only after NOSCRIPT)", calls, eval)
			assert.Equal(t, int64(calls), evalsha, "%d Evals of a script the server has sent EVALSHA %d times, want one each", calls, evalsha)
		}},
	}
}

// commandCalls returns how many times the masters of addr ran command since CONFIG
// RESETSTAT, from INFO commandstats ("cmdstat_evalsha:calls=5,...").
func commandCalls(t *testing.T, addr, command string) int64 {
	t.Helper()
	var total int64
	for _, reply := range adminAll(t, addr, "INFO", "commandstats") {
		info, _ := reply.(string)
		_, rest, found := strings.Cut(info, "cmdstat_"+command+":calls=")
		if !found {
			continue
		}
		digits, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(digits, 10, 64)
		require.NoError(t, err, "conformance: INFO commandstats: %q", info)
		total += n
	}
	return total
}
