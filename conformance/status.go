package conformance

import (
	"strconv"
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
)

// statusKeys are the status script's KEYS for a name without a Semaphore's keys, as core
// passes them: the lock's keys, its election's record and its semaphore's record.
func statusKeys(k core.Keys) []string {
	return []string{k.Lock, k.Fence, k.Queue, k.Alive, k.Waiters, k.Readers, k.Leader, k.Lock + ":permits"}
}

// statusScriptCases are the scripts group's checks of core's status script, read through
// EvalStrings: it reads every key it is given, as bulk strings and integers in order, and
// writes nothing.
func statusScriptCases() []scriptCase {
	return []scriptCase{
		{"status/reads-every-key", func(t *testing.T, n core.Node, addr string, k core.Keys) {
			admin(t, addr, "SET", k.Lock, ours, "PX", ttl)
			admin(t, addr, "SET", k.Fence, bigFenceStr)
			admin(t, addr, "ZADD", k.Queue, "1", "w1")
			admin(t, addr, "HSET", k.Waiters, "w1", "w1.1 100 0 0")
			admin(t, addr, "SET", k.Leader, ours+" a\xffé z")
			got := mustEvalStrings(t, n, script(t, "status"), statusKeys(k))
			if !assert.Len(t, got, 16, "status replied %q: want 16 values", got) {
				return
			}
			_, err := strconv.ParseInt(got[0], 10, 64)
			assert.NoError(t, err, "status's first value, the server time in ms, is %q", got[0])
			assert.Equal(t, ours, got[2], "status must read the lock key")
			pttl, _ := strconv.ParseInt(got[3], 10, 64)
			assert.True(t, pttl > 0 && pttl <= ttlMS, "status read the lock's PTTL as %q, want 1 to %d", got[3], ttlMS)
			assert.Equal(t, []string{bigFenceStr, ours + " a\xffé z", "-1", ""}, got[4:8],
				"status must read the fence counter exactly, the leader record's bytes and PTTL, and a missing key as \"\"")
			assert.Equal(t, []string{"2", "w1", "1", "0", "2", "w1", "w1.1 100 0 0", "0"}, got[8:],
				"status must read the queue with its scores, the waiters hash, and count empty keys as 0")
			for _, key := range []string{k.Alive, k.Readers, k.Lock + ":permits"} {
				assert.Equal(t, int64(0), admin(t, addr, "EXISTS", key), "status must write nothing: %s exists after it", key)
			}
			assert.Equal(t, int64(-1), admin(t, addr, "PTTL", k.Fence), "status must write nothing: the fence counter got a TTL")
		}},
	}
}
