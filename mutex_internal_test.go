package redlock

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	rlgoredis "github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/internal/redistest"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nodeFor returns a go-redis Node for addr, closed at cleanup.
func nodeFor(t *testing.T, addr string) Node {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	n := rlgoredis.New(rdb)
	t.Cleanup(func() { _ = n.Close(); _ = rdb.Close() })
	return n
}

// TestHoldingsStartBeforeTheyArePublished: whatever finds a Mutex's holding (Lost, Unlock,
// the holding's own timer) must find it started (its Until set), or it ends that holding
// as expired. The test runs the current holding's timer function without pause while the
// Mutex locks and unlocks; the race detector caught the unsynchronised start, and the zero
// Until lost the lock.
func TestHoldingsStartBeforeTheyArePublished(t *testing.T) {
	t.Parallel() // see bubble_test.go
	s := miniredis.RunT(t)
	c, err := New([]Node{nodeFor(t, s.Addr())}, WithNodeTimeout(5*time.Second)) // nothing here is timed
	require.NoError(t, err)
	m := c.NewMutex("ticks")
	require.NoError(t, m.LockContext(context.Background()))
	require.NoError(t, m.UnlockContext(context.Background())) // the timer exists from the first holding
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				if l := m.x.holding(); l != nil {
					l.tick()
				}
				runtime.Gosched() // a spin that keeps a core would slow the package's other tests
			}
		}
	}()
	lost := 0
	for range 300 {
		m.Lock()
		select {
		case <-m.Lost():
			lost++
		default:
		}
		_ = m.UnlockContext(context.Background())
	}
	close(stop)
	wg.Wait()
	assert.Zero(t, lost, "holdings were lost as soon as they were made")
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLongWaitsAreLogged: a Lock that cannot get the lock for other reasons than a holder
// says why at Warn, once it has waited warnAfter and then at most every warnEvery: on
// fresh servers under the restart guard (how long it still holds), and through an error no
// retry can fix (which node, and what), through which Lock goes on while LockContext gives
// up at once.
func TestLongWaitsAreLogged(t *testing.T) {
	servers := redistest.StartN(t, 3)
	nodes := make([]Node, len(servers))
	for i, s := range servers {
		nodes[i] = nodeFor(t, s.Addr())
	}
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	c, err := New(nodes, WithRestartGuard(30*time.Second), WithLogger(logger))
	require.NoError(t, err)
	c.opts.warnAfter, c.opts.warnEvery = 200*time.Millisecond, time.Hour

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	require.ErrorIs(t, c.NewMutex("guarded").LockContext(ctx), context.DeadlineExceeded)
	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, "still waiting"), "one warning, then none for warnEvery: %s", out)
	assert.Contains(t, out, "level=WARN")
	assert.Contains(t, out, "name=guarded")
	assert.Contains(t, out, "restart guard")
	assert.Contains(t, out, "for another")

	// A key of the wrong type: every node fails the acquire script for good.
	c, err = New(nodes, WithRestartGuard(0), WithLogger(logger), WithRetry(time.Millisecond, 20*time.Millisecond))
	require.NoError(t, err)
	c.opts.warnAfter, c.opts.warnEvery = 200*time.Millisecond, time.Hour
	for _, s := range servers {
		_, err := s.Do("HSET", "redlock:{wrongtype}", "f", "v")
		require.NoError(t, err)
	}
	start := time.Now()
	err = c.NewMutex("wrongtype").LockContext(context.Background())
	require.Error(t, err)
	assert.Less(t, time.Since(start), time.Second, "LockContext retried a permanent error")
	assert.ErrorContains(t, err, "WRONGTYPE")
	named := false
	for _, s := range servers {
		named = named || strings.Contains(err.Error(), s.Addr()+": WRONGTYPE")
	}
	assert.True(t, named, "the error does not name the node: %v", err)

	logs.mu.Lock()
	logs.b.Reset()
	logs.mu.Unlock()
	var locked atomic.Bool
	m := c.NewMutex("wrongtype")
	go func() {
		m.Lock()
		locked.Store(true)
	}()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "WRONGTYPE") }, 5*time.Second, 10*time.Millisecond,
		"Lock said nothing of why it waits")
	assert.False(t, locked.Load())
	for _, s := range servers {
		_, err := s.Do("DEL", "redlock:{wrongtype}")
		require.NoError(t, err)
	}
	require.Eventually(t, locked.Load, 5*time.Second, time.Millisecond, "Lock did not go on once the error passed")
	m.Unlock()
}
