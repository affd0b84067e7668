package conformance_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/backends/redigo"
	"github.com/go-redlock/redlock/core"
	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
)

// The deliberately faulty nodes of the meta-tests. Each breaks one clause of the core.Node
// or core.Subscriber contract the way a plausible backend would, and is otherwise correct,
// so that the suite must catch it by the check for that clause.

// newClient returns a go-redis client for addr, closed when t ends (or by closeClients).
func newClient(t testing.TB, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	onCloseClients(t, func() { _ = rdb.Close() })
	return rdb
}

// clients holds, per check (its testing.TB), the functions that close the driver clients
// made for it, for closeClients.
var clients sync.Map // testing.TB → *closers

type closers struct {
	mu  sync.Mutex
	fns []func()
}

// onCloseClients registers close to be run by closeClients(t, ...).
func onCloseClients(t testing.TB, close func()) {
	v, loaded := clients.LoadOrStore(t, &closers{})
	if !loaded {
		t.Cleanup(func() { clients.Delete(t) })
	}
	c := v.(*closers)
	c.mu.Lock()
	c.fns = append(c.fns, close)
	c.mu.Unlock()
}

// closeClients is the meta-tests' Harness.CloseClient: it closes every driver client made
// for t (a check makes its Node, then closes its client).
func closeClients(t testing.TB, _ core.Node) {
	v, ok := clients.Load(t)
	if !ok {
		t.Fatal("closeClients: no driver client was made for this check")
	}
	c := v.(*closers)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, close := range c.fns {
		close()
	}
}

// closedErr returns err, made to match core.ErrClosed too if go-redis says the client is
// closed, as the go-redis backend does: for faults that call go-redis directly.
func closedErr(err error) error {
	if errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("%w: %w", core.ErrClosed, err)
	}
	return err
}

// goodNode is the go-redis backend, as its users construct it.
func goodNode(t testing.TB, addr string) core.Node {
	n := goredis.New(newClient(t, addr))
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// goodClusterNode is the go-redis backend over a ClusterClient of the Redis Cluster whose
// masters are at addrs, as its users construct it.
func goodClusterNode(t testing.TB, addrs []string) core.Node {
	return newClusterGoredis(t, addrs)
}

// newClusterGoredis is goodClusterNode as the backend's own type, for faults that embed it.
func newClusterGoredis(t testing.TB, addrs []string) *goredis.Node {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	onCloseClients(t, func() { _ = rdb.Close() })
	n := goredis.New(rdb)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// crossSlotPanics is the go-redis backend over a cluster client that treats a CROSSSLOT
// reply as a bug of its caller's and panics, as a backend that asserts "core never sends
// keys of different slots" would.
type crossSlotPanics struct{ *goredis.Node }

func newCrossSlotPanics(t testing.TB, addrs []string) core.Node {
	return crossSlotPanics{newClusterGoredis(t, addrs)}
}

func (n crossSlotPanics) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	v, err := n.Node.Eval(ctx, s, keys, args...)
	if err != nil && redis.HasErrorPrefix(err, "CROSSSLOT") {
		panic(fmt.Sprintf("redlock backend: keys %q are in different slots: core must never send them", keys))
	}
	return v, err
}

// wrapsErrors is the go-redis backend over a cluster client that adds its own context in
// front of every error: CROSSSLOT no longer starts the message, and core.Permanent takes
// it for an error that a retry may fix.
type wrapsErrors struct{ *goredis.Node }

func newWrapsErrors(t testing.TB, addrs []string) core.Node {
	return wrapsErrors{newClusterGoredis(t, addrs)}
}

func (n wrapsErrors) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	v, err := n.Node.Eval(ctx, s, keys, args...)
	if err != nil {
		return nil, fmt.Errorf("redis cluster eval %s: %w", s.Name(), err)
	}
	return v, nil
}

// ignoresCtx runs every call with context.Background(): it waits for the server however
// long it takes (here, until go-redis's own 3 s read timeout).
type ignoresCtx struct{ inner core.Node }

func newIgnoresCtx(t testing.TB, addr string) core.Node {
	// No retries: once the suite closes its connections, the call ends at once.
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	onCloseClients(t, func() { _ = rdb.Close() })
	return ignoresCtx{goredis.New(rdb)}
}

