package conformance

import (
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
)

// electionScriptCases are the scripts group's checks of core's election scripts: proclaim
// records the leader's value where its token holds the lock, and leader reads it back, through
// EvalStrings, as a bulk string.
func electionScriptCases() []scriptCase {
	proclaimArgs := func(k core.Keys, token, value string) []string {
		return []string{token, k.LeaderChannel(), "PUBLISH", value, ttl}
	}
	return []scriptCase{
		{"proclaim/ours", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, ours, "PX", ttl)
			got := mustEval(t, n, script(t, "proclaim"), []string{k.Lock, k.Leader}, proclaimArgs(k, ours, "leader one")...)
			assert.Equal(t, []int64{1, 0}, got, "proclaim while we hold the lock, with no one listening, replied %s, want {1, 0}", format(got))
			assert.Equal(t, ours+" leader one", admin(t, addr, "GET", k.Leader), "proclaim must record \"<token> <value>\": the Node must pass KEYS and ARGV in order, unchanged")
			wantPTTL(t, addr, k.Leader, 1, ttlMS, "after proclaim kept for "+ttl+" ms")
		}},
		{"proclaim/not-ours", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, theirs, "PX", ttl)
			got := mustEval(t, n, script(t, "proclaim"), []string{k.Lock, k.Leader}, proclaimArgs(k, ours, "v")...)
			assert.Equal(t, []int64{0}, got, "proclaim of another owner's lock replied %s, want {0}", format(got))
			assert.Equal(t, int64(0), admin(t, addr, "EXISTS", k.Leader), "proclaim must record nothing where the lock is not ours")
		}},
		{"leader/reads-the-record", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			// Bytes above 127, a space, 0x00, CR LF and an invalid UTF-8 sequence.
			value := "a\xffé z\x00\r\n\xc3\x28"
			admin(t, addr, "SET", k.Lock, ours, "PX", ttl)
			admin(t, addr, "SET", k.Leader, ours+" "+value, "PX", ttl)
			got := mustEvalStrings(t, n, script(t, "leader"), []string{k.Lock, k.Leader})
			assert.Equal(t, []string{"1", ours + " " + value}, got, "leader replied %q, want {\"1\", record}: EvalStrings must return the record's bytes exactly", got)
		}},
		{"leader/stale", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, theirs, "PX", ttl)
			admin(t, addr, "SET", k.Leader, ours+" v", "PX", ttl)
			got := mustEvalStrings(t, n, script(t, "leader"), []string{k.Lock, k.Leader})
			assert.Equal(t, []string{"0"}, got, "leader, where the record's token no longer holds the lock, replied %q, want {\"0\"}", got)
		}},
	}
}
