package redlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/redlocktest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: the Clusters' cleanups close
// everything they started. It gives go-redis a logger that counts its failed dials (see
// TestGoRedisLogsNothing), before any client is used: redis.SetLogger is not safe while
// clients dial.
func TestMain(m *testing.M) {
	redis.SetLogger(&goredisLog)
	goleak.VerifyTestMain(m)
}

// dialCounter is a go-redis logger that counts the lines about failed dials, and passes
// every line on to the standard logger.
type dialCounter struct{ dials atomic.Int64 }

func (l *dialCounter) Printf(_ context.Context, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if strings.Contains(msg, "failed to dial") {
		l.dials.Add(1)
	}
	log.Print(msg)
}

// goredisLog is the go-redis logger of this package's tests (see TestMain).
var goredisLog dialCounter

var ctx = context.Background()

// TestOrdinaryTest uses the kit outside any bubble, on the real clock: every primitive
// works over it.
func TestOrdinaryTest(t *testing.T) {
	cluster := redlocktest.New(t)
	assert.Equal(t, 3, cluster.Len())
	client := cluster.Client()

	m := client.NewMutex("jobs")
	m.Lock()
	assert.False(t, cluster.Client().NewMutex("jobs").TryLock(), "held by the first Client")
	m.Unlock()

	lease, err := client.Acquire(ctx, "reports")
	require.NoError(t, err)
	assert.NotZero(t, lease.Token())
	require.NoError(t, lease.Release(ctx))

	require.NoError(t, client.Do(ctx, "do", func(context.Context) error { return nil }))

	rw := client.NewRWMutex("config")
	rw.RLock()
	assert.True(t, rw.TryRLock(), "readers share it")
	rw.RUnlock()
	rw.RUnlock()

	sem := client.NewSemaphore("pool", 2)
	a, err := sem.TryAcquire(ctx)
	require.NoError(t, err)
	b, err := sem.TryAcquire(ctx)
	require.NoError(t, err)
	_, err = sem.TryAcquire(ctx)
	assert.ErrorIs(t, err, redlock.ErrHeld)
	require.NoError(t, a.Release(ctx))
	require.NoError(t, b.Release(ctx))

	e := client.NewElection("leader")
	l, err := e.Campaign(ctx, "me")
	require.NoError(t, err)
	v, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "me", v)
	require.NoError(t, l.Release(ctx))
	assert.Empty(t, client.Unguarded(), "the servers report their uptime: every node is guarded")
}

// TestTTLFollowsTheBubblesClock: inside a synctest bubble, a 30 s lease lapses at exactly
// 30 s of the bubble's clock, which takes no real time.
func TestTTLFollowsTheBubblesClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := redlocktest.New(t)
		holder, other := cluster.Client(), cluster.Client()
		start := time.Now()
		lease, err := holder.TryAcquire(ctx, "report", redlock.WithTTL(30*time.Second))
		require.NoError(t, err)
		drift := 30*time.Second/100 + 2*time.Millisecond // WithDriftFactor's default, 0.01, and 2 ms
		assert.Equal(t, start.Add(30*time.Second-drift), lease.Until())

		<-lease.Done() // the bubble's clock runs to the lease's Until
		assert.ErrorIs(t, lease.Err(), redlock.ErrExpired)
		assert.Equal(t, 30*time.Second-drift, time.Since(start))

		// The servers' keys lapse at exactly 30 s, by the same clock.
		time.Sleep(drift - time.Millisecond)
		_, err = other.TryAcquire(ctx, "report")
		assert.ErrorIs(t, err, redlock.ErrHeld, "1 ms before the TTL ends")
		time.Sleep(time.Millisecond)
		next, err := other.TryAcquire(ctx, "report")
		require.NoError(t, err, "at the TTL's end")
		assert.Greater(t, next.Token(), lease.Token())
	})
}

// TestFail: a failed server's calls fail at once, with "connection refused"; a Client
// needs a quorum of the others.
func TestFail(t *testing.T) {
	for _, tc := range []struct {
		servers, failed int
		ok              bool
	}{
		{3, 1, true},
		{3, 2, false},
		{5, 2, true},
		{5, 3, false},
		{1, 1, false},
	} {
		t.Run(fmt.Sprintf("%d of %d", tc.failed, tc.servers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster := redlocktest.New(t, redlocktest.WithServers(tc.servers))
				client := cluster.Client()
				for i := range tc.failed {
					cluster.Server(i).Fail()
					assert.False(t, cluster.Server(i).Up())
				}
				lease, err := client.TryAcquire(ctx, "name")
				if tc.ok {
					require.NoError(t, err)
					require.NoError(t, lease.Release(ctx))
					return
				}
				var qe *redlock.QuorumError
				require.ErrorAs(t, err, &qe)
				assert.Len(t, qe.Errs, tc.failed)
				assert.ErrorContains(t, err, "10.0.0.1:6379")
			})
		})
	}
}