// newClusterIgnoresCtx is ignoresCtx over a cluster client: it waits for a paused master
// until go-redis's own 3 s read timeout.
func newClusterIgnoresCtx(t testing.TB, addrs []string) core.Node {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	onCloseClients(t, func() { _ = rdb.Close() })
	return ignoresCtx{goredis.New(rdb)}
}

func (n ignoresCtx) Eval(_ context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	return n.inner.Eval(context.Background(), s, keys, args...)
}

func (n ignoresCtx) String() string { return n.inner.String() }

// preloaded loads core's scripts with SCRIPT LOAD when it is made and then only ever sends
// EVALSHA: it fails with NOSCRIPT once the server forgot them (SCRIPT FLUSH, a restart, a
// failover). It honours ctx as the go-redis backend does.
type preloaded struct {
	rdb *redis.Client
}

func newPreloaded(t testing.TB, addr string) core.Node {
	rdb := newClient(t, addr)
	for _, s := range core.Scripts() {
		if err := rdb.ScriptLoad(context.Background(), s.Source()).Err(); err != nil {
			t.Fatalf("SCRIPT LOAD %s: %v", s.Name(), err)
		}
	}
	return preloaded{rdb}
}

func (n preloaded) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	return honourCtx(ctx, func() ([]int64, error) {
		v, err := ints(s, n.rdb.EvalSha(ctx, s.SHA1(), keys, boxed(args)...))
		return v, closedErr(err)
	})
}

// ints returns c's reply as an Eval's, each element an integer (core.Ints), as the go-redis
// backend decodes it: go-redis's Int64Slice would read the text "7" as 7, which the
// bad-reply checks refuse.
func ints(s *core.Script, c *redis.Cmd) ([]int64, error) {
	v, err := c.Result()
	if err != nil {
		return nil, err
	}
	return core.Ints(s, v)
}

// honourCtx returns call's result, or ctx's error as soon as ctx is done (call then runs on
// in its goroutine): the ctx handling of a correct backend, for faults that are about
// something else.
func honourCtx[T any](ctx context.Context, call func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := call()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return zero, r.err
		}
		return r.v, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

func (n preloaded) String() string { return n.rdb.Options().Addr }

// errorAsReply answers {0} ("not ours") when the server answered with an error: a held
// lock and a broken server look alike to core.
type errorAsReply struct{ inner core.Node }

func newErrorAsReply(t testing.TB, addr string) core.Node {
	return errorAsReply{goodNode(t, addr)}
}

func (n errorAsReply) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	v, err := n.inner.Eval(ctx, s, keys, args...)
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return []int64{0}, nil
	}
	return v, err
}

func (n errorAsReply) String() string { return n.inner.String() }

// forgetful is the go-redis backend's Eval with a Subscriber of its own over one shared
// go-redis PubSub. go-redis reconnects and re-subscribes by itself after the connection
// drops, but forgetful ignores the repeated confirmations: it never tells its subscribers
// that messages may have been lost, so a release during the outage goes unnoticed. Its mode
// makes it tell some of them: the subscribers of the first channel it subscribed only, or
// every subscriber but at the read error, before it has subscribed again; or, with wakesAll,
// every subscriber of each channel once re-subscribed, as it must. Its fault (with wakesAll)
// breaks one other clause of the Subscriber contract.
type forgetful struct {
	core.Node
	rdb   *redis.Client
	mode  recoveryFault
	fault subscriberFault

	mu       sync.Mutex
	ps       *redis.PubSub
	subs     map[string]map[*subscriber]struct{}
	refs     map[string]int             // subscriptions per channel, as unsubscribe counts them
	leaving  map[string]bool            // unsubscribesAtConfirm: UNSUBSCRIBE sent, callbacks kept
	confirms map[string][]chan struct{} // Subscribe calls awaiting the server's confirmation
	first    string                     // the first channel subscribed
	failures int                        // read errors in a row
	wg       sync.WaitGroup
}

type subscriber struct {
	fn  func(string)
	off bool // unsubscribed; guarded by forgetful.mu
}

// recoveryFault is what a forgetful tells its subscribers after a reconnect.
type recoveryFault int

const (
	wakesNone      recoveryFault = iota // nothing
	wakesFirstOnly                      // the first channel's subscribers, once re-subscribed
	wakesOnError                        // every subscriber, at the read error
	wakesAll                            // every subscriber, once re-subscribed: right
)

// subscriberFault is the clause of the Subscriber contract a forgetful with wakesAll breaks.
type subscriberFault int

