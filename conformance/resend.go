package conformance

import (
	"strconv"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowReply is how late the slow-reply checks make a server's replies come: longer than a
// read timeout a backend might set for itself (a second, say), well within the checks'
// contexts (waitBound).
const slowReply = 1200 * time.Millisecond

// resendRule is the part of the contract that the resend checks test, for their messages.
const resendRule = "a Node may send a call again only when the connection broke under it (reset, EOF, broken pipe) before a reply came, never after a timeout of its own while the connection is open, nor after an error reply"

// slowed starts a server of the check's kind and returns its address, the address the Node
// must dial, and slow, which makes the replies to the Node's next calls come slowReply
// late: on one server, a proxy the Node dials holds back what the server sends for
// slowReply (the server ran each command already, and the connection stays open); on a
// cluster, CLIENT PAUSE WRITE holds the scripts and writes on every master for slowReply
// before they run.
func slowed(t *testing.T, e *env) (addr, nodeAddr string, slow func()) {
	t.Helper()
	addr = e.server(t)
	if e.kind == RedisCluster {
		ms := strconv.FormatInt(slowReply.Milliseconds(), 10)
		return addr, addr, func() { adminAll(t, addr, "CLIENT", "PAUSE", ms, "WRITE") }
	}
	px := startProxy(t, addr)
	return addr, px.addr(), func() {
		px.hold()
		time.AfterFunc(slowReply, px.release)
	}
}

// runs returns the counting script's count in key.
func runs(t *testing.T, addr, key string) int64 {
	t.Helper()
	s, _ := admin(t, addr, "GET", key).(string)
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// resendChecks are the evalsha group's checks that a Node's own retries never run a script
// twice: after an error reply, and while a slow reply is on its way.
func resendChecks() []check {
	return []check{
		{"error-runs-once", func(t *testing.T, e *env) {
			addr := e.server(t)
			n := e.node(t, addr)
			key := core.NewKeys(prefix(t), "counting").Lock
			failing := core.NewScript("conformance-write-then-fail", "redis.call('INCR', KEYS[1]) return redis.error_reply('CONFORMANCE deliberate error after a write')")
			got, err := eval(n, failing, []string{key})
			require.Error(t, err, "a script that wrote and then replied with an error gave reply %s and no error", format(got))
			if r := runs(t, addr, key); r != 1 {
				t.Fatalf("a script that counts its runs and then replies with an error ran %d times for one Eval (error %q): %s; a backend that retries on any error runs a script that wrote and then failed twice", r, err, resendRule)
			}
		}},
		{"slow-reply-runs-once", func(t *testing.T, e *env) {
			addr, nodeAddr, slow := slowed(t, e)
			n := e.node(t, nodeAddr)
			key := core.NewKeys(prefix(t), "counting").Lock
			mustEval(t, n, counting, []string{key}) // a connection, and the script on the server
			slow()
			start := time.Now()
			got, err := eval(n, counting, []string{key})
			elapsed := time.Since(start).Round(time.Millisecond)
			require.NoError(t, err, "Eval of a script whose reply came %v late, within a context of %v, failed after %v: a Node must wait for a slow reply as long as ctx allows", slowReply, waitBound, elapsed)
			if r := runs(t, addr, key); r != 2 {
				t.Fatalf("Eval of a script that counts its runs, whose reply came %v late, ran it %d times (reply %s after %v), want once: the Node sent it again while the first request was still waiting for its reply (after a read timeout of its own?): %s", slowReply, r-1, format(got), elapsed, resendRule)
			}
			assert.Equal(t, []int64{2}, got, "Eval of the counting script replied %s after %v, want {2}", format(got), elapsed)
		}},
	}
}