// TestRestartEmpty: servers that restart lose their locks; the restart guard keeps their
// nodes out until every lock they granted has expired, so no second owner gets in. Without
// the guard, one does.
func TestRestartEmpty(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []redlock.Option
		twice bool // a second owner gets the lock while the first holds it
	}{
		{"guard", nil, false},
		{"no guard", []redlock.Option{redlock.WithRestartGuard(0)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster := redlocktest.New(t)
				first, second := cluster.Client(tc.opts...), cluster.Client(tc.opts...)
				lease, err := first.TryAcquire(ctx, "name")
				require.NoError(t, err)
				cluster.Server(0).Restart()
				cluster.Server(1).Fail()
				cluster.Server(1).Restart()
				assert.True(t, cluster.Server(1).Up())

				_, err = second.TryAcquire(ctx, "name")
				if tc.twice {
					assert.NoError(t, err, "the restarted servers forgot the lock")
					assert.NoError(t, lease.Err(), "and its first owner still holds it")
					return
				}
				assert.ErrorIs(t, err, redlock.ErrRestarted)
				assert.ErrorContains(t, err, "10.0.0.1:6379")

				// The guard, 30 s by default, ends after the lease's TTL (10 s): then the
				// restarted nodes take part again.
				<-lease.Done()
				assert.ErrorIs(t, lease.Err(), redlock.ErrExpired)
				time.Sleep(31*time.Second - time.Since(lease.Until()))
				next, err := second.TryAcquire(ctx, "name")
				require.NoError(t, err)
				assert.Greater(t, next.Token(), lease.Token(), "tokens increase across the restart")
			})
		})
	}
}

// TestPause: a paused server's calls time out, each after the node timeout; on Resume it
// answers again, with its data.
func TestPause(t *testing.T) {
	for _, tc := range []struct {
		paused int
		ok     bool
	}{
		{1, true},
		{2, false},
	} {
		t.Run(fmt.Sprintf("%d of 3", tc.paused), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster := redlocktest.New(t)
				client := cluster.Client(redlock.WithNodeTimeout(250 * time.Millisecond))
				for i := range tc.paused {
					cluster.Server(i).Pause()
					assert.True(t, cluster.Server(i).Up())
				}
				start := time.Now()
				lease, err := client.TryAcquire(ctx, "name")
				if tc.ok {
					require.NoError(t, err)
					require.NoError(t, lease.Release(ctx))
				} else {
					assert.ErrorIs(t, err, redlock.ErrNodeTimeout)
					assert.ErrorContains(t, err, "10.0.0.2:6379")
					assert.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond, "the node timeout")
				}
				for i := range tc.paused {
					cluster.Server(i).Resume()
				}
				lease, err = client.TryAcquire(ctx, "name")
				require.NoError(t, err)
				require.NoError(t, lease.Release(ctx))
			})
		})
	}
}

// TestPartition: a partition cuts some Clients off a server, and the others still reach
// it: a Client cut off a majority cannot extend, and loses the lock, which another takes.
func TestPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := redlocktest.New(t)
		ttl := redlock.WithTTL(3 * time.Second)
		cut, whole := cluster.Client(ttl), cluster.Client(ttl)
		m := cut.NewMutex("name")
		m.Lock()
		cluster.Server(0).Partition(cut)
		cluster.Server(1).Partition(cut)

		start := time.Now()
		<-m.Lost() // its extensions time out on two of three nodes
		assert.Less(t, time.Since(start), 3*time.Second)
		w := whole.NewMutex("name")
		w.Lock() // once the cut holder's keys expire on the servers
		assert.GreaterOrEqual(t, time.Since(start), 3*time.Second-10*time.Millisecond)

		// The cut Client cannot reach a majority; once healed, it sees the holder.
		_, err := cut.TryAcquire(ctx, "other")
		assert.ErrorIs(t, err, redlock.ErrNodeTimeout)
		cluster.Server(0).Heal(cut)
		cluster.Server(1).Heal()
		_, err = cut.TryAcquire(ctx, "name")
		assert.ErrorIs(t, err, redlock.ErrHeld)
		w.Unlock()
		m.Unlock() // lost: Unlock lets go locally
	})
}