const (
	// noFault: none.
	noFault subscriberFault = iota
	// countsUnsubscribes: unsubscribe counts the channel down at every call, not once, and
	// unsubscribes the channel (every callback of it) when the count reaches 0.
	countsUnsubscribes
	// joinsPending: a Subscribe to a channel it already has callbacks for returns at once,
	// though the first Subscribe's confirmation has not come yet.
	joinsPending
	// givesUp: after 10 read errors in a row, 100 ms apart, it stops reading: an outage of
	// more than a second ends its subscriptions for good.
	givesUp
	// unsubscribesAtConfirm: unsubscribe of a channel's last callback sends UNSUBSCRIBE and
	// returns, and the callbacks are dropped when the server confirms it; messages are
	// handed out without the lock, from a snapshot of the callbacks: those read before the
	// confirmation still reach the callback after unsubscribe returned.
	unsubscribesAtConfirm
)

var _ core.Subscriber = (*forgetful)(nil)

func newForgetful(t testing.TB, addr string) core.Node {
	return newForgetfulOf(t, addr, wakesNone, noFault)
}

func newForgetfulOf(t testing.TB, addr string, mode recoveryFault, fault subscriberFault) *forgetful {
	rdb := newClient(t, addr)
	f := &forgetful{
		Node:     goredis.New(rdb),
		rdb:      rdb,
		mode:     mode,
		fault:    fault,
		subs:     map[string]map[*subscriber]struct{}{},
		refs:     map[string]int{},
		leaving:  map[string]bool{},
		confirms: map[string][]chan struct{}{},
	}
	t.Cleanup(f.close)
	return f
}

// newWakesFirstOnly tells only the subscribers of the first channel it subscribed that
// messages may have been lost, once re-subscribed.
func newWakesFirstOnly(t testing.TB, addr string) core.Node {
	return newForgetfulOf(t, addr, wakesFirstOnly, noFault)
}

// newWakesOnError tells every subscriber that messages may have been lost as soon as its
// read fails, before go-redis has subscribed again.
func newWakesOnError(t testing.TB, addr string) core.Node {
	return newForgetfulOf(t, addr, wakesOnError, noFault)
}

func (f *forgetful) Subscribe(ctx context.Context, channel string, onMessage func(string)) (func(), error) {
	s := &subscriber{fn: onMessage}
	confirmed := make(chan struct{})
	f.mu.Lock()
	if f.ps == nil {
		f.ps = f.rdb.Subscribe(context.Background())
		f.wg.Add(1)
		go f.read(f.ps)
	}
	ps := f.ps
	if f.first == "" {
		f.first = channel
	}
	listening := len(f.subs[channel]) > 0
	if f.subs[channel] == nil {
		f.subs[channel] = map[*subscriber]struct{}{}
	}
	f.subs[channel][s] = struct{}{}
	f.refs[channel]++
	delete(f.leaving, channel)
	f.confirms[channel] = append(f.confirms[channel], confirmed)
	f.mu.Unlock()

	unsubscribe := func() {
		f.mu.Lock()
		if s.off && f.fault != countsUnsubscribes {
			f.mu.Unlock()
			return
		}
		s.off = true
		f.refs[channel]--
		last := f.refs[channel] <= 0
		switch {
		case last && f.fault == unsubscribesAtConfirm:
			f.leaving[channel] = true // the fault: s stays until the server confirms
		case last:
			delete(f.subs, channel) // with countsUnsubscribes, maybe others' callbacks too
		default:
			delete(f.subs[channel], s)
		}
		if last {
			delete(f.refs, channel)
		}
		f.mu.Unlock()
		if last { // not waited for: ps is busy while a Subscribe to a silent server is under way
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = ps.Unsubscribe(ctx, channel)
			}()
		}
	}
	if listening && f.fault == joinsPending {
		return unsubscribe, nil // the fault: the channel may not be confirmed yet
	}
	sent := make(chan error, 1)
	go func() { sent <- ps.Subscribe(ctx, channel) }()
	for {
		select {
		case err := <-sent:
			if err != nil {
				unsubscribe()
				return nil, err
			}
			sent = nil
		case <-confirmed:
			return unsubscribe, nil
		case <-ctx.Done():
			unsubscribe()
			return nil, ctx.Err()
		}
	}
}

