package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	rlgoredis "github.com/go-redlock/redlock/backends/goredis"
	rlredigo "github.com/go-redlock/redlock/backends/redigo"
	rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
	rlvalkey "github.com/go-redlock/redlock/backends/valkey"
	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"
)

// TestClosedDriverClientsEndTheWait: a lock over a driver client that was closed fails at
// once with an error that matches ErrClosed and names the node, through each backend,
// instead of being retried until its context ends; Mutex.Lock goes on through it.
func TestClosedDriverClientsEndTheWait(t *testing.T) {
	addr := realServers(t, 1)[0].Addr()
	for _, c := range []struct {
		name string
		node func(t *testing.T) (node redlock.Node, closeDriver func())
	}{
		{"goredis", func(t *testing.T) (redlock.Node, func()) {
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			return rlgoredis.New(rdb), func() { _ = rdb.Close() }
		}},
		{"redigo", func(t *testing.T) (redlock.Node, func()) {
			pool := &redigo.Pool{DialContext: func(ctx context.Context) (redigo.Conn, error) {
				return redigo.DialContext(ctx, "tcp", addr)
			}}
			return rlredigo.New(pool, addr), func() { _ = pool.Close() }
		}},
		{"rueidis", func(t *testing.T) (redlock.Node, func()) {
			rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
			require.NoError(t, err)
			return rlrueidis.New(rc), rc.Close
		}},
		{"valkey", func(t *testing.T) (redlock.Node, func()) {
			vc, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}})
			require.NoError(t, err)
			return rlvalkey.New(vc), vc.Close
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			node, closeDriver := c.node(t)
			client := newClient(t, []redlock.Node{node})
			ctx := ctxT(t, 10*time.Second)
			l, err := client.Acquire(ctx, "closed-"+c.name)
			require.NoError(t, err)
			require.NoError(t, l.Release(ctx))
			closeDriver()

			start := time.Now()
			_, err = client.Acquire(ctx, "closed-"+c.name)
			require.ErrorIs(t, err, redlock.ErrClosed)
			assert.ErrorContains(t, err, node.String())
			assert.Less(t, time.Since(start), time.Second, "a closed client was retried")
			require.ErrorIs(t, client.NewMutex("closed-"+c.name).LockContext(ctx), redlock.ErrClosed)

			m := client.NewMutex("closed-" + c.name)
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer func() { _ = recover() }() // Lock must not return; it panics only if the Client closes
				m.Lock()
			}()
			select {
			case <-done:
				t.Fatal("Lock returned over a closed driver client")
			case <-time.After(300 * time.Millisecond):
			}
			require.NoError(t, client.Close())
			select {
			case <-done: // it panicked with ErrClosed at the Client's Close
			case <-time.After(5 * time.Second):
				t.Fatal("Lock did not end at the Client's Close")
			}
		})
	}
}