// TestPartitionEveryClient: Partition without Clients cuts every Client off the server,
// also those made after it.
func TestPartitionEveryClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := redlocktest.New(t, redlocktest.WithServers(1))
		before := cluster.Client()
		cluster.Server(0).Partition()
		after := cluster.Client()
		for _, c := range []*redlock.Client{before, after} {
			_, err := c.TryAcquire(ctx, "name")
			assert.ErrorIs(t, err, redlock.ErrNodeTimeout)
		}
		cluster.Server(0).Heal(after)
		_, err := before.TryAcquire(ctx, "name")
		assert.ErrorIs(t, err, redlock.ErrNodeTimeout, "still cut")
		lease, err := after.TryAcquire(ctx, "name")
		require.NoError(t, err, "healed")
		require.NoError(t, lease.Release(ctx))
	})
}

// TestExpire: Expire ends every holding of a name, of each primitive: its holder learns it
// at its next extension, and another owner takes the lock, with a higher token.
func TestExpire(t *testing.T) {
	for _, tc := range []struct {
		name string
		// hold takes the lock called name and returns a channel that closes when the
		// holding is lost.
		hold func(t *testing.T, c *redlock.Client, name string) <-chan struct{}
		// take takes the lock with another Client, once expired, and returns its token
		// (0 if it has none).
		take func(t *testing.T, c *redlock.Client, name string) error
	}{
		{"Mutex", func(t *testing.T, c *redlock.Client, name string) <-chan struct{} {
			m := c.NewMutex(name)
			m.Lock()
			return m.Lost()
		}, func(t *testing.T, c *redlock.Client, name string) error {
			_, err := c.TryAcquire(ctx, name)
			return err
		}},
		{"Lease", func(t *testing.T, c *redlock.Client, name string) <-chan struct{} {
			l, err := c.Acquire(ctx, name, redlock.WithAutoExtend(true))
			require.NoError(t, err)
			go func() {
				<-l.Done()
				assert.ErrorIs(t, l.Err(), redlock.ErrLost)
			}()
			return l.Done()
		}, func(t *testing.T, c *redlock.Client, name string) error {
			_, err := c.TryAcquire(ctx, name)
			return err
		}},
		{"Do", func(t *testing.T, c *redlock.Client, name string) <-chan struct{} {
			held, lost := make(chan struct{}), make(chan struct{})
			go func() {
				err := c.Do(ctx, name, func(ctx context.Context) error {
					close(held)
					<-ctx.Done()
					close(lost)
					return nil
				})
				assert.ErrorIs(t, err, redlock.ErrLost)
			}()
			<-held // else Expire could come before the lock is taken, and nothing would end it
			return lost
		}, func(t *testing.T, c *redlock.Client, name string) error {
			_, err := c.TryAcquire(ctx, name)
			return err
		}},
		{"RWMutex readers", func(t *testing.T, c *redlock.Client, name string) <-chan struct{} {
			rw := c.NewRWMutex(name)
			rw.RLock()
			rw.RLock()
			return rw.Lost()
		}, func(t *testing.T, c *redlock.Client, name string) error {
			if !c.NewRWMutex(name).TryLock() {
				return redlock.ErrHeld
			}
			return nil
		}},
		{"Semaphore", func(t *testing.T, c *redlock.Client, name string) <-chan struct{} {
			s := c.NewSemaphore(name, 2, redlock.WithAutoExtend(true))
			a, err := s.TryAcquire(ctx)
			require.NoError(t, err)
			_, err = s.TryAcquire(ctx)
			require.NoError(t, err)
			return a.Done()
		}, func(t *testing.T, c *redlock.Client, name string) error {
			s := c.NewSemaphore(name, 2)
			for range 2 {
				if _, err := s.TryAcquire(ctx); err != nil {
					return err
				}
			}
			return nil
		}},
		{"Election", func(t *testing.T, c *redlock.Client, name string) <-chan struct{} {
			l, err := c.NewElection(name).Campaign(ctx, "first")
			require.NoError(t, err)
			return l.Done()
		}, func(t *testing.T, c *redlock.Client, name string) error {
			e := c.NewElection(name)
			wait, cancel := context.WithTimeout(ctx, time.Second) // Campaign waits
			defer cancel()
			if _, err := e.Campaign(wait, "second"); err != nil {
				return err
			}
			v, err := e.Leader(ctx)
			if err == nil && v != "second" {
				err = fmt.Errorf("leader %q", v)
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster := redlocktest.New(t)
				holder, other := cluster.Client(), cluster.Client()
				lost := tc.hold(t, holder, "name")
				// Locks of other names, some alike, keep their holders.
				var keep []*redlock.Lease
				for _, name := range []string{"name2", "name}:x", "name:x", "x}{name"} {
					l, err := holder.Acquire(ctx, name, redlock.WithAutoExtend(true))
					require.NoError(t, err, name)
					keep = append(keep, l)
				}
				assert.ErrorIs(t, tc.take(t, other, "name"), redlock.ErrHeld)

				start := time.Now()
				cluster.Expire("name")
				select {
				case <-lost:
				case <-time.After(time.Minute):
					t.Fatal("the holding outlived Expire by a minute")
				}
				assert.LessOrEqual(t, time.Since(start), 7*time.Second, "at the next extension: 2/3 of a 10 s TTL, at most")
				require.NoError(t, tc.take(t, other, "name"))
				for _, l := range keep {
					assert.NoError(t, l.Err(), l.Name())
				}
			})
		})
	}
}