// read dispatches what ps receives until ps is closed.
func (f *forgetful) read(ps *redis.PubSub) {
	defer f.wg.Done()
	for {
		msg, err := ps.Receive(context.Background())
		if errors.Is(err, redis.ErrClosed) {
			return
		}
		if err != nil {
			f.mu.Lock()
			if f.mode == wakesOnError {
				// The fault: every subscriber is told at once, before go-redis has
				// subscribed again (a waiter that calls now misses a release's PUBLISH).
				for _, subs := range f.subs {
					for s := range subs {
						s.fn("")
					}
				}
			}
			f.failures++
			failures := f.failures
			f.mu.Unlock()
			if f.fault == givesUp {
				if failures >= 10 {
					return // the fault: the subscriptions end for good
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			time.Sleep(10 * time.Millisecond) // go-redis reconnects on the next Receive
			continue
		}
		f.mu.Lock()
		f.failures = 0
		switch m := msg.(type) {
		case *redis.Subscription:
			// A confirmation that nobody waits for (go-redis re-subscribed after a reconnect)
			// should make every subscriber of the channel re-check. Only wakesAll does so
			// (and wakesFirstOnly for the first channel's).
			if m.Kind == "subscribe" && len(f.confirms[m.Channel]) == 0 &&
				(f.mode == wakesAll || f.mode == wakesFirstOnly && m.Channel == f.first) {
				for s := range f.subs[m.Channel] {
					s.fn("")
				}
			}
			if m.Kind == "unsubscribe" && f.leaving[m.Channel] {
				delete(f.subs, m.Channel)
				delete(f.leaving, m.Channel)
			}
			for _, c := range f.confirms[m.Channel] {
				close(c)
			}
			delete(f.confirms, m.Channel)
		case *redis.Message:
			if f.fault == unsubscribesAtConfirm {
				var subs []*subscriber
				for s := range f.subs[m.Channel] {
					subs = append(subs, s)
				}
				f.mu.Unlock()
				for _, s := range subs {
					s.fn(m.Payload)
				}
				continue
			}
			for s := range f.subs[m.Channel] {
				s.fn(m.Payload) // under the lock, so that no call starts after unsubscribe returns
			}
		}
		f.mu.Unlock()
	}
}

func (f *forgetful) close() {
	f.mu.Lock()
	if f.ps != nil {
		_ = f.ps.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// losesSign drops the sign of negative integers in replies, as a reply parser that skips
// the '-' would: a node's refusal {-1, wait} under the restart guard reads as a grant.
type losesSign struct{ inner core.Node }

func newLosesSign(t testing.TB, addr string) core.Node { return losesSign{goodNode(t, addr)} }

func newClusterLosesSign(t testing.TB, addrs []string) core.Node {
	return losesSign{goodClusterNode(t, addrs)}
}

func (n losesSign) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	v, err := n.inner.Eval(ctx, s, keys, args...)
	for i := range v {
		if v[i] < 0 {
			v[i] = -v[i]
		}
	}
	return v, err
}

func (n losesSign) String() string { return n.inner.String() }

// evalEveryCall sends EVALSHA with the SHA1 of the source with a trailing newline (which the
// server never has), and so EVAL on every call. It honours ctx as the go-redis backend does.
type evalEveryCall struct{ rdb *redis.Client }

func newEvalEveryCall(t testing.TB, addr string) core.Node { return evalEveryCall{newClient(t, addr)} }

func (n evalEveryCall) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	argv := boxed(args)
	wrong := core.NewScript(s.Name(), s.Source()+"\n").SHA1()
	return honourCtx(ctx, func() ([]int64, error) {
		v, err := ints(s, n.rdb.EvalSha(ctx, wrong, keys, argv...))
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			v, err = ints(s, n.rdb.Eval(ctx, s.Source(), keys, argv...))
		}
		return v, closedErr(err)
	})
}

func (n evalEveryCall) String() string { return n.rdb.Options().Addr }

// runsTwice pipelines EVALSHA and EVAL, to save a round trip on NOSCRIPT, and returns the
// first that succeeded: once the script is cached, it runs twice per call.
type runsTwice struct{ rdb *redis.Client }

func newRunsTwice(t testing.TB, addr string) core.Node { return runsTwice{newClient(t, addr)} }

func (n runsTwice) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	argv := boxed(args)
	pipe := n.rdb.Pipeline()
	sha := pipe.EvalSha(ctx, s.SHA1(), keys, argv...)
	eval := pipe.Eval(ctx, s.Source(), keys, argv...)
	_, _ = pipe.Exec(ctx)
	if v, err := ints(s, sha); err == nil {
		return v, nil
	}
	v, err := ints(s, eval)
	if err != nil {
		return nil, closedErr(err)
	}
	return v, nil
}

