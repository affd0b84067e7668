package sim

import (
	"testing"
	"testing/synctest"

	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/simlua"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckSetReportsAnExtensionOverAnotherToken runs SETs from scripts over a key that
// holds a value: only an extension's (extend, rextend) SET of a token over another token
// is reported, naming the script.
func TestCheckSetReportsAnExtensionOverAnotherToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r reports
		s := testServer(t, "s0", scripting{scripts: &scriptNames{}, writes: simlua.NewRecord(), report: r.report})
		const src = "return redis.call('SET', KEYS[1], ARGV[1], 'PX', 1000)"
		// Three sources, as three scripts of one source would share one SHA-1.
		extend, rextend, acquire := core.NewScript("extend", src), core.NewScript("rextend", src+" "), core.NewScript("acquire", src+"  ")
		for _, tc := range []struct {
			sc            *core.Script
			before, token string
			reported      bool
		}{
			{extend, "mine", "mine", false},    // its own token
			{acquire, "mine", "theirs", false}, // not an extension
			{extend, "mine", "12", false},      // a number: a fence counter, not a token
			{rextend, "12", "ours", false},     // over a number: not a token
			{extend, "mine", "theirs", true},
			{rextend, "mine", "ours", true},
		} {
			require.NoError(t, s.sync().Set("lock", tc.before))
			before := len(r.all())
			_, err := eval(s, tc.sc, []string{"lock"}, tc.token)
			require.NoError(t, err, tc.sc.Name())
			got := r.all()[before:]
			if tc.reported {
				assert.Equal(t, []string{"s0: " + tc.sc.Name() + " set lock to \"" + tc.token + "\" over another owner's \"" + tc.before + "\""}, got)
			} else {
				assert.Empty(t, got, "%s of %q over %q", tc.sc.Name(), tc.token, tc.before)
			}
		}
	})
}
