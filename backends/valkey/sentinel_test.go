package valkey_test

import (
	"testing"

	"github.com/go-redlock/redlock/backends/internal/backendtest"
	rlvalkey "github.com/go-redlock/redlock/backends/valkey"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"
)

// TestSentinelClient: a valkey-go client through a real Sentinel is a Node: a lease is
// taken and released through it, and a waiting Mutex is handed the lock over its pub/sub.
func TestSentinelClient(t *testing.T) {
	master := redistest.StartN(t, 1)[0]
	sentinel := redistest.StartSentinel(t, master.Addr())
	backendtest.LockAndHandOver(t, master, func() core.Node {
		vc, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{sentinel}, Sentinel: valkey.SentinelOption{MasterSet: "mymaster"}})
		require.NoError(t, err)
		t.Cleanup(vc.Close)
		n := rlvalkey.New(vc)
		t.Cleanup(func() { _ = n.Close() })
		return n
	})
}
