package backendtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Closer is the Close method every backend's Node has: it stops the pub/sub machinery.
type Closer interface{ Close() error }

// counter is a Subscribe callback that counts its calls.
type counter struct{ n atomic.Int64 }

func (c *counter) fn(string)    { c.n.Add(1) }
func (c *counter) calls() int64 { return c.n.Load() }

// waitCalls waits until c was called want times, then checks it is not called again.
func waitCalls(t *testing.T, c *counter, want int64, what string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s: %d calls, have %d", what, want, c.calls()), func() bool { return c.calls() >= want })
	settle()
	assert.Equal(t, want, c.calls(), "%s: calls", what)
}

// Subscriber tests the node's core.Subscriber and Close on every kind of server in kinds,
// and checks that no goroutine is left behind. It must not run in parallel with other
// tests of the package (goleak), though its subtests run in parallel with each other.
func Subscriber(t *testing.T, newNode NewNode, kinds ...Kind) {
	ignore := goleak.IgnoreCurrent()
	// rueidis and valkey-go retry a failed connection after a delay (a cluster client's
	// topology refresh, up to a second), in a goroutine that sleeps it out even after the
	// client closed.
	delayed := []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
		goleak.IgnoreAnyFunction("github.com/valkey-io/valkey-go.(*call).DelayDo.func1"),
	}
	t.Cleanup(func() { goleak.VerifyNone(t, append(delayed, ignore)...) })

	sub := func(t *testing.T, node core.Node) core.Subscriber {
		s, ok := node.(core.Subscriber)
		require.True(t, ok, "%T is not a core.Subscriber", node)
		return s
	}
	subscribe := func(t *testing.T, s core.Subscriber, channel string, c *counter) func() {
		t.Helper()
		unsubscribe, err := s.Subscribe(context.Background(), channel, c.fn)
		require.NoError(t, err)
		require.NotNil(t, unsubscribe)
		return unsubscribe
	}
	// Each group of subtests below may take one cluster; start them all at once.
	var clusters chan *Server
	for _, k := range kinds {
		if k == Cluster {
			const groups = 9
			clusters = make(chan *Server, groups)
			for _, s := range startClusters(t, groups) {
				clusters <- s
			}
		}
	}
	run := func(name string, f func(t *testing.T, srv *Server, node core.Node, s core.Subscriber), only ...Kind) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ks := kinds
			if len(only) > 0 {
				ks = nil
				for _, k := range kinds {
					for _, o := range only {
						if k == o {
							ks = append(ks, k)
						}
					}
				}
			}
			onEach(t, newNode, ks, clusters, func(t *testing.T, srv *Server, node core.Node) { f(t, srv, node, sub(t, node)) })
		})
	}

	// A PUBLISH that the server handles after Subscribe returned is delivered, at once:
	// Subscribe waited for the server's confirmation.
	run("delivers", func(t *testing.T, srv *Server, _ core.Node, s core.Subscriber) {
		var c counter
		unsubscribe := subscribe(t, s, "ch:{a}", &c)
		defer unsubscribe()
		assert.Equal(t, int64(1), srv.Pub("ch:{a}"), "the server counts our subscription")
		waitCalls(t, &c, 1, "one message")
		srv.Pub("ch:{a}")
		srv.Pub("ch:{a}")
		waitCalls(t, &c, 3, "three messages")
		srv.Pub("other:{b}")
		waitCalls(t, &c, 3, "a message on another channel")
	})

	// Two subscriptions to one channel both fire, over one server-side subscription;
	// unsubscribing one keeps the other; unsubscribe is idempotent; the last one leaves the
	// channel on the server.
	run("fan out and unsubscribe", func(t *testing.T, srv *Server, _ core.Node, s core.Subscriber) {
		var a, b counter
		unA := subscribe(t, s, "ch:{fan}", &a)
		unB := subscribe(t, s, "ch:{fan}", &b)
		assert.Equal(t, int64(1), srv.Receivers(t, "ch:{fan}"), "one SUBSCRIBE for two callbacks")
		srv.Pub("ch:{fan}")
		waitCalls(t, &a, 1, "a")
		waitCalls(t, &b, 1, "b")

		unA()
		unA() // idempotent
		assert.Equal(t, int64(1), srv.Receivers(t, "ch:{fan}"), "b still subscribed")
		srv.Pub("ch:{fan}")
		waitCalls(t, &b, 2, "b after a left")
		assert.Equal(t, int64(1), a.calls(), "a after it left")

		unB()
		eventually(t, "UNSUBSCRIBE after the last callback left", func() bool { return srv.Receivers(t, "ch:{fan}") == 0 })
		srv.Pub("ch:{fan}")
		settle()
		assert.Equal(t, int64(2), b.calls(), "b after it left")
		unB()

		// The channel can be subscribed again.
		var c counter
		unC := subscribe(t, s, "ch:{fan}", &c)
		defer unC()
		srv.Pub("ch:{fan}")
		waitCalls(t, &c, 1, "c, subscribed again")
	})

	// All channels share one pub/sub connection.
	run("one connection", func(t *testing.T, srv *Server, _ core.Node, s core.Subscriber) {
		var c counter
		for _, ch := range []string{"ch:{1}", "ch:{2}", "ch:{3}", "ch:{3}"} {
			defer subscribe(t, s, ch, &c)()
		}
		assert.Equal(t, 1, srv.PubSubClients(t), "pub/sub connections")
	}, Redis)

	// After the server drops the pub/sub connection, the backend re-subscribes and calls
	// every callback once, because messages may have been missed; later messages arrive.
	run("recovers after CLIENT KILL", func(t *testing.T, srv *Server, _ core.Node, s core.Subscriber) {
		var a, b, c counter
		defer subscribe(t, s, "ch:{x}", &a)()
		defer subscribe(t, s, "ch:{x}", &b)()
		defer subscribe(t, s, "ch:{y}", &c)()
		srv.KillPubSub(t)
		waitCalls(t, &a, 1, "a after the reconnect")
		waitCalls(t, &b, 1, "b after the reconnect")
		waitCalls(t, &c, 1, "c after the reconnect")
		eventually(t, "re-subscribed", func() bool {
			return srv.Receivers(t, "ch:{x}") == 1 && srv.Receivers(t, "ch:{y}") == 1
		})
		srv.Pub("ch:{x}")
		srv.Pub("ch:{y}")
		waitCalls(t, &a, 2, "a after a message")
		waitCalls(t, &b, 2, "b after a message")
		waitCalls(t, &c, 2, "c after a message")

		// And once more, to show the recovery is not a one-off.
		srv.KillPubSub(t)
		waitCalls(t, &a, 3, "a after the second reconnect")
		eventually(t, "re-subscribed again", func() bool { return srv.Receivers(t, "ch:{x}") == 1 })
		srv.Pub("ch:{x}")
		waitCalls(t, &a, 4, "a after a message")
	}, Redis, Cluster)

	// A server restart (miniredis closes every connection) is recovered from the same way.
	run("recovers after a restart", func(t *testing.T, srv *Server, _ core.Node, s core.Subscriber) {
		var c counter
		defer subscribe(t, s, "ch:{r}", &c)()
		srv.Mini.Close()
		redistest.RestartMiniredis(t, srv.Mini)
		waitCalls(t, &c, 1, "after the reconnect")
		eventually(t, "re-subscribed", func() bool { return srv.Receivers(t, "ch:{r}") == 1 })
		srv.Pub("ch:{r}")
		waitCalls(t, &c, 2, "after a message")
	}, Miniredis)

	// Subscribe honours ctx: a cancelled one fails at once, and its callback never runs.
	run("cancelled context", func(t *testing.T, srv *Server, _ core.Node, s core.Subscriber) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var c counter
		unsubscribe, err := s.Subscribe(ctx, "ch:{c}", c.fn)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Nil(t, unsubscribe)
		srv.Pub("ch:{c}")
		settle()
		assert.Zero(t, c.calls())
	})

	// A callback may unsubscribe itself, and others, without deadlock.
	run("unsubscribe from a callback", func(t *testing.T, srv *Server, _ core.Node, s core.Subscriber) {
		var c counter
		var self atomic.Pointer[func()]
		unsubscribe, err := s.Subscribe(context.Background(), "ch:{self}", func(payload string) {
			c.fn(payload)
			if u := self.Load(); u != nil {
				(*u)()
			}
		})
		require.NoError(t, err)
		self.Store(&unsubscribe)
		srv.Pub("ch:{self}")
		waitCalls(t, &c, 1, "the callback")
		eventually(t, "unsubscribed", func() bool { return srv.Receivers(t, "ch:{self}") == 0 })
		srv.Pub("ch:{self}")
		settle()
		assert.Equal(t, int64(1), c.calls())
	})

	// The reader stops when nothing is subscribed and starts again on demand.
	run("idle and back", func(t *testing.T, srv *Server, _ core.Node, s core.Subscriber) {
		for i := range 3 {
			var c counter
			unsubscribe := subscribe(t, s, "ch:{idle}", &c)
			srv.Pub("ch:{idle}")
			waitCalls(t, &c, 1, fmt.Sprintf("round %d", i))
			unsubscribe()
			eventually(t, "unsubscribed", func() bool { return srv.Receivers(t, "ch:{idle}") == 0 })
		}
	})

	// A connection kept while nothing was subscribed may have died meanwhile: the next
	// Subscribe still succeeds.
	run("idle connection dropped", func(t *testing.T, srv *Server, _ core.Node, s core.Subscriber) {
		var c counter
		subscribe(t, s, "ch:{drop}", &c)()
		eventually(t, "unsubscribed", func() bool { return srv.Receivers(t, "ch:{drop}") == 0 })
		for _, typ := range []string{"normal", "pubsub"} {
			_, err := srv.Real.Do("CLIENT", "KILL", "TYPE", typ)
			require.NoError(t, err)
		}
		defer subscribe(t, s, "ch:{drop}", &c)()
		srv.Pub("ch:{drop}")
		waitCalls(t, &c, 1, "after the idle connection was dropped")
	}, Redis)

	// Many goroutines subscribe and unsubscribe a few channels at once; afterwards every
	// channel is left, and a fresh subscription still works.
	run("concurrent churn", func(t *testing.T, srv *Server, _ core.Node, s core.Subscriber) {
		channels := []string{"ch:{p}", "ch:{q}", "ch:{r}"}
		var wg sync.WaitGroup
		for i := range 30 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range 10 {
					ch := channels[(i+j)%len(channels)]
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					if j%4 == 3 { // some give up early, before or after the confirmation
						cancel()
					}
					unsubscribe, err := s.Subscribe(ctx, ch, func(string) {})
					cancel()
					if err == nil {
						if j%2 == 0 {
							srv.Pub(ch)
						}
						unsubscribe()
					} else if !errors.Is(err, context.Canceled) {
						t.Errorf("Subscribe: %v", err)
					}
				}
			}()
		}
		wg.Wait()
		for _, ch := range channels {
			eventually(t, "every channel left: "+ch, func() bool { return srv.Receivers(t, ch) == 0 })
		}
		var c counter
		defer subscribe(t, s, "ch:{p}", &c)()
		srv.Pub("ch:{p}")
		waitCalls(t, &c, 1, "after the churn")
	})

	// Close ends every subscription and the connections, and makes Subscribe fail with an
	// error that matches core.ErrClosed; Eval still works; Close is idempotent.
	run("close", func(t *testing.T, srv *Server, node core.Node, s core.Subscriber) {
		closer, ok := node.(Closer)
		require.True(t, ok, "%T has no Close method", node)
		var a, b counter
		unA := subscribe(t, s, "ch:{close1}", &a)
		subscribe(t, s, "ch:{close2}", &b)
		require.NoError(t, closer.Close())
		require.NoError(t, closer.Close())
		unA() // after Close: a no-op
		eventually(t, "connections closed", func() bool {
			return srv.Receivers(t, "ch:{close1}") == 0 && srv.Receivers(t, "ch:{close2}") == 0
		})
		srv.Pub("ch:{close1}")
		srv.Pub("ch:{close2}")
		settle()
		assert.Zero(t, a.calls()+b.calls(), "calls after Close")

		_, err := s.Subscribe(context.Background(), "ch:{close3}", func(string) {})
		assert.ErrorIs(t, err, core.ErrClosed, "Subscribe after Close")

		got, err := node.Eval(context.Background(), Script(t, "extend"), []string{"lock"}, "token", "1000", "w")
		require.NoError(t, err, "Eval after Close")
		assert.Equal(t, []int64{0}, got)
	})

	// core's release script publishes with PUBLISH, or SPUBLISH on a node that says it
	// uses sharded pub/sub: either way the subscriber hears the release.
	run("release script notifies", func(t *testing.T, srv *Server, node core.Node, s core.Subscriber) {
		keys := core.NewKeys("test:", "notify")
		publish := "PUBLISH"
		if sp, ok := node.(core.ShardedPubSub); ok && sp.ShardedPubSub() {
			publish = "SPUBLISH"
		}
		assert.Equal(t, srv.Kind == Cluster, publish == "SPUBLISH", "ShardedPubSub on %v", srv.Kind)
		var c counter
		defer subscribe(t, s, keys.Wake("waiter"), &c)()
		require.NoError(t, srv.Admin.Set(context.Background(), keys.Lock, "token", time.Minute).Err())
		// A waiter queues behind the holder; the release wakes it on its own channel.
		queued, err := node.Eval(context.Background(), Script(t, "acquire"), acquireKeys(keys), waiterArgs("waiter-token", "10000", "waiter", "1")...)
		require.NoError(t, err)
		require.Equal(t, int64(0), queued[0], "the waiter is refused and queued")
		got, err := node.Eval(context.Background(), Script(t, "release"), releaseKeys(keys), releaseArgs("token", "w", publish)...)
		require.NoError(t, err)
		assert.Equal(t, []int64{1, 1}, got, "released, heard by one subscriber")
		waitCalls(t, &c, 1, "release notification")
	})
}

// SubscribeHonoursContext: Subscribe on a node that accepts connections and never replies
// returns soon after ctx's deadline, with ctx's error.
func SubscribeHonoursContext(t *testing.T, hung func(t *testing.T) core.Node) {
	node := hung(t)
	s, ok := node.(core.Subscriber)
	require.True(t, ok)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	unsubscribe, err := s.Subscribe(ctx, "ch:{hung}", func(string) {})
	elapsed := time.Since(start)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Nil(t, unsubscribe)
	assert.Less(t, elapsed, 500*time.Millisecond, "Subscribe returned after %v", elapsed)
}
