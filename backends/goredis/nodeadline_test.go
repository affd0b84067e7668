package goredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestEvalHonoursContextWithoutSocketDeadlines: with ReadTimeout and WriteTimeout -2, go-redis
// sets no deadline on its connections, ContextTimeoutEnabled or not; Eval against a server
// that never answers still returns at its context's deadline.
func TestEvalHonoursContextWithoutSocketDeadlines(t *testing.T) {
	for _, opt := range []redis.Options{
		{ReadTimeout: -2, ContextTimeoutEnabled: true},
		{WriteTimeout: -2, ReadTimeout: -2, ContextTimeoutEnabled: true},
	} {
		opt.Addr = redistest.Hung(t)
		rdb := redis.NewClient(&opt)
		node := goredis.New(rdb)
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			_, err := node.Eval(ctx, core.NewScript("one", "return {1}"), []string{"k"})
			done <- err
		}()
		returned := false
		select {
		case err := <-done:
			returned = true
			if err == nil {
				t.Errorf("ReadTimeout %v, WriteTimeout %v: Eval on a server that never answers returned no error", opt.ReadTimeout, opt.WriteTimeout)
			}
		case <-time.After(2 * time.Second):
			t.Errorf("ReadTimeout %v, WriteTimeout %v: Eval with a deadline 50ms away, on a server that never answers, had not returned after %v", opt.ReadTimeout, opt.WriteTimeout, time.Since(start).Round(time.Millisecond))
		}
		_ = node.Close()
		_ = rdb.Close() // ends a call still blocked on the connection
		if !returned {
			<-done
		}
	}
}
