package simnet_test

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock/internal/simnet"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPipeWritesDoNotWaitForTheReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := simnet.Pipe()
		defer a.Close()
		for range 100 {
			_, err := a.Write([]byte("0123456789"))
			require.NoError(t, err)
		}
		buf := make([]byte, 2000)
		n, err := io.ReadAtLeast(b, buf, 1000)
		require.NoError(t, err)
		assert.Equal(t, 1000, n)
		require.NoError(t, b.Close())
		_, err = a.Read(buf)
		assert.ErrorIs(t, err, io.EOF, "the other end closed")
		_, err = a.Write([]byte("x"))
		assert.Error(t, err)
	})
}

func TestPipeReadHonoursItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := simnet.Pipe()
		defer a.Close()
		defer b.Close()
		start := time.Now()
		require.NoError(t, a.SetReadDeadline(start.Add(3*time.Second)))
		_, err := a.Read(make([]byte, 1))
		assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
		assert.Equal(t, 3*time.Second, time.Since(start))

		// A write wakes a waiting read; a new deadline applies to a read already waiting.
		require.NoError(t, a.SetReadDeadline(time.Time{}))
		got := make(chan string)
		go func() {
			buf := make([]byte, 8)
			n, _ := a.Read(buf)
			got <- string(buf[:n])
		}()
		time.Sleep(time.Second)
		_, _ = b.Write([]byte("hi"))
		assert.Equal(t, "hi", <-got)
		go func() {
			_, err := a.Read(make([]byte, 1))
			got <- err.Error()
		}()
		synctest.Wait()
		require.NoError(t, a.SetReadDeadline(time.Now().Add(time.Second)))
		assert.Contains(t, <-got, "timeout")
	})
}

func TestKeysExpireOnTheBubblesClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := simnet.NewServer(t, "10.0.0.1:6379")
		c := simnet.Client(t, s)
		ctx := context.Background()
		require.NoError(t, c.Set(ctx, "k", "v", 30*time.Second).Err())
		time.Sleep(30*time.Second - time.Millisecond)
		assert.Equal(t, int64(1), c.Exists(ctx, "k").Val())
		assert.Equal(t, time.Millisecond, s.Miniredis().TTL("k"))
		time.Sleep(time.Millisecond)
		assert.Equal(t, int64(0), c.Exists(ctx, "k").Val())
	})
}

func TestInfoServerAnswersAsRedisServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := simnet.NewServer(t, "10.0.0.1:6379")
		c := simnet.Client(t, s)
		ctx := context.Background()
		field := func(name string) string {
			// From Lua, as the restart guard and the identity check read it.
			v, err := c.Eval(ctx, "return redis.call('INFO', 'server')", nil).Text()
			require.NoError(t, err)
			direct, err := c.Info(ctx, "server").Result()
			require.NoError(t, err)
			require.Equal(t, v, direct)
			for _, line := range strings.Split(v, "\r\n") {
				if k, val, ok := strings.Cut(line, ":"); ok && k == name {
					return val
				}
			}
			t.Fatalf("no %s in %q", name, v)
			return ""
		}
		assert.Equal(t, strconv.Itoa(int(simnet.DefaultUptime/time.Second)), field("uptime_in_seconds"))
		id := field("run_id")
		assert.Len(t, id, 40)
		assert.Equal(t, s.RunID(), id)
		time.Sleep(1500 * time.Millisecond)
		assert.Equal(t, strconv.Itoa(int(simnet.DefaultUptime/time.Second)+1), field("uptime_in_seconds"))
		assert.Equal(t, simnet.DefaultUptime+time.Second, s.Uptime())

		s.SetInfo(false)
		_, err := c.Eval(ctx, "return redis.call('INFO', 'server')", nil).Text()
		assert.ErrorContains(t, err, "not supported", "miniredis's own INFO has no server section")
		s.SetInfo(true)

		require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
		s.Crash()
		assert.False(t, s.Up())
		assert.Empty(t, s.RunID())
		_, err = s.Dial(ctx, "tcp", s.Addr())
		assert.ErrorIs(t, err, syscall.ECONNREFUSED)
		assert.Error(t, c.Get(ctx, "k").Err(), "a crashed server answers nothing")

		s.Restart()
		assert.True(t, s.Up())
		assert.Equal(t, "0", field("uptime_in_seconds"))
		assert.NotEqual(t, id, field("run_id"), "a new process, a new run_id")
		assert.Equal(t, s.RunID(), field("run_id"))
		assert.ErrorIs(t, c.Get(ctx, "k").Err(), redis.Nil, "the data was lost")
	})
}

func TestServersAreDistinct(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		servers := simnet.NewServers(t, 3)
		ids := map[string]bool{}
		for i, s := range servers {
			assert.Equal(t, "10.0.0."+strconv.Itoa(i+1)+":6379", s.Addr())
			ids[s.RunID()] = true
		}
		assert.Len(t, ids, 3)
		ctx := context.Background()
		require.NoError(t, simnet.Client(t, servers[0]).Set(ctx, "k", "v", 0).Err())
		assert.Equal(t, int64(0), simnet.Client(t, servers[1]).Exists(ctx, "k").Val())
	})
}

func TestClockOffset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := simnet.NewServer(t, "10.0.0.1:6379")
		c := simnet.Client(t, s)
		ctx := context.Background()
		require.NoError(t, c.Set(ctx, "k", "v", 10*time.Second).Err())
		s.SetClockOffset(4 * time.Second) // the server's clock jumps ahead
		assert.Equal(t, 6*time.Second, s.Miniredis().TTL("k"))
		time.Sleep(6*time.Second - time.Millisecond)
		assert.Equal(t, int64(1), c.Exists(ctx, "k").Val())
		time.Sleep(time.Millisecond)
		assert.Equal(t, int64(0), c.Exists(ctx, "k").Val(), "expired by the server's clock, 4 s early")
		tm, err := c.Time(ctx).Result()
		require.NoError(t, err)
		assert.Equal(t, time.Now().Add(4*time.Second).UnixMicro(), tm.UnixMicro())
	})
}

func TestPubSubOverTheNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := simnet.NewServer(t, "10.0.0.1:6379")
		n := simnet.Node(t, s)
		ctx := context.Background()
		got := make(chan string, 10)
		stop, err := n.Subscribe(ctx, "ch", func(m string) { got <- m })
		require.NoError(t, err)
		defer stop()
		c := simnet.Client(t, s)
		for i := range 5 { // several messages in a row: a net.Pipe would deadlock here
			require.NoError(t, c.Publish(ctx, "ch", strconv.Itoa(i)).Err())
		}
		for i := range 5 {
			assert.Equal(t, strconv.Itoa(i), <-got)
		}
	})
}

func TestHangHoldsRequestsBackUntilResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := simnet.NewServer(t, "10.0.0.1:6379")
		c := simnet.Client(t, s, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
		ctx := context.Background()
		require.NoError(t, c.Set(ctx, "k", "v", 0).Err()) // a connection made before
		s.Hang()
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		start := time.Now()
		assert.Error(t, c.Get(short, "k").Err(), "a hung server answered")
		assert.Equal(t, time.Second, time.Since(start))

		// Held back for 2 s (within go-redis's 3 s read timeout), then answered.
		got := make(chan string, 1)
		start = time.Now()
		go func() { got <- c.Get(ctx, "k").Val() }()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Empty(t, got, "a hung server answered")
		s.Resume()
		assert.Equal(t, "v", <-got)
		assert.Equal(t, 2*time.Second, time.Since(start))
	})
}
