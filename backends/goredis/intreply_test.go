package goredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
)

// TestEvalIntegerReply: a script other than core's that replies an integer, not an array,
// makes Eval fail at once, with and without ContextTimeoutEnabled.
func TestEvalIntegerReply(t *testing.T) {
	addr := miniredis.RunT(t).Addr()
	for _, deadlines := range []bool{false, true} {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: deadlines})
		node := goredis.New(rdb)
		t.Cleanup(func() { _ = node.Close(); _ = rdb.Close() })
		for _, src := range []string{"return 0", "return 1", "return 2", "return -1"} {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			start := time.Now()
			got, err := node.Eval(ctx, core.NewScript("integer", src), []string{"k"})
			cancel()
			switch {
			case err == nil:
				t.Errorf("ContextTimeoutEnabled %v: Eval of %q replied %v and no error, want an error", deadlines, src, got)
			case errors.Is(err, context.DeadlineExceeded):
				t.Errorf("ContextTimeoutEnabled %v: Eval of %q failed with %v after %v: it waited for a reply that never comes", deadlines, src, err, time.Since(start).Round(time.Millisecond))
			}
		}
	}
}