// TestExpireOfANameNobodyHolds does nothing, also on a down server.
func TestExpireOfANameNobodyHolds(t *testing.T) {
	cluster := redlocktest.New(t)
	cluster.Server(2).Fail()
	cluster.Expire("nobody")
	cluster.Expire("}odd")
}

// TestPrefix: a Cluster's prefix goes to its Clients, and Expire looks there.
func TestPrefix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := redlocktest.New(t, redlocktest.WithPrefix("app:"))
		lease, err := cluster.Client().Acquire(ctx, "name", redlock.WithAutoExtend(true))
		require.NoError(t, err)
		cluster.Expire("name")
		<-lease.Done()
		assert.ErrorIs(t, lease.Err(), redlock.ErrLost)
	})
}

// fakeT records what a Cluster reports through Fatalf; its Fatalf ends the goroutine, as
// testing.T's does.
type fakeT struct {
	*testing.T
	mu  sync.Mutex
	msg string
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// fatal runs f with a fakeT and returns what f reported through Fatalf ("" if nothing).
func fatal(t *testing.T, f func(t *fakeT)) string {
	ft := &fakeT{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ft)
	}()
	<-done
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.msg
}

// TestBadInputFailsTheTest: bad input fails the test, naming it; nothing panics.
func TestBadInputFailsTheTest(t *testing.T) {
	stranger := redlocktest.New(t, redlocktest.WithServers(1)).Client()
	for _, tc := range []struct {
		name string
		f    func(t *fakeT)
		want string
	}{
		{"no servers", func(t *fakeT) { redlocktest.New(t, redlocktest.WithServers(0)) }, "WithServers(0): a Cluster has from 1 to 254 servers"},
		{"too many servers", func(t *fakeT) { redlocktest.New(t, redlocktest.WithServers(255)) }, "WithServers(255)"},
		{"bad prefix", func(t *fakeT) { redlocktest.New(t, redlocktest.WithPrefix("a{}")) }, `WithPrefix("a{}")`},
		{"server out of range", func(t *fakeT) { redlocktest.New(t).Server(3) }, "Server(3): the Cluster has servers 0 to 2"},
		{"negative server", func(t *fakeT) { redlocktest.New(t).Server(-1) }, "Server(-1)"},
		{"bad option", func(t *fakeT) { redlocktest.New(t).Client(redlock.WithTTL(0)) }, "TTL must be at least 1ms"},
		{"TTL under the kit's node timeout", func(t *fakeT) { redlocktest.New(t).Client(redlock.WithTTL(time.Second)) },
			"outside a synctest bubble a Client's node timeout is 1s, redlocktest.RealTimeNodeTimeout"},
		{"empty name", func(t *fakeT) { redlocktest.New(t).Expire("") }, "Expire: empty lock name"},
		{"long name", func(t *fakeT) { redlocktest.New(t).Expire(strings.Repeat("x", redlock.MaxNameLen+1)) }, "lock name of 1025 bytes"},
		{"stranger", func(t *fakeT) { redlocktest.New(t).Server(0).Partition(stranger) }, "Partition: client 1 of 1"},
		{"nil client", func(t *fakeT) { redlocktest.New(t).Server(1).Heal(nil) }, "Heal: client 1 of 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Contains(t, fatal(t, tc.f), tc.want)
		})
	}
	assert.Empty(t, fatal(t, func(t *fakeT) { redlocktest.New(t, nil).Client(nil) }), "nil options are ignored")
}

