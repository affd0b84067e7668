package redlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setCounting is a go-redis Node that counts its SetNX calls, and those that were refused.
type setCounting struct {
	*goredis.Node
	sets, refused atomic.Int64
}

func (n *setCounting) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	n.sets.Add(1)
	ok, err := n.Node.SetNX(ctx, key, value, ttl)
	if err == nil && !ok {
		n.refused.Add(1)
	}
	return ok, err
}

// TestMutexRemembersContention: a Mutex whose Lock had to wait or failed, or whose TryLock
// failed, starts its next Lock with the acquire script (which queues it at once); one whose
// Lock or TryLock took a free lock at once starts with a plain SET NX
// (core.TestFirstAttemptSetsNX has the details).
func TestMutexRemembersContention(t *testing.T) {
	_, servers := miniNodes(t, 3)
	counted := make([]*setCounting, len(servers))
	nodes := make([]redlock.Node, len(servers))
	for i, s := range servers {
		counted[i] = &setCounting{Node: goredisNode(t, s.Addr()).(*goredis.Node)}
		nodes[i] = counted[i]
	}
	sets := func() (n int64) {
		for _, c := range counted {
			n += c.sets.Load()
		}
		return n
	}
	refused := func() (n int64) {
		for _, c := range counted {
			n += c.refused.Load()
		}
		return n
	}
	// Not a test of timeouts: under load a 100 ms call can time out, and a node whose first
	// call failed is not known yet, so it is sent the script instead of SET NX.
	client := newClient(t, nodes, redlock.WithNodeTimeout(time.Second))
	// A Client's first acquisition on each node runs the acquire script, which says which
	// server the node reaches (see core's identity): make it here.
	l, err := client.TryAcquire(ctxT(t, 5*time.Second), "identify")
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))
	require.Zero(t, sets())
	m := client.NewMutex("contention")
	others := make([]redlock.Node, len(servers)) // not counted
	for i, s := range servers {
		others[i] = goredisNode(t, s.Addr())
	}
	other := newClient(t, others, redlock.WithNodeTimeout(time.Second)).NewMutex("contention")

	cycle := func(m *redlock.Mutex) { // assert, not require: it runs on another goroutine too
		if assert.NoError(t, m.LockContext(context.Background())) {
			assert.NoError(t, m.UnlockContext(context.Background()))
		}
	}
	cycle(m) // free: a plain SET NX on each node
	assert.Equal(t, int64(3), sets(), "an uncontended Lock's first attempt")

	other.Lock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		cycle(m) // held: its SET NX is refused, and it waits
	}()
	// Unlock only once a quorum of the nodes refused that SET NX: an Unlock that overtook
	// them would let the Lock take the lock at once, uncontended.
	require.Eventually(t, func() bool { return sets() == 6 && refused() >= 2 }, 5*time.Second, time.Millisecond, "the waiting Lock's first attempt")
	other.Unlock()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting Lock did not get the lock")
	}

	cycle(m) // free again, but the last Lock had to wait: the script first
	assert.Equal(t, int64(6), sets(), "a Lock after a contended one sent SET NX")
	cycle(m) // the last Lock took the lock at once: SET NX again
	assert.Equal(t, int64(9), sets(), "a Lock after an uncontended one")

	other.Lock()
	assert.False(t, m.TryLock(), "TryLock of a held lock")
	other.Unlock()
	cycle(m) // the last TryLock failed: the script first
	assert.Equal(t, int64(9), sets(), "a Lock after a failed TryLock sent SET NX")
	require.True(t, m.TryLock(), "TryLock of a free lock")
	require.NoError(t, m.UnlockContext(context.Background()))
	cycle(m) // the last TryLock succeeded: SET NX again
	assert.Equal(t, int64(12), sets(), "a Lock after a successful TryLock")

	other.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	assert.Error(t, m.LockContext(ctx), "LockContext of a held lock, until ctx ends")
	cancel()
	other.Unlock()
	cycle(m) // the last LockContext failed: the script first
	assert.Equal(t, int64(15), sets(), "a Lock after a failed one: its own first attempt, then the script")
}
