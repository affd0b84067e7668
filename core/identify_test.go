package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOneServerCountsOnce: the same Node twice is refused by NewCluster; two Nodes (two
// clients) that reach one server are found at the first acquisition, which fails at once
// with an error that names both, never granting a "majority" that one server gave.
func TestOneServerCountsOnce(t *testing.T) {
	servers := realServers(t, 2)
	n := nodeOf(t, servers[0].addr)
	_, err := core.NewCluster([]core.Node{n, nodeOf(t, servers[1].addr), n})
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.ErrorContains(t, err, "nodes 0 and 2 are the same Node")

	down := failingNode{}
	cl, err := core.NewCluster([]core.Node{n, nodeOf(t, servers[0].addr), down})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	l := lock("dup")
	_, err = cl.AcquireWait(ctx, l, patient)
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.True(t, core.Permanent(err))
	assert.ErrorContains(t, err, "reach the same server")
	assert.ErrorContains(t, err, servers[0].addr)
	assert.Less(t, time.Since(start), 2*time.Second, "a misconfiguration was retried")
	_, err = cl.Acquire(ctx, lock("dup2"))
	require.ErrorIs(t, err, core.ErrInvalid, "later acquisitions fail too")
	assert.Eventually(t, func() bool { return get(t, servers[0], l.Keys.Lock) == "" }, time.Second, time.Millisecond,
		"the refused attempt left its key")

	// Two servers, each reached once: no complaint.
	ok, err := core.NewCluster([]core.Node{nodeOf(t, servers[0].addr), nodeOf(t, servers[1].addr), down})
	require.NoError(t, err)
	_, err = ok.Acquire(ctx, lock("fine"))
	require.NoError(t, err)
}

// failingNode is a node whose every call fails, as a server that is down.
type failingNode struct{}

func (failingNode) Eval(context.Context, *core.Script, []string, ...string) ([]int64, error) {
	return nil, errors.New("dial tcp: connection refused")
}
func (failingNode) String() string { return "down:1" }

// gated is a Node whose calls wait until open is closed.
type gated struct {
	core.Node
	open <-chan struct{}
}

func (n gated) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	<-n.open
	return n.Node.Eval(ctx, s, keys, args...)
}

// signalling is a Node that calls answered as each of its calls returns.
type signalling struct {
	core.Node
	answered func()
}

func (n signalling) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	defer n.answered()
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestOneServerCountsOnceAtTheFirstAcquisition: of three nodes, two reach one server. The
// first acquisition fails with the misconfiguration even when the two distinct servers
// grant it before the duplicate answers: while some node is not yet identified, an
// acquisition that won hears every node out before it counts its win.
func TestOneServerCountsOnceAtTheFirstAcquisition(t *testing.T) {
	servers := realServers(t, 2)
	var answers atomic.Int32
	open := make(chan struct{})
	answered := func() {
		if answers.Add(1) == 2 {
			close(open)
		}
	}
	cl, err := core.NewCluster([]core.Node{
		signalling{nodeOf(t, servers[0].addr), answered},
		gated{nodeOf(t, servers[0].addr), open}, // answers once the other two have
		signalling{nodeOf(t, servers[1].addr), answered},
	})
	require.NoError(t, err)
	l := lock("dup-first")
	l.NodeTimeout = 10 * time.Second // nothing here waits for a timeout
	_, err = cl.Acquire(context.Background(), l)
	require.ErrorIs(t, err, core.ErrInvalid, "the first acquisition counted one server twice")
	assert.ErrorContains(t, err, "reach the same server")
}
