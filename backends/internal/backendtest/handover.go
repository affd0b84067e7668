package backendtest

import (
	"context"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/require"
)

// LockAndHandOver takes a lease through a Node of newNode, over the one server master,
// while a second Client's Mutex waits for it, and checks that the release hands the
// Mutex the lock over its pub/sub. It is for client kinds that reach master another way
// than by its address (a failover or sentinel client, say).
func LockAndHandOver(t *testing.T, master *redistest.Server, newNode func() core.Node) {
	t.Helper()
	client := func() *redlock.Client {
		// The server has just started: under the restart guard it would abstain for 30 s.
		c, err := redlock.New([]redlock.Node{newNode()}, redlock.WithNodeTimeout(time.Second), redlock.WithRestartGuard(0))
		require.NoError(t, err)
		return c
	}
	a, b := client(), client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := a.Acquire(ctx, "handover")
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		m := b.NewMutex("handover")
		err := m.LockContext(ctx)
		if err == nil {
			err = m.UnlockContext(ctx)
		}
		got <- err
	}()
	require.Eventually(t, func() bool {
		n, err := master.Do("ZCARD", core.NewKeys("redlock:", "handover").Queue)
		return err == nil && n == int64(1)
	}, 10*time.Second, time.Millisecond, "the waiter did not queue")
	require.NoError(t, l.Release(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not handed the lock")
	}
}
