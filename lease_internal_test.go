package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/require"
)

// TestErrSaysExpiredWhenItsTimerIsLate: Err reports ErrExpired once Until has passed, even
// if the lease's timer has not run yet (a busy process runs it late), and Done is closed.
func TestErrSaysExpiredWhenItsTimerIsLate(t *testing.T) {
	c, err := New([]Node{nodeFor(t, miniredis.RunT(t).Addr())}, WithTTL(time.Second), WithNodeTimeout(500*time.Millisecond)) // a load cannot miss 500 ms
	require.NoError(t, err)
	l, err := c.TryAcquire(context.Background(), "late")
	require.NoError(t, err)
	l.mu.Lock()
	l.timer.Stop() // as if the timer were late
	l.mu.Unlock()
	time.Sleep(time.Until(l.Until()) + 10*time.Millisecond)
	require.ErrorIs(t, l.Err(), ErrExpired)
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is open after Err said the lease expired")
	}
}
