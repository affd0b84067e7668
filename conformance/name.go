package conformance

import (
	"testing"

	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/assert"
)

// stringChecks: String names the node: core puts it in every error about the node. On a
// cluster, "distinct" starts a second cluster (of one master) beside the shared one.
func stringChecks() []check {
	return []check{
		{"non-empty", func(t *testing.T, e *env) {
			n := e.node(t, e.server(t))
			assert.NotEmpty(t, n.String(), "String() of a Node is empty: it must name the node (its address, say), since core puts it in every error about the node")
		}},
		{"distinct", func(t *testing.T, e *env) {
			if e.kind == RedisCluster {
				// A second cluster, of one master: its Node must not be named as the first's.
				other := redistest.StartCluster(t, 1)
				a, b := e.node(t, e.server(t)), e.clusterNode(t, other.Addrs())
				assert.NotEqual(t, a.String(), b.String(), "the Nodes of two separate clusters, of masters %s and %s, have the same String() %q: it must tell nodes apart in errors (the masters' addresses, say)", e.cluster.Addrs(), other.Addrs(), a.String())
				return
			}
			addrs := e.servers(t, 2)
			a, b := e.node(t, addrs[0]), e.node(t, addrs[1])
			assert.NotEqual(t, a.String(), b.String(), "the Nodes of two servers, %s and %s, have the same String() %q: it must tell nodes apart in errors (the address, say)", addrs[0], addrs[1], a.String())
		}},
	}
}
