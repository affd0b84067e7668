package valkey_test

import (
	"strings"
	"sync"
	"testing"

	rlvalkey "github.com/go-redlock/redlock/backends/valkey"
	"github.com/go-redlock/redlock/conformance"
	"github.com/go-redlock/redlock/core"
	"github.com/valkey-io/valkey-go"
)

// TestConformance runs the shared conformance suite on the valkey-go Node: on miniredis, on
// real redis-server processes, and on a real 3-master Redis Cluster through valkey-go's
// cluster client (no Valkey server is packaged here; see the package doc).
func TestConformance(t *testing.T) {
	t.Parallel()         // beside the other tests: the package stays within a minute
	var clients sync.Map // core.Node → the func that closes its driver client
	conformance.Run(t, conformance.Harness{
		CloseClient: func(_ testing.TB, n core.Node) {
			close, _ := clients.Load(n)
			close.(func())()
		},
		NewNode: func(t testing.TB, addr string) core.Node {
			// miniredis has neither client-side caching nor CLUSTER commands; a standalone
			// redis-server needs neither, so these options suit both. miniredis also runs no
			// command on a subscribed RESP3 connection, as the Node's own is in a waiter.
			c, err := valkey.NewClient(valkey.ClientOption{
				InitAddress:       []string{addr},
				AlwaysRESP2:       strings.Contains(t.Name(), "miniredis"),
				DisableCache:      true,
				ForceSingleClient: true,
			})
			if err != nil {
				t.Fatalf("valkey.NewClient(%s): %v", addr, err)
			}
			t.Cleanup(c.Close)
			node := rlvalkey.New(c)
			t.Cleanup(func() { _ = node.Close() }) // runs first: the Node before its client
			clients.Store(node, c.Close)
			return node
		},
		NewClusterNode: func(t testing.TB, addrs []string) core.Node {
			c, err := valkey.NewClient(valkey.ClientOption{InitAddress: addrs, DisableCache: true})
			if err != nil {
				t.Fatalf("valkey.NewClient(%s): %v", addrs, err)
			}
			t.Cleanup(c.Close)
			node := rlvalkey.New(c)
			t.Cleanup(func() { _ = node.Close() })
			clients.Store(node, c.Close)
			return node
		},
	})
}

// TestConformanceLazy runs the shared conformance suite on the Lazy node, which makes its
// client on first use, on miniredis: what a Lazy adds to the Node is the same on every
// server, and TestConformance runs the Node on redis-server and a cluster (which a Lazy
// refuses).
func TestConformanceLazy(t *testing.T) {
	t.Parallel() // beside the other tests: the package stays within a minute
	conformance.Run(t, conformance.Harness{
		Servers: []conformance.Server{conformance.Miniredis},
		NewNode: func(t testing.TB, addr string) core.Node {
			node := rlvalkey.NewLazy(valkey.ClientOption{
				InitAddress:       []string{addr},
				AlwaysRESP2:       true, // miniredis: see TestConformance
				DisableCache:      true,
				ForceSingleClient: true,
			})
			t.Cleanup(func() { _ = node.Close() })
			return node
		},
		// The Lazy owns its client: Close closes it.
		CloseClient: func(_ testing.TB, n core.Node) { _ = n.(*rlvalkey.Lazy).Close() },
	})
}
