package goredis

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOneBackgroundConnectionAtATime: however many calls time out while a connection is
// being made in the background (here to a server that accepts and never answers), the
// Node makes no second one; and that one ends within five times the budget of the call
// that timed out, however long the client's DialTimeout (5 s here), so Close's wait for it
// is bounded by that too.
func TestOneBackgroundConnectionAtATime(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var accepted atomic.Int32
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})

	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	n := New(rdb)
	// As after a call of 100 ms that timed out: the background connection gets 500 ms.
	start := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(100*time.Millisecond))
	defer cancel()
	warm := func() { n.warm(ctx, start) }
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(warm)
	}
	wg.Wait()
	require.Eventually(t, func() bool { return accepted.Load() >= 1 }, 5*time.Second, time.Millisecond, "no connection was made")
	for range 10 {
		warm()
	}
	time.Sleep(100 * time.Millisecond) // a second connection would have been accepted by now
	assert.Equal(t, int32(1), accepted.Load(), "more than one connection was made in the background at a time")
	require.NoError(t, n.Close())
	assert.Less(t, time.Since(start), 2*time.Second, "the background connection outlived its bound of 500 ms")
}
