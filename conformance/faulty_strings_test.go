package conformance_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/backends/redigo"
	"github.com/go-redlock/redlock/core"
	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
)

// The faulty nodes' EvalStrings. Where a fault is one a backend would make in EvalStrings
// as well (ignoring ctx, no EVAL fallback, an error as a reply, running a script twice, a
// shared reply buffer), EvalStrings has it too, for the strings checks to catch; the other
// faults are of Eval alone, and EvalStrings is the go-redis backend's.

func (n ignoresCtx) EvalStrings(_ context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	return n.inner.EvalStrings(context.Background(), s, keys, args...)
}

func (n preloaded) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	return honourCtx(ctx, func() ([]string, error) {
		return stringsOf(s, n.rdb.EvalSha(ctx, s.SHA1(), keys, boxed(args)...))
	})
}

func (n errorAsReply) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	v, err := n.inner.EvalStrings(ctx, s, keys, args...)
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return []string{"0"}, nil
	}
	return v, err
}

func (n losesSign) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	return n.inner.EvalStrings(ctx, s, keys, args...)
}

func (n evalEveryCall) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	argv := boxed(args)
	wrong := core.NewScript(s.Name(), s.Source()+"\n").SHA1()
	return honourCtx(ctx, func() ([]string, error) {
		c := n.rdb.EvalSha(ctx, wrong, keys, argv...)
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			c = n.rdb.Eval(ctx, s.Source(), keys, argv...)
		}
		return stringsOf(s, c)
	})
}

func (n runsTwice) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	argv := boxed(args)
	pipe := n.rdb.Pipeline()
	sha := pipe.EvalSha(ctx, s.SHA1(), keys, argv...)
	eval := pipe.Eval(ctx, s.Source(), keys, argv...)
	_, _ = pipe.Exec(ctx)
	if v, err := stringsOf(s, sha); err == nil {
		return v, nil
	}
	return stringsOf(s, eval)
}

func (n *keepsArgs) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	return n.inner.EvalStrings(ctx, s, keys, args...)
}

func (e eval) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	return e.n.EvalStrings(ctx, s, keys, args...)
}

func (n dropsEmptyArgs) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	return n.inner.EvalStrings(ctx, s, keys, args...)
}

func (n fiveKeys) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	return n.inner.EvalStrings(ctx, s, keys, args...)
}

func (n sixteenKeys) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	return n.inner.EvalStrings(ctx, s, keys, args...)
}

func (n *sharedReply) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	v, err := n.inner.EvalStrings(ctx, s, keys, args...)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.strs = append(n.strs[:0], v...)
	return n.strs, nil
}

// stringsOf returns c's reply as EvalStrings does (see core.Strings).
func stringsOf(s *core.Script, c *redis.Cmd) ([]string, error) {
	v, err := c.Result()
	if err != nil {
		return nil, closedErr(err)
	}
	return core.Strings(s, v)
}

// The faults of EvalStrings alone, each breaking one clause of Eval's contract that
// EvalStrings keeps too; their Eval is the go-redis backend's.

// stringsEvalEveryCall sends EVAL for every EvalStrings, as a backend that thought the
// leader script too rare to cache would: the server compiles the script at every call.
type stringsEvalEveryCall struct {
	*goredis.Node
	rdb *redis.Client
}

func newStringsEvalEveryCall(t testing.TB, addr string) core.Node {
	rdb := newClient(t, addr)
	n := goredis.New(rdb)
	t.Cleanup(func() { _ = n.Close() })
	return stringsEvalEveryCall{n, rdb}
}

func (n stringsEvalEveryCall) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	return honourCtx(ctx, func() ([]string, error) {
		return stringsOf(s, n.rdb.Eval(ctx, s.Source(), keys, boxed(args)...))
	})
}

// stringsRetriesErrors sends an EvalStrings once more after any error: a script that wrote
// and then failed runs twice.
type stringsRetriesErrors struct{ *goredis.Node }

func newStringsRetriesErrors(t testing.TB, addr string) core.Node {
	return stringsRetriesErrors{goodGoredis(t, addr)}
}

func (n stringsRetriesErrors) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	v, err := n.Node.EvalStrings(ctx, s, keys, args...)
	if err != nil {
		v, err = n.Node.EvalStrings(ctx, s, keys, args...)
	}
	return v, err
}

// stringsPoolOfOne sends EvalStrings through a redigo pool of one connection of its own
// (MaxActive 1) that does not wait for it (Wait false), as a backend that thought one
// connection enough for the rare leader reads would: a call made while another is under
// way fails with "connection pool exhausted". The redigo backend does the rest (EVALSHA,
// NOSCRIPT, ctx, a closed pool).
type stringsPoolOfOne struct {
	*goredis.Node
	strs *redigo.Node
}

func newStringsPoolOfOne(t testing.TB, addr string) core.Node {
	pool := &redigoredis.Pool{
		MaxIdle: 1, MaxActive: 1, Wait: false,
		DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
			return redigoredis.DialContext(ctx, "tcp", addr)
		},
	}
	t.Cleanup(func() { _ = pool.Close() })
	onCloseClients(t, func() { _ = pool.Close() })
	strs := redigo.New(pool, addr)
	t.Cleanup(func() { _ = strs.Close() })
	return stringsPoolOfOne{goodGoredis(t, addr), strs}
}

func (n stringsPoolOfOne) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	return n.strs.EvalStrings(ctx, s, keys, args...)
}