func (n runsTwice) String() string { return n.rdb.Options().Addr }

// keepsArgs keeps the keys and args of the last call that returned and reuses them as its
// scratch space on the next call, writing that call's keys and args into them.
type keepsArgs struct {
	inner core.Node

	mu         sync.Mutex
	keys, args []string
}

func newKeepsArgs(t testing.TB, addr string) core.Node { return &keepsArgs{inner: goodNode(t, addr)} }

func (n *keepsArgs) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	n.mu.Lock()
	copy(n.keys, keys)
	copy(n.args, args)
	n.mu.Unlock()
	v, err := n.inner.Eval(ctx, s, keys, args...)
	n.mu.Lock()
	n.keys, n.args = keys, args
	n.mu.Unlock()
	return v, err
}

func (n *keepsArgs) String() string { return n.inner.String() }

// unnamed and sameName are the go-redis backend with a String() that names nothing, or the
// same thing for every server.
type unnamed struct{ core.Node }

func newUnnamed(t testing.TB, addr string) core.Node { return unnamed{eval{goodNode(t, addr)}} }

func (unnamed) String() string { return "" }

type sameName struct{ core.Node }

func newSameName(t testing.TB, addr string) core.Node { return sameName{eval{goodNode(t, addr)}} }

func (sameName) String() string { return "redis" }

// newClusterSameName is sameName over a cluster client: a backend that names a Node of a
// cluster by the kind of its client, not by the cluster's masters.
func newClusterSameName(t testing.TB, addrs []string) core.Node {
	return sameName{eval{goodClusterNode(t, addrs)}}
}

// eval hides every method of a Node but Eval, EvalStrings and String.
type eval struct{ n core.Node }

func (e eval) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	return e.n.Eval(ctx, s, keys, args...)
}

func (e eval) String() string { return e.n.String() }

// dropsEmptyArgs leaves out empty arguments, as a driver that skips empty strings would.
type dropsEmptyArgs struct{ inner core.Node }

func newDropsEmptyArgs(t testing.TB, addr string) core.Node { return dropsEmptyArgs{goodNode(t, addr)} }

func (n dropsEmptyArgs) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	var kept []string
	for _, a := range args {
		if a != "" {
			kept = append(kept, a)
		}
	}
	return n.inner.Eval(ctx, s, keys, kept...)
}

func (n dropsEmptyArgs) String() string { return n.inner.String() }

// fiveKeys passes at most five of a call's keys, as a backend with a fixed-size array for
// them, written when core's scripts took no more, would: the readers key, the sixth of
// acquire and release, never arrives.
type fiveKeys struct{ inner core.Node }

func newFiveKeys(t testing.TB, addr string) core.Node { return fiveKeys{goodNode(t, addr)} }

func (n fiveKeys) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	return n.inner.Eval(ctx, s, keys[:min(len(keys), 5)], args...)
}

func (n fiveKeys) String() string { return n.inner.String() }

// sixteenKeys passes at most sixteen of a call's keys, as a backend with a fixed-size array
// for them would: a lock's six arrive, and a semaphore's first ten permits, but not the rest
// of a semaphore of more permits.
type sixteenKeys struct{ inner core.Node }

func newSixteenKeys(t testing.TB, addr string) core.Node { return sixteenKeys{goodNode(t, addr)} }

func (n sixteenKeys) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	return n.inner.Eval(ctx, s, keys[:min(len(keys), 16)], args...)
}

func (n sixteenKeys) String() string { return n.inner.String() }

// sharedReply copies every reply into one buffer of the Node's and returns the buffer.
type sharedReply struct {
	inner core.Node
	mu    sync.Mutex
	buf   []int64
	strs  []string // EvalStrings's buffer
}

func newSharedReply(t testing.TB, addr string) core.Node {
	return &sharedReply{inner: goodNode(t, addr)}
}

func (n *sharedReply) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	v, err := n.inner.Eval(ctx, s, keys, args...)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.buf = append(n.buf[:0], v...)
	return n.buf, nil
}

func (n *sharedReply) String() string { return n.inner.String() }

// subscriberOf returns the go-redis backend's Node on addr as the Subscriber it is.
func subscriberOf(t testing.TB, addr string) (core.Node, core.Subscriber) {
	n := goodNode(t, addr)
	return n, n.(core.Subscriber)
}

