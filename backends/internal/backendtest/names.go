package backendtest

import (
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Names: a Node's name and its sharded pub/sub choice follow its client's mode: the
// server's address for a standalone client, "cluster(addr)" and SSUBSCRIBE for a cluster
// client. newNode builds the Node over a new client of the real server at addr, which the
// driver probes; the test closes the Node.
func Names(t *testing.T, newNode func(t *testing.T, addr string) core.Node) {
	single := Start(t, Redis)
	cluster := Start(t, Cluster)
	cases := []struct {
		name    string
		addr    string
		want    string
		sharded bool
	}{
		{"standalone", single.Addr, single.Addr, false},
		{"cluster", cluster.Addr, "cluster(" + cluster.Addr + ")", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			node := newNode(t, c.addr)
			assert.Equal(t, c.want, node.String())
			assert.Equal(t, c.sharded, node.(core.ShardedPubSub).ShardedPubSub())
			require.NoError(t, node.(interface{ Close() error }).Close())
		})
	}
}
