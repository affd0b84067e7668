package rueidis_test

import (
	"testing"

	"github.com/go-redlock/redlock/backends/internal/backendtest"
	rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// TestSentinelClient: a rueidis client through a real Sentinel is a Node: a lease is taken
// and released through it, and a waiting Mutex is handed the lock over its pub/sub.
func TestSentinelClient(t *testing.T) {
	master := redistest.StartN(t, 1)[0]
	sentinel := redistest.StartSentinel(t, master.Addr())
	backendtest.LockAndHandOver(t, master, func() core.Node {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{sentinel}, Sentinel: rueidis.SentinelOption{MasterSet: "mymaster"}})
		require.NoError(t, err)
		t.Cleanup(rc.Close)
		n := rlrueidis.New(rc)
		t.Cleanup(func() { _ = n.Close() })
		return n
	})
}