// TestCloseEarly: a Client closed by the test is closed again, harmlessly, at its end;
// Expire and the faults work on any server state.
func TestCloseEarly(t *testing.T) {
	cluster := redlocktest.New(t)
	c := cluster.Client()
	require.NoError(t, c.Close())
	_, err := c.TryAcquire(ctx, "name")
	assert.True(t, errors.Is(err, redlock.ErrClosed))
	s := cluster.Server(0)
	s.Fail()
	s.Fail()
	s.Pause()
	s.Partition()
	s.Restart()
	s.Restart()
	s.Resume()
	s.Heal()
	assert.Equal(t, "10.0.0.1:6379", s.String())
}

// TestGoRedisLogsNothing: the faults of a Cluster make go-redis log no failed dial (it
// logs every one, for the whole process): calls to a failed, paused, partitioned and
// restarted server, inside a bubble and out, leave the test's output to the test.
func TestGoRedisLogsNothing(t *testing.T) {
	faults := func(t *testing.T) {
		cluster := redlocktest.New(t, redlocktest.WithServers(5))
		client := cluster.Client(redlock.WithRestartGuard(0), redlock.WithNodeTimeout(200*time.Millisecond))
		cluster.Server(0).Fail()
		cluster.Server(1).Pause()
		cluster.Server(2).Partition(client)
		for i := range 5 {
			_, err := client.TryAcquire(ctx, fmt.Sprint("name", i))
			assert.Error(t, err, "two of five up")
		}
		cluster.Server(0).Restart()
		cluster.Server(3).Fail()
		for i := range 5 {
			_, err := client.TryAcquire(ctx, fmt.Sprint("name", i))
			assert.Error(t, err, "two of five up")
		}
	}
	before := goredisLog.dials.Load()
	t.Run("bubble", func(t *testing.T) { synctest.Test(t, faults) })
	t.Run("real time", faults)
	assert.Zero(t, goredisLog.dials.Load()-before, "failed dials go-redis logged")
}

// TestNodeTimeoutOutsideABubble: outside a bubble a Client waits for a node as long as a
// loaded machine can make an in-process call take (RealTimeNodeTimeout), not redlock's
// 100 ms: here every server is paused, and the call reports that timeout. Inside a
// bubble, where a call takes no virtual time, it keeps redlock's default.
func TestNodeTimeoutOutsideABubble(t *testing.T) {
	paused := func(t *testing.T) (time.Duration, error) {
		cluster := redlocktest.New(t)
		client := cluster.Client()
		for i := range cluster.Len() {
			cluster.Server(i).Pause()
		}
		start := time.Now()
		_, err := client.TryAcquire(ctx, "name")
		return time.Since(start), err
	}
	t.Run("real time", func(t *testing.T) {
		took, err := paused(t)
		// Each node's call ends at its deadline, by core's timer (ErrNodeTimeout) or by
		// go-redis's, whichever comes first ("i/o timeout").
		require.ErrorIs(t, err, redlock.ErrNoQuorum)
		assert.Equal(t, time.Second, redlocktest.RealTimeNodeTimeout)
		assert.GreaterOrEqual(t, took, time.Second, "the call gave up on the paused servers before the kit's node timeout")
	})
	t.Run("bubble", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			client := redlocktest.New(t).Client(redlock.WithTTL(500 * time.Millisecond))
			start := time.Now()
			lease, err := client.TryAcquire(ctx, "name")
			require.NoError(t, err, "a TTL under a second, with redlock's node timeout")
			require.NoError(t, lease.Release(ctx))
			assert.Zero(t, time.Since(start), "a call takes no virtual time")

			took, err := paused(t)
			require.ErrorIs(t, err, redlock.ErrNoQuorum)
			assert.GreaterOrEqual(t, took, 100*time.Millisecond, "redlock's node timeout")
			assert.Less(t, took, time.Second, "redlock's node timeout")
		})
	})
}
