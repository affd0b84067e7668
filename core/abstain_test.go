package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecentServerAbstains: a server up for less than the restart guard abstains from every
// acquisition, whatever the script's path (one name or several, fenced or not, free), and
// takes nothing.
func TestRecentServerAbstains(t *testing.T) {
	servers := realServers(t, 1) // just started: up for far less than an hour
	cl := newCluster(t, servers)
	for _, tc := range []struct {
		name   string
		names  []string
		fenced bool
	}{{"one name", []string{"a"}, false}, {"one name, fenced", []string{"a"}, true}, {"two names", []string{"a", "b"}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := core.NewSetKeys("q:", tc.names)
			require.NoError(t, err)
			l := lockOn(servers, tc.names[0])
			l.Keys, l.Fence, l.Guard = k, tc.fenced, time.Hour
			_, err = cl.Acquire(context.Background(), l)
			require.ErrorIs(t, err, core.ErrRestarted)
			for _, name := range tc.names {
				assert.Equal(t, "", get(t, servers[0], core.NewKeys("q:", name).Lock), "%s was taken", name)
			}
		})
	}
}
