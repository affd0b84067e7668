package core_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	miniserver "github.com/alicebob/miniredis/v2/server"
	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// upFor returns a miniredis server that reports, as redis-server does in INFO server, that
// it has been up for uptime seconds (miniredis itself has no server section).
func upFor(t *testing.T, uptime int) server {
	m := miniredis.RunT(t)
	m.Server().SetPreHook(func(c *miniserver.Peer, cmd string, args ...string) bool {
		if !strings.EqualFold(cmd, "INFO") {
			return false
		}
		c.WriteBulk(fmt.Sprintf("# Server\r\nrun_id:%040x\r\nuptime_in_seconds:%d\r\n", uptime+1, uptime))
		return true
	})
	return miniServer(t, m)
}

// TestPermitsAbstainAfterARestart: Y counts 1 permit, recorded on nodes A and C; A restarted
// empty, and B never got Y's record. X, counting 2, must not pass: A abstains under the
// restart guard, and C's dissent counts even when it comes after A's and B's answers.
func TestPermitsAbstainAfterARestart(t *testing.T) {
	k := core.NewKeys("p:", "sem")
	key := k.Lock + ":permits"
	a, b, c := upFor(t, 0), upFor(t, 1000), upFor(t, 1000)
	_, err := c.do("SET", key, "1", "PX", "60000") // Y's record; A's went with its restart
	require.NoError(t, err)
	var answers atomic.Int32
	open := make(chan struct{})
	answered := func() {
		if answers.Add(1) == 2 {
			close(open)
		}
	}
	cl, err := core.NewCluster([]core.Node{
		signalling{nodeOf(t, a.addr), answered},
		signalling{nodeOf(t, b.addr), answered},
		gated{nodeOf(t, c.addr), open}, // answers once A and B have
	})
	require.NoError(t, err)
	err = cl.Permits(context.Background(), k, 2, 10*time.Second, 30*time.Second)
	require.ErrorIs(t, err, core.ErrInvalid, "X counted 2 permits while Y's record of 1 stands on C")
	assert.ErrorContains(t, err, "has 1 permits")
}
