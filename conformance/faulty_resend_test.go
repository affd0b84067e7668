package conformance_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
)

// More deliberately faulty nodes: each breaks one clause that shows only after a timeout, a
// reconnect, an error or an unusual reply, and is the go-redis backend otherwise.

// goodGoredis is goodNode as the backend's own type, for faults that embed it.
func goodGoredis(t testing.TB, addr string) *goredis.Node { return goodNode(t, addr).(*goredis.Node) }

// ownTimeout is the read timeout of the faults that resend after a timeout of their own.
const ownTimeout = 500 * time.Millisecond

// retriesErrors sends a call once more after any error, as a backend that retries every
// failure would: a script that wrote and then failed runs twice.
type retriesErrors struct{ *goredis.Node }

func newRetriesErrors(t testing.TB, addr string) core.Node {
	return retriesErrors{goodGoredis(t, addr)}
}

func (n retriesErrors) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	v, err := n.Node.Eval(ctx, s, keys, args...)
	if err != nil {
		v, err = n.Node.Eval(ctx, s, keys, args...)
	}
	return v, err
}

// withOwnTimeout runs call under ctx bounded by ownTimeout, and once more under ctx if that
// timeout (not ctx) ended it, as a backend with a read timeout of its own and retries does.
func withOwnTimeout[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	attempt, cancel := context.WithTimeout(ctx, ownTimeout)
	deadline, _ := attempt.Deadline()
	v, err := call(attempt)
	cancel()
	// The driver's read deadline may fire a moment before attempt reports its end.
	if err != nil && ctx.Err() == nil && !time.Now().Before(deadline) {
		return call(ctx)
	}
	return v, err
}

// resendsEval sends a script again when no reply came within its own read timeout, while
// the first request is still waiting behind a slow server: the script runs twice.
type resendsEval struct{ *goredis.Node }

func newResendsEval(t testing.TB, addr string) core.Node { return resendsEval{goodGoredis(t, addr)} }

func (n resendsEval) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	return withOwnTimeout(ctx, func(ctx context.Context) ([]int64, error) { return n.Node.Eval(ctx, s, keys, args...) })
}

// nilAsEmpty returns an empty reply, and no error, for a nil reply.
type nilAsEmpty struct{ *goredis.Node }

func newNilAsEmpty(t testing.TB, addr string) core.Node { return nilAsEmpty{goodGoredis(t, addr)} }

func (n nilAsEmpty) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	v, err := n.Node.Eval(ctx, s, keys, args...)
	if errors.Is(err, redis.Nil) {
		return []int64{}, nil
	}
	return v, err
}

// nilWaits waits for its context's end after a nil reply, as a decoding that takes nil
// for the start of something longer would, and returns the context's error.
type nilWaits struct{ *goredis.Node }

func newNilWaits(t testing.TB, addr string) core.Node { return nilWaits{goodGoredis(t, addr)} }

func (n nilWaits) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	v, err := n.Node.Eval(ctx, s, keys, args...)
	if errors.Is(err, redis.Nil) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return v, err
}

// shortBuffer reads replies into a fixed buffer of 256 integers, and drops the rest.
type shortBuffer struct{ *goredis.Node }

func newShortBuffer(t testing.TB, addr string) core.Node { return shortBuffer{goodGoredis(t, addr)} }

func (n shortBuffer) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	v, err := n.Node.Eval(ctx, s, keys, args...)
	return v[:min(len(v), 256)], err
}

// ownClosedError reports a closed client with an error of its own, which does not match
// core.ErrClosed.
type ownClosedError struct{ *goredis.Node }

var errOwnClosed = errors.New("redis backend: the client is closed")

func newOwnClosedError(t testing.TB, addr string) core.Node {
	return ownClosedError{goodGoredis(t, addr)}
}

func (n ownClosedError) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	v, err := n.Node.Eval(ctx, s, keys, args...)
	if errors.Is(err, core.ErrClosed) {
		return nil, errOwnClosed
	}
	return v, err
}

// newWrapsErrorsSingle is wrapsErrors over a single-server client: WRONGTYPE no longer
// starts the error's message.
func newWrapsErrorsSingle(t testing.TB, addr string) core.Node {
	return wrapsErrors{goodGoredis(t, addr)}
}

// ignoresCancel honours Subscribe's deadline but not its cancellation.
type ignoresCancel struct{ *goredis.Node }

func newIgnoresCancel(t testing.TB, addr string) core.Node {
	return ignoresCancel{goodGoredis(t, addr)}
}

