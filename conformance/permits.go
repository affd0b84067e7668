package conformance

import (
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
)

// permitsScriptCases are the scripts group's checks of core's permits script: a
// semaphore's record of its number of permits, which KEYS[1] holds. ARGV are the number
// of permits and how long the record is kept, in milliseconds.
func permitsScriptCases() []scriptCase {
	return []scriptCase{
		{"permits/first", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			got := mustEval(t, n, script(t, "permits"), []string{k.Lock}, "3", ttl)
			assert.Equal(t, []int64{1, 0}, got, "permits on an empty server replied %s, want {1, 0}: the Node must return the whole integer array", format(got))
			assert.Equal(t, "3", admin(t, addr, "GET", k.Lock), "permits must record the number of permits it was given: the Node must pass KEYS and ARGV in order")
			wantPTTL(t, addr, k.Lock, 1, ttlMS, "after permits kept for "+ttl+" ms")
		}},
		{"permits/agree", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, "3", "PX", "5000")
			got := mustEval(t, n, script(t, "permits"), []string{k.Lock}, "3", ttl)
			assert.Equal(t, []int64{1, 0}, got, "permits agreeing with the record replied %s, want {1, 0}", format(got))
			wantPTTL(t, addr, k.Lock, 5001, ttlMS, "after permits renewed the record to "+ttl+" ms")
		}},
		{"permits/disagree", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, "2", "PX", "5000")
			got := mustEval(t, n, script(t, "permits"), []string{k.Lock}, "3", ttl)
			assert.Equal(t, []int64{0, 2}, got, "permits of 3 against a record of 2 replied %s, want {0, 2}", format(got))
			assert.Equal(t, "2", admin(t, addr, "GET", k.Lock), "permits must not overwrite another holder's record")
		}},
	}
}
