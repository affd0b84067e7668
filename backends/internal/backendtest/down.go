package backendtest

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// StartsWithAServerDown: a program starts with one of its three masters down. newNode
// makes each node, as a program would at start (the third while its server is down), and
// must not fail for it. A lock is then taken and released on the other two (a quorum); the
// down node's calls fail with an error that says the connection was refused; once its
// server is back, the node answers by itself.
func StartsWithAServerDown(t *testing.T, newNode func(t *testing.T, addr string) core.Node) {
	if !redistest.Available() {
		t.Skip("redis-server not on PATH")
	}
	servers := redistest.StartN(t, 3)
	down := servers[2]
	down.Kill()
	nodes := make([]core.Node, len(servers))
	for i, s := range servers {
		nodes[i] = newNode(t, s.Addr())
		require.NotNil(t, nodes[i], "the node of %s", s.Addr())
	}
	cl, err := core.NewCluster(nodes)
	require.NoError(t, err)
	l := &core.Lock{Keys: core.NewKeys("test:", "down-at-start"), TTL: 10 * time.Second, NodeTimeout: 2 * time.Second, DriftFactor: 0.01}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h, err := cl.Acquire(ctx, l)
	require.NoError(t, err, "Acquire over 3 nodes, one of them down since the start")
	require.NoError(t, cl.Release(ctx, h))

	script := core.NewScript("one", "return {1}")
	// A refused dial fails at once; a driver that dials again until its context ends (go-redis)
	// returns at the deadline.
	callCtx, callCancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = nodes[2].Eval(callCtx, script, []string{"k"})
	callCancel()
	require.Error(t, err, "Eval on the node whose server is down")
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "the down node's error must give the cause: %v", err)

	down.Restart()
	assert.Eventually(t, func() bool {
		callCtx, callCancel := context.WithTimeout(ctx, 2*time.Second)
		defer callCancel()
		got, err := nodes[2].Eval(callCtx, script, []string{"k"})
		return err == nil && len(got) == 1 && got[0] == 1
	}, 15*time.Second, 50*time.Millisecond, "the node whose server came back never answered")
}