// broadcast hands every message of the node to every handler, whatever its channel.
type broadcast struct {
	core.Node
	sub core.Subscriber

	mu       sync.Mutex
	handlers map[*func(string)]struct{}
}

func newBroadcast(t testing.TB, addr string) core.Node {
	n, sub := subscriberOf(t, addr)
	return &broadcast{Node: eval{n}, sub: sub, handlers: map[*func(string)]struct{}{}}
}

func (b *broadcast) Subscribe(ctx context.Context, channel string, onMessage func(string)) (func(), error) {
	h := &onMessage
	b.mu.Lock()
	b.handlers[h] = struct{}{}
	b.mu.Unlock()
	unsub, err := b.sub.Subscribe(ctx, channel, func(payload string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		for h := range b.handlers {
			(*h)(payload)
		}
	})
	forget := func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.handlers, h)
	}
	if err != nil {
		forget()
		return nil, err
	}
	return func() { forget(); unsub() }, nil
}

// neverUnsubscribes stops delivering to a handler at unsubscribe, but never unsubscribes on
// the server.
type neverUnsubscribes struct {
	core.Node
	sub core.Subscriber
}

func newNeverUnsubscribes(t testing.TB, addr string) core.Node {
	n, sub := subscriberOf(t, addr)
	return neverUnsubscribes{eval{n}, sub}
}

func (n neverUnsubscribes) Subscribe(ctx context.Context, channel string, onMessage func(string)) (func(), error) {
	var stopped atomic.Bool
	_, err := n.sub.Subscribe(ctx, channel, func(payload string) {
		if !stopped.Load() {
			onMessage(payload)
		}
	})
	if err != nil {
		return nil, err
	}
	return func() { stopped.Store(true) }, nil
}

// earlyReady returns from Subscribe at once, while the subscription is still on its way.
type earlyReady struct {
	core.Node
	sub core.Subscriber
}

func newEarlyReady(t testing.TB, addr string) core.Node {
	n, sub := subscriberOf(t, addr)
	return earlyReady{eval{n}, sub}
}

func (n earlyReady) Subscribe(ctx context.Context, channel string, onMessage func(string)) (func(), error) {
	done := make(chan func(), 1)
	go func() {
		unsub, _ := n.sub.Subscribe(context.WithoutCancel(ctx), channel, onMessage)
		done <- unsub
	}()
	return sync.OnceFunc(func() {
		if unsub := <-done; unsub != nil {
			unsub()
		}
	}), nil
}

// firstUnconfirmed is the go-redis backend whose first Subscribe returns as soon as
// SUBSCRIBE is written on its new pub/sub connection, before the server confirmed it (as
// go-redis's own PubSub.Subscribe does); later ones, on the open connection, wait for the
// confirmation.
type firstUnconfirmed struct {
	*goredis.Node
	written chan struct{} // closed once a connection of the client wrote a SUBSCRIBE
	first   *atomic.Bool  // set by the first Subscribe
}

func newFirstUnconfirmed(t testing.TB, addr string) core.Node {
	written := make(chan struct{})
	var once sync.Once
	rdb := redis.NewClient(&redis.Options{
		Addr: addr, ContextTimeoutEnabled: true,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return watchedConn{c, func() { once.Do(func() { close(written) }) }}, nil
		},
	})
	t.Cleanup(func() { _ = rdb.Close() })
	onCloseClients(t, func() { _ = rdb.Close() })
	n := goredis.New(rdb)
	t.Cleanup(func() { _ = n.Close() })
	return firstUnconfirmed{Node: n, written: written, first: new(atomic.Bool)}
}

func (n firstUnconfirmed) Subscribe(ctx context.Context, channel string, onMessage func(string)) (func(), error) {
	if n.first.Swap(true) {
		return n.Node.Subscribe(ctx, channel, onMessage)
	}
	type result struct {
		unsub func()
		err   error
	}
	done := make(chan result, 1)
	inner, cancel := context.WithCancel(context.WithoutCancel(ctx)) // ends at unsubscribe
	go func() {
		unsub, err := n.Node.Subscribe(inner, channel, onMessage)
		done <- result{unsub, err}
	}()
	later := func() {
		cancel()
		if r := <-done; r.unsub != nil {
			r.unsub()
		}
	}
	select {
	case r := <-done:
		cancel()
		return r.unsub, r.err
	case <-n.written: // the fault: not yet confirmed
		return sync.OnceFunc(later), nil
	case <-ctx.Done():
		go later()
		return nil, ctx.Err()
	}
}

