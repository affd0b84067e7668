package rueidis_test

import (
	"testing"

	"github.com/go-redlock/redlock/backends/internal/backendtest"
	rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
	"github.com/redis/rueidis"
)

// TestLazy: a Lazy starts while its server is down, dials at most once a second, refuses a
// cluster, an option without InitAddress and a wrong password (see backendtest.Lazy).
func TestLazy(t *testing.T) {
	t.Parallel()
	backendtest.Lazy(t, func(addrs []string, password string) backendtest.LazyNode {
		return rlrueidis.NewLazy(rueidis.ClientOption{InitAddress: addrs, Password: password, DisableCache: true})
	})
}
