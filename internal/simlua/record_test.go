package simlua_test

import (
	"sync"
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/simlua"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecordNamesWriters runs scripts on two processes that share a record: Writers names
// each writer by name's answer, or by its SHA-1 where name has none (or is nil), sorts them,
// and counts two scripts of one name once; reads are not recorded.
func TestRecordNamesWriters(t *testing.T) {
	rec := simlua.NewRecord()
	o := simlua.Options{Checks: func() simlua.Checks { return simlua.Checks{Writes: rec} }}
	a, b := newProcess(t, o, nil), newProcess(t, o, nil)
	set := core.NewScript("set", "return redis.call('SET', KEYS[1], 'v')")
	set2 := core.NewScript("set", "return redis.call('SET', KEYS[1], 'w')") // another source, one name
	zap := core.NewScript("", "redis.call('GET', KEYS[2]); return redis.call('DEL', KEYS[1])")
	for _, call := range []struct {
		pr   *process
		sc   *core.Script
		keys []string
	}{{a, set, []string{"k"}}, {b, set2, []string{"k"}}, {b, zap, []string{"k", "read"}}} {
		_, err := call.pr.eval(call.sc.Source(), call.keys)
		require.NoError(t, err)
	}
	names := map[string]string{set.SHA1(): "set", set2.SHA1(): "set"}
	assert.Equal(t, map[string][]string{"k": {zap.SHA1(), "set"}}, rec.Writers(func(sha string) string { return names[sha] }))
	got := rec.Writers(nil)["k"]
	assert.ElementsMatch(t, []string{set.SHA1(), set2.SHA1(), zap.SHA1()}, got)
	assert.IsIncreasing(t, got)
}

// TestRecordIsSafeForConcurrentUse writes from several goroutines while Writers reads
// (for the race detector), and checks the record they leave.
func TestRecordIsSafeForConcurrentUse(t *testing.T) {
	rec := simlua.NewRecord()
	pr := newProcess(t, simlua.Options{Checks: func() simlua.Checks { return simlua.Checks{Writes: rec} }}, nil)
	set := core.NewScript("set", "return redis.call('SET', KEYS[1], ARGV[1])")
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 20 {
				_, err := pr.eval(set.Source(), []string{"k" + string(rune('a'+i))}, string(rune('0'+j%10)))
				assert.NoError(t, err)
				_ = rec.Writers(nil)
			}
		})
	}
	wg.Wait()
	w := rec.Writers(func(string) string { return "set" })
	assert.Equal(t, map[string][]string{"ka": {"set"}, "kb": {"set"}, "kc": {"set"}, "kd": {"set"}}, w)
}
