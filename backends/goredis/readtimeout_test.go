package goredis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadTimeoutNeverResends: a call whose reply does not come within the client's
// ReadTimeout (a proxy holds the server's replies back; the server ran the command) fails,
// and is not sent again while the caller's context goes on: go-redis resends it on a new
// connection, which ran the counting script again. With and without ContextTimeoutEnabled.
func TestReadTimeoutNeverResends(t *testing.T) {
	t.Parallel()
	if !redistest.Available() {
		t.Skip("redis-server not on PATH")
	}
	const readTimeout = 300 * time.Millisecond
	counting := core.NewScript("counting", "return {redis.call('INCR', KEYS[1])}")
	for _, ctxTimeouts := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", ctxTimeouts), func(t *testing.T) {
			srv := redistest.Start(t)
			px := redistest.Holding(t, srv.Addr())
			rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: readTimeout, ContextTimeoutEnabled: ctxTimeouts})
			node := goredis.New(rdb)
			t.Cleanup(func() { _ = node.Close(); _ = rdb.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := node.Eval(ctx, counting, []string{"warm"}) // a connection, and the script
			require.NoError(t, err)
			// warmPool leaves several idle connections in the pool, so that a resend needs no
			// handshake (whose reply the proxy would hold back too).
			warmPool := func() {
				px.Hold(50 * time.Millisecond) // each call waits: each takes a connection of its own
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						_, err := node.Eval(ctx, counting, []string{"warm"})
						assert.NoError(t, err)
					})
				}
				wg.Wait()
			}
			get := func(key string) string {
				v, err := srv.Do("GET", key)
				require.NoError(t, err)
				s, _ := v.(string)
				return s
			}

			warmPool()
			px.Hold(1200 * time.Millisecond)
			v, err := node.Eval(ctx, counting, []string{"count"})
			assert.Error(t, err, "Eval replied %v although its reply was held back longer than ReadTimeout %v", v, readTimeout)
			time.Sleep(100 * time.Millisecond) // a resend still on its way
			assert.Equal(t, "1", get("count"), "the counting script ran more than once for one Eval: the call was sent again after its read timeout")

		})
	}
}
