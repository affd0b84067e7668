package conformance_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
)

// The deliberately faulty nodes of the meta-tests. Each breaks one clause of the core.Node
// or core.Subscriber contract the way a plausible backend would, and is otherwise correct,
// so that the suite must catch it by the check for that clause.

// newClient returns a go-redis client for addr, closed when t ends.
func newClient(t testing.TB, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// goodNode is the go-redis backend, as its users construct it.
func goodNode(t testing.TB, addr string) core.Node {
	n := goredis.New(newClient(t, addr))
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// ignoresCtx runs every call with context.Background(): it waits for the server however
// long it takes (here, until go-redis's own 3 s read timeout).
type ignoresCtx struct{ inner core.Node }

func newIgnoresCtx(t testing.TB, addr string) core.Node {
	// No retries: once the suite closes its connections, the call ends at once.
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return ignoresCtx{goredis.New(rdb)}
}

func (n ignoresCtx) Eval(_ context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	return n.inner.Eval(context.Background(), s, keys, args...)
}

func (n ignoresCtx) SetNX(_ context.Context, key, value string, ttl time.Duration) (bool, error) {
	return n.inner.(core.Setter).SetNX(context.Background(), key, value, ttl)
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
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	argv := make([]any, len(args))
	for i, a := range args {
		argv[i] = a
	}
	type result struct {
		v   []int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := n.rdb.EvalSha(ctx, s.SHA1(), keys, argv...).Int64Slice()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, r.err
		}
		return r.v, nil
	case <-ctx.Done():
		return nil, ctx.Err()
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
// that messages may have been lost, so a release during the outage goes unnoticed.
type forgetful struct {
	core.Node
	rdb *redis.Client

	mu       sync.Mutex
	ps       *redis.PubSub
	subs     map[string]map[*subscriber]struct{}
	confirms map[string][]chan struct{} // Subscribe calls awaiting the server's confirmation
	wg       sync.WaitGroup
}

type subscriber struct{ fn func(string) }

var _ core.Subscriber = (*forgetful)(nil)

func newForgetful(t testing.TB, addr string) core.Node {
	rdb := newClient(t, addr)
	f := &forgetful{
		Node:     goredis.New(rdb),
		rdb:      rdb,
		subs:     map[string]map[*subscriber]struct{}{},
		confirms: map[string][]chan struct{}{},
	}
	t.Cleanup(f.close)
	return f
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
	if f.subs[channel] == nil {
		f.subs[channel] = map[*subscriber]struct{}{}
	}
	f.subs[channel][s] = struct{}{}
	f.confirms[channel] = append(f.confirms[channel], confirmed)
	f.mu.Unlock()

	unsubscribe := sync.OnceFunc(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.subs[channel], s)
	})
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
			time.Sleep(10 * time.Millisecond) // go-redis reconnects on the next Receive
			continue
		}
		f.mu.Lock()
		switch m := msg.(type) {
		case *redis.Subscription:
			// The fault: a confirmation that nobody waits for (go-redis re-subscribed after a
			// reconnect) should make every subscriber of the channel re-check. It is ignored.
			for _, c := range f.confirms[m.Channel] {
				close(c)
			}
			delete(f.confirms, m.Channel)
		case *redis.Message:
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
