package redlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMutexAllLostStaysLocked: a Mutex over several names (and an RWMutex's writer side
// over several names) whose holding was lost stays locked until Unlock, as a Mutex of one
// name does: another goroutine's TryLock fails and its LockContext waits, even though the
// names are free on the nodes; the Unlock reports the loss and lets the waiter in; a
// second Unlock panics.
func TestMutexAllLostStaysLocked(t *testing.T) {
	type locker interface {
		LockContext(context.Context) error
		TryLock() bool
		UnlockContext(context.Context) error
		Lost() <-chan struct{}
	}
	for _, rw := range []bool{false, true} {
		t.Run(map[bool]string{false: "Mutex", true: "RWMutex"}[rw], func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				nodes, servers := simNodes(t, 3)
				c := closingClient(t, nodes, redlock.WithTTL(300*time.Millisecond))
				ctx := ctxT(t, time.Minute)
				var m locker = c.NewMutexAll([]string{"a", "b"})
				if rw {
					m = c.NewRWMutexAll([]string{"a", "b"})
				}
				require.NoError(t, m.LockContext(ctx))
				for _, s := range servers {
					s.Miniredis().Del(lockKey("a"))
					s.Miniredis().Del(lockKey("b"))
				}
				<-m.Lost()
				assert.False(t, m.TryLock(), "a locked Mutex whose holding was lost was locked again")
				locked := make(chan error, 1)
				go func() { locked <- m.LockContext(ctx) }()
				synctest.Wait()
				select {
				case err := <-locked:
					t.Fatalf("LockContext of a locked Mutex whose holding was lost returned %v", err)
				default:
				}
				require.ErrorIs(t, m.UnlockContext(ctx), redlock.ErrLost, "the first Unlock reports the loss")
				require.NoError(t, <-locked)
				require.NoError(t, m.UnlockContext(ctx))
				assert.Panics(t, func() { _ = m.UnlockContext(ctx) })
			})
		})
	}
}
