package valkey_test

import (
	"testing"

	"github.com/go-redlock/redlock/backends/internal/backendtest"
	rlvalkey "github.com/go-redlock/redlock/backends/valkey"
	"github.com/valkey-io/valkey-go"
)

// TestLazy: a Lazy starts while its server is down, dials at most once a second, refuses a
// cluster, an option without InitAddress and a wrong password (see backendtest.Lazy).
func TestLazy(t *testing.T) {
	t.Parallel()
	backendtest.Lazy(t, func(addrs []string, password string) backendtest.LazyNode {
		return rlvalkey.NewLazy(valkey.ClientOption{InitAddress: addrs, Password: password, DisableCache: true})
	})
}