// watchedConn calls sawSubscribe whenever it writes a SUBSCRIBE command.
type watchedConn struct {
	net.Conn
	sawSubscribe func()
}

func (c watchedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 && bytes.Contains(bytes.ToLower(b[:n]), []byte("subscribe")) {
		c.sawSubscribe()
	}
	return n, err
}

// connPerChannel opens a pub/sub connection of its own for each channel: each Subscribe
// makes a new Node (a new client) and subscribes through it. It reports ShardedPubSub as
// the Nodes it makes do. Otherwise it is right: on a single server it subscribes through
// redigo Nodes, whose new connections send no handshake, so that SUBSCRIBE is their first
// command and Subscribe waits for the server's confirmation of it, not for a handshake's
// reply (go-redis's HELLO, which pubsub/ready-means-confirmed would hold back too).
type connPerChannel struct {
	core.Node
	newSub  func() core.Subscriber
	sharded bool
}

func newConnPerChannel(t testing.TB, addr string) core.Node {
	return newConnPerChannelOf(eval{goodNode(t, addr)}, func() core.Subscriber {
		pool := &redigoredis.Pool{
			MaxIdle: 2,
			DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
				return redigoredis.DialContext(ctx, "tcp", addr)
			},
		}
		t.Cleanup(func() { _ = pool.Close() })
		n := redigo.New(pool, addr)
		t.Cleanup(func() { _ = n.Close() })
		return n
	})
}

func newClusterConnPerChannel(t testing.TB, addrs []string) core.Node {
	return newConnPerChannelOf(eval{goodClusterNode(t, addrs)}, func() core.Subscriber {
		return goodClusterNode(t, addrs).(core.Subscriber)
	})
}

func newConnPerChannelOf(n core.Node, newSub func() core.Subscriber) core.Node {
	sh, ok := newSub().(core.ShardedPubSub)
	return connPerChannel{Node: n, newSub: newSub, sharded: ok && sh.ShardedPubSub()}
}

func (n connPerChannel) Subscribe(ctx context.Context, channel string, onMessage func(string)) (func(), error) {
	return n.newSub().Subscribe(ctx, channel, onMessage)
}

func (n connPerChannel) ShardedPubSub() bool { return n.sharded }

// hidesSharded wraps the go-redis backend over a cluster client, whose Subscribe uses
// SSUBSCRIBE, in a Node that embeds only core.Node and core.Subscriber: it hides
// core.ShardedPubSub, so core publishes its release notifications with PUBLISH, which no
// SSUBSCRIBE receives.
type hidesSharded struct {
	core.Node
	core.Subscriber
}

func newHidesSharded(t testing.TB, addrs []string) core.Node {
	n := goodClusterNode(t, addrs)
	return hidesSharded{eval{n}, n.(core.Subscriber)}
}

// claimsSharded is the go-redis backend over a single-server client, whose Subscribe uses
// SUBSCRIBE, with a ShardedPubSub that reports true: core would publish with SPUBLISH,
// which no SUBSCRIBE receives.
type claimsSharded struct{ *goredis.Node }

func newClaimsSharded(t testing.TB, addr string) core.Node {
	return claimsSharded{goodNode(t, addr).(*goredis.Node)}
}

func (claimsSharded) ShardedPubSub() bool { return true }

// boxed returns args as go-redis takes them.
func boxed(args []string) []any {
	argv := make([]any, len(args))
	for i, a := range args {
		argv[i] = a
	}
	return argv
}

// newCountsUnsubscribes, newJoinsPending, newGivesUp and newUnsubscribesAtConfirm are
// forgetful with wakesAll and one fault each (see subscriberFault).
func newCountsUnsubscribes(t testing.TB, addr string) core.Node {
	return newForgetfulOf(t, addr, wakesAll, countsUnsubscribes)
}

func newJoinsPending(t testing.TB, addr string) core.Node {
	return newForgetfulOf(t, addr, wakesAll, joinsPending)
}

func newGivesUp(t testing.TB, addr string) core.Node {
	return newForgetfulOf(t, addr, wakesAll, givesUp)
}

func newUnsubscribesAtConfirm(t testing.TB, addr string) core.Node {
	return newForgetfulOf(t, addr, wakesAll, unsubscribesAtConfirm)
}
