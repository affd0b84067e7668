package simnet_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"testing/synctest"

	"github.com/go-redlock/redlock/internal/simnet"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roundTrip writes each of parts to c in turn and returns the first line of the reply.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, parts ...string) string {
	t.Helper()
	for _, p := range parts {
		_, err := c.Write([]byte(p))
		require.NoError(t, err)
	}
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	return line
}

func TestCommandsSplitOrStateful(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := simnet.NewServer(t, "10.0.0.1:6379")
		ctx := context.Background()
		c, err := s.Dial(ctx, "tcp", s.Addr())
		require.NoError(t, err)
		defer c.Close()
		r := bufio.NewReader(c)
		assert.Equal(t, "+PONG\r\n", roundTrip(t, c, r, "*1\r\n$4\r\nPING\r\n"))
		assert.Equal(t, "+PONG\r\n", roundTrip(t, c, r, "*1\r\n$4\r\nPI", "NG\r\n"), "a command in two writes")
		assert.Equal(t, "+OK\r\n", roundTrip(t, c, r, "*2\r\n$6\r\nSELECT\r\n$1\r\n1\r\n"))
		assert.Equal(t, "+OK\r\n", roundTrip(t, c, r, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"))
		v, _ := s.Miniredis().DB(1).Get("k")
		assert.Equal(t, "v", v, "SET after SELECT 1")
		assert.False(t, s.Miniredis().Exists("k"))

		// Several commands in one write, the last of which changes the connection's state.
		_, err = c.Write([]byte("*1\r\n$4\r\nPING\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n*3\r\n$3\r\nSET\r\n$1\r\nj\r\n$1\r\nw\r\n"))
		require.NoError(t, err)
		for _, want := range []string{"+PONG\r\n", "+OK\r\n", "+OK\r\n"} {
			line, err := r.ReadString('\n')
			require.NoError(t, err)
			assert.Equal(t, want, line)
		}
		v, _ = s.Miniredis().DB(2).Get("j")
		assert.Equal(t, "w", v)

		// A transaction, and a database chosen at the connection's start, through go-redis.
		rc := simnet.Client(t, s, func(o *redis.Options) { o.DB = 3 })
		_, err = rc.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "a", "1", 0)
			p.Incr(ctx, "a")
			return nil
		})
		require.NoError(t, err)
		v, _ = s.Miniredis().DB(3).Get("a")
		assert.Equal(t, "2", v)
	})
}

func TestCrashClosesEveryConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := simnet.NewServer(t, "10.0.0.1:6379")
		ctx := context.Background()
		var conns []net.Conn
		for _, first := range []string{"*1\r\n$4\r\nPING\r\n", "*1\r\n$5\r\nMULTI\r\n"} { // served by the writer, and not
			c, err := s.Dial(ctx, "tcp", s.Addr())
			require.NoError(t, err)
			defer c.Close()
			r := bufio.NewReader(c)
			roundTrip(t, c, r, first)
			conns = append(conns, c)
		}
		s.Crash()
		for i, c := range conns {
			_, err := io.ReadAll(c)
			assert.NoError(t, err, "connection %d: the server's end closed", i)
			_, err = c.Write([]byte("*1\r\n$4\r\nPING\r\n"))
			assert.Error(t, err, "connection %d", i)
		}
	})
}