func (n ignoresCancel) Subscribe(ctx context.Context, channel string, onMessage func(string)) (func(), error) {
	inner := context.WithoutCancel(ctx)
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		inner, cancel = context.WithDeadline(inner, deadline)
		defer cancel()
	}
	return n.Node.Subscribe(inner, channel, onMessage)
}

// keepsTimedOut returns ctx's error from a Subscribe whose ctx ended first, but lets the
// subscription go on and never unsubscribes it once it is confirmed.
type keepsTimedOut struct{ *goredis.Node }

func newKeepsTimedOut(t testing.TB, addr string) core.Node {
	return keepsTimedOut{goodGoredis(t, addr)}
}

func (n keepsTimedOut) Subscribe(ctx context.Context, channel string, onMessage func(string)) (func(), error) {
	type result struct {
		unsub func()
		err   error
	}
	done := make(chan result, 1)
	go func() {
		inner, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		unsub, err := n.Node.Subscribe(inner, channel, onMessage)
		done <- result{unsub, err}
	}()
	select {
	case r := <-done:
		return r.unsub, r.err
	case <-ctx.Done():
		return nil, ctx.Err() // the fault: the subscription, once confirmed, stays
	}
}

// byHashTag hands each message to every handler whose channel has the message's channel's
// hash tag, as a backend that files its handlers by slot would.
type byHashTag struct {
	*goredis.Node

	mu       sync.Mutex
	handlers map[*func(string)]string // handler → its channel
}

func newByHashTag(t testing.TB, addr string) core.Node {
	return &byHashTag{Node: goodGoredis(t, addr), handlers: map[*func(string)]string{}}
}

// hashTag returns the text between the first '{' of channel and the next '}', or channel.
func hashTag(channel string) string {
	if _, rest, ok := strings.Cut(channel, "{"); ok {
		if tag, _, ok := strings.Cut(rest, "}"); ok && tag != "" {
			return tag
		}
	}
	return channel
}

func (b *byHashTag) Subscribe(ctx context.Context, channel string, onMessage func(string)) (func(), error) {
	h := &onMessage
	b.mu.Lock()
	b.handlers[h] = channel
	b.mu.Unlock()
	forget := func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.handlers, h)
	}
	unsub, err := b.Node.Subscribe(ctx, channel, func(payload string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		for h, ch := range b.handlers {
			if hashTag(ch) == hashTag(channel) {
				(*h)(payload)
			}
		}
	})
	if err != nil {
		forget()
		return nil, err
	}
	return func() { forget(); unsub() }, nil
}

// integerAsArray is the go-redis backend whose Eval decodes the reply of a script other
// than core's with go-redis's SliceCmd, which takes an integer reply for an array's length:
// "return 0" gives an empty reply, "return 1" waits for an element that never comes.
type integerAsArray struct {
	*goredis.Node
	rdb *redis.Client
}

func newIntegerAsArray(t testing.TB, addr string) core.Node {
	rdb := newClient(t, addr)
	n := goredis.New(rdb)
	t.Cleanup(func() { _ = n.Close() })
	return integerAsArray{n, rdb}
}

func (n integerAsArray) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if slices.Contains(core.Scripts(), s) {
		return n.Node.Eval(ctx, s, keys, args...)
	}
	argv := []any{"eval", s.Source(), len(keys)}
	for _, k := range keys {
		argv = append(argv, k)
	}
	for _, a := range args {
		argv = append(argv, a)
	}
	cmd := redis.NewSliceCmd(ctx, argv...)
	_ = n.rdb.Process(ctx, cmd)
	v, err := cmd.Result()
	if err != nil {
		return nil, closedErr(err)
	}
	return core.Ints(s, v)
}

// stringsAsArray is the go-redis backend whose EvalStrings decodes every reply with
// go-redis's SliceCmd, which takes a reply of an integer or a bulk string for an array's
// length: "return 7" waits for seven elements that never come.
type stringsAsArray struct {
	*goredis.Node
	rdb *redis.Client
}

func newStringsAsArray(t testing.TB, addr string) core.Node {
	rdb := newClient(t, addr)
	n := goredis.New(rdb)
	t.Cleanup(func() { _ = n.Close() })
	return stringsAsArray{n, rdb}
}

func (n stringsAsArray) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	argv := []any{"eval", s.Source(), len(keys)}
	for _, k := range keys {
		argv = append(argv, k)
	}
	for _, a := range args {
		argv = append(argv, a)
	}
	cmd := redis.NewSliceCmd(ctx, argv...)
	done := make(chan struct{})
	go func() { defer close(done); _ = n.rdb.Process(ctx, cmd) }()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	v, err := cmd.Result()
	if err != nil {
		return nil, closedErr(err)
	}
	return core.Strings(s, v)
}
