package fence_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"

	"github.com/go-redlock/redlock"
	rlgoredis "github.com/go-redlock/redlock/backends/goredis"
	rlredigo "github.com/go-redlock/redlock/backends/redigo"
	rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
	rlvalkey "github.com/go-redlock/redlock/backends/valkey"
	"github.com/go-redlock/redlock/fence"
	"github.com/go-redlock/redlock/internal/redistest"
)

// driver makes a redlock.Node for the server at addr with one of the four backends.
type driver struct {
	name string
	node func(t testing.TB, addr string) redlock.Node
	mini bool // runs against miniredis too
}

var drivers = []driver{
	{"goredis", func(t testing.TB, addr string) redlock.Node {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		return rlgoredis.New(rdb)
	}, true},
	{"redigo", func(t testing.TB, addr string) redlock.Node {
		pool := &redigo.Pool{DialContext: func(ctx context.Context) (redigo.Conn, error) {
			return redigo.DialContext(ctx, "tcp", addr)
		}}
		t.Cleanup(func() { _ = pool.Close() })
		return rlredigo.New(pool, addr)
	}, true},
	{"rueidis", func(t testing.TB, addr string) redlock.Node {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return rlrueidis.New(c)
	}, false},
	{"valkey", func(t testing.TB, addr string) redlock.Node {
		c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return rlvalkey.New(c)
	}, false},
}

// server is a Redis to run a test on: miniredis, or a real redis-server (skipped when
// redis-server is not installed).
type server struct {
	name  string
	start func(t testing.TB) string // returns its address
}

var servers = []server{
	{"miniredis", func(t testing.TB) string { return miniredis.RunT(t).Addr() }},
	{"redis-server", func(t testing.TB) string { return redistest.Start(t).Addr() }},
}

// eachNode runs f for every driver on every server it runs on, with a Node and a go-redis
// client of the same server, to look at what the guard wrote.
func eachNode(t *testing.T, f func(t *testing.T, node redlock.Node, rdb *redis.Client)) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			addr := srv.start(t)
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { _ = rdb.Close() })
			for _, d := range drivers {
				if srv.name == "miniredis" && !d.mini {
					continue
				}
				t.Run(d.name, func(t *testing.T) {
					if err := rdb.FlushAll(ctxT(t)).Err(); err != nil {
						t.Fatal(err)
					}
					f(t, d.node(t, addr), rdb)
				})
			}
		})
	}
}

// ctxT returns a context that ends with the test, or after a minute: generous, for real
// servers on a loaded machine.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestRedisWrite writes a sequence of tokens to one record, through every driver on
// miniredis and on redis-server: each is accepted exactly when it is not older than the
// highest before it, a refused write says which token is higher, and the record always
// holds the value written with the highest token. The tokens cross decimal lengths and 2^53,
// where a comparison of doubles would fail.
func TestRedisWrite(t *testing.T) {
	steps := []struct {
		token   uint64
		value   string
		highest uint64 // 0: accepted; else the higher token that refuses it
	}{
		{999, "first", 0},              // no record: any token
		{1000, "longer token", 0},      // 4 digits > 3 digits
		{999, "older", 1000},           // older than the highest
		{1000, "same token", 0},        // the same holder writes again
		{1795305105661725, "today", 0}, // a token of today (server microseconds)
		{1795305105661724, "one less", 1795305105661725},
		{1 << 53, "2^53", 0},
		{1<<53 + 1, "2^53+1", 0}, // the same double as 2^53
		{1 << 53, "2^53 again", 1<<53 + 1},
		{math.MaxInt64, "max int64", 0},
		{math.MaxUint64 - 1, "huge", 0},
		{math.MaxUint64 - 2, "huge - 1", math.MaxUint64 - 1},
		{math.MaxUint64, "max", 0},
		{1, "one", math.MaxUint64},
		{math.MaxUint64, "", 0}, // an empty value is a value
	}
	eachNode(t, func(t *testing.T, node redlock.Node, rdb *redis.Client) {
		ctx := ctxT(t)
		g, err := fence.NewRedis(node, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		const key = "orders:42"
		want := ""
		for _, s := range steps {
			err := g.Write(ctx, key, s.token, s.value)
			if s.highest == 0 {
				if err != nil {
					t.Fatalf("Write(%d, %q): %v, want it accepted", s.token, s.value, err)
				}
				want = s.value
			} else {
				var stale *fence.StaleError
				if !errors.Is(err, fence.ErrStale) || !errors.As(err, &stale) {
					t.Fatalf("Write(%d, %q): %v, want ErrStale", s.token, s.value, err)
				}
				if *stale != (fence.StaleError{Resource: key, Token: s.token, Highest: s.highest}) {
					t.Errorf("Write(%d, %q): %+v, want highest %d", s.token, s.value, *stale, s.highest)
				}
				if !strings.Contains(err.Error(), `"orders:42"`) || !strings.HasPrefix(err.Error(), "redlock: ") {
					t.Errorf("error %q does not name the key after redlock:", err)
				}
			}
			if got, err := rdb.HGet(ctx, key, "value").Result(); err != nil || got != want {
				t.Fatalf("after Write(%d, %q) the record's value is %q (%v), want %q", s.token, s.value, got, err, want)
			}
		}
		if got, err := g.Token(ctx, key); err != nil || got != math.MaxUint64 {
			t.Errorf("Token = %d, %v; want %d", got, err, uint64(math.MaxUint64))
		}
		if got, err := g.Token(ctx, "no such record"); err != nil || got != 0 {
			t.Errorf("Token of a missing record = %d, %v; want 0, nil", got, err)
		}
	})
}

// TestRedisTTL: every accepted write sets the record's TTL, a refused one leaves it, and a
// record expires whole (value and token together); after that any token writes it again.
// miniredis's clock is moved by hand, so no test time passes.
func TestRedisTTL(t *testing.T) {
	for _, d := range drivers[:2] {
		t.Run(d.name, func(t *testing.T) {
			m := miniredis.RunT(t)
			g, err := fence.NewRedis(d.node(t, m.Addr()), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			ctx := ctxT(t)
			steps := []struct {
				forward time.Duration // moved before the write
				token   uint64
				stale   bool
				ttl     time.Duration // the record's TTL after the write; 0: gone
			}{
				{0, 5, false, 10 * time.Second},
				{6 * time.Second, 4, true, 4 * time.Second},   // refused: the TTL runs on
				{time.Second, 5, false, 10 * time.Second},     // accepted: reset
				{9 * time.Second, 7, false, 10 * time.Second}, // before expiry
				{10 * time.Second, 0, false, 0},               // expired: no write, just look
				{0, 3, false, 10 * time.Second},               // an empty record takes any token
			}
			for i, s := range steps {
				m.FastForward(s.forward)
				if s.token != 0 {
					err := g.Write(ctx, "k", s.token, fmt.Sprint("v", i))
					if s.stale != errors.Is(err, fence.ErrStale) || !s.stale && err != nil {
						t.Fatalf("step %d: Write(%d) = %v, want stale %v", i, s.token, err, s.stale)
					}
				}
				if got := m.TTL("k"); got != s.ttl {
					t.Errorf("step %d: TTL %v, want %v", i, got, s.ttl)
				}
				if s.ttl == 0 && m.Exists("k") {
					t.Errorf("step %d: the record outlived its TTL", i)
				}
			}
		})
	}
}

// TestRedisTTLOnServer: on redis-server, a write sets the TTL given to NewRedis (rounded up
// to milliseconds), read back with PTTL.
func TestRedisTTLOnServer(t *testing.T) {
	addr := redistest.Start(t).Addr()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	g, err := fence.NewRedis(drivers[0].node(t, addr), time.Hour+time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	if g.TTL() != time.Hour+time.Millisecond {
		t.Errorf("TTL() = %v, want it rounded up to %v", g.TTL(), time.Hour+time.Millisecond)
	}
	ctx := ctxT(t)
	if err := g.Write(ctx, "k", 1, "v"); err != nil {
		t.Fatal(err)
	}
	// Between the write and PTTL, real time passes: a minute is more than enough.
	if ttl := rdb.PTTL(ctx, "k").Val(); ttl <= time.Hour-time.Minute || ttl > time.Hour+time.Millisecond {
		t.Errorf("PTTL = %v, want about an hour", ttl)
	}
}

// TestRedisForeignRecords: a key that package fence did not write makes an error, and is
// left alone.
func TestRedisForeignRecords(t *testing.T) {
	cases := []struct {
		name  string
		setup func(ctx context.Context, rdb *redis.Client) error
		want  error  // matched with errors.Is, if not nil
		text  string // in the error
	}{
		{"a token that is not 20 digits", func(ctx context.Context, rdb *redis.Client) error {
			return rdb.HSet(ctx, "k", "token", "12", "value", "x").Err()
		}, fence.ErrCorrupt, `"k"`},
		{"a token of 20 characters but not digits", func(ctx context.Context, rdb *redis.Client) error {
			return rdb.HSet(ctx, "k", "token", "0000000000000000000x", "value", "x").Err()
		}, fence.ErrCorrupt, `"k"`},
		{"a token of 20 digits above the largest uint64", func(ctx context.Context, rdb *redis.Client) error {
			return rdb.HSet(ctx, "k", "token", "99999999999999999999", "value", "x").Err()
		}, fence.ErrCorrupt, `"k"`},
		{"a string key", func(ctx context.Context, rdb *redis.Client) error {
			return rdb.Set(ctx, "k", "plain", 0).Err()
		}, nil, "WRONGTYPE"},
	}
	eachNode(t, func(t *testing.T, node redlock.Node, rdb *redis.Client) {
		g, err := fence.NewRedis(node, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxT(t)
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				if err := rdb.Del(ctx, "k").Err(); err != nil {
					t.Fatal(err)
				}
				if err := c.setup(ctx, rdb); err != nil {
					t.Fatal(err)
				}
				before := snapshot(ctx, rdb, "k")
				for _, err := range []error{g.Write(ctx, "k", 7, "new"), tokenErr(g.Token(ctx, "k"))} {
					if err == nil || c.want != nil && !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
						t.Errorf("got %v, want an error matching %v and saying %q", err, c.want, c.text)
					}
				}
				if after := snapshot(ctx, rdb, "k"); after != before {
					t.Errorf("the key changed: %s, then %s", before, after)
				}
			})
		}
	})
}

func tokenErr(_ uint64, err error) error { return err }

// snapshot describes key's type, value and TTL (DUMP would do, but miniredis refuses it on
// a hash).
func snapshot(ctx context.Context, rdb *redis.Client, key string) string {
	var value any
	switch typ := rdb.Type(ctx, key).Val(); typ {
	case "string":
		value = rdb.Get(ctx, key).Val()
	case "hash":
		value = rdb.HGetAll(ctx, key).Val()
	default:
		value = typ
	}
	return fmt.Sprintf("%v ttl %v", value, rdb.PTTL(ctx, key).Val())
}

// TestRedisInvalidInput: bad input is an error matching redlock.ErrInvalid, never a panic,
// and no command is sent.
func TestRedisInvalidInput(t *testing.T) {
	m := miniredis.RunT(t)
	node := drivers[0].node(t, m.Addr())
	var nilNode *rlgoredis.Node
	constructors := []struct {
		name string
		node redlock.Node
		ttl  time.Duration
		text string
	}{
		{"nil node", nil, time.Hour, "nil node"},
		{"typed nil node", nilNode, time.Hour, "nil node"},
		{"zero TTL", node, 0, "below 1ms"},
		{"negative TTL", node, -time.Second, "below 1ms"},
		{"TTL below a millisecond", node, time.Millisecond - 1, "below 1ms"},
	}
	for _, c := range constructors {
		t.Run(c.name, func(t *testing.T) {
			g, err := fence.NewRedis(c.node, c.ttl)
			if g != nil || !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), c.text) {
				t.Errorf("NewRedis = %v, %v; want nil and ErrInvalid saying %q", g, err, c.text)
			}
		})
	}

	good, err := fence.NewRedis(node, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var nilRedis *fence.Redis
	calls := []struct {
		name  string
		g     *fence.Redis
		key   string
		token uint64
		text  string
	}{
		{"empty key", good, "", 1, "empty key"},
		{"token 0", good, "k", 0, "token 0"},
		{"nil Redis", nilRedis, "k", 1, "without NewRedis"},
		{"zero Redis", &fence.Redis{}, "k", 1, "without NewRedis"},
	}
	before := m.CommandCount()
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.g.Write(context.Background(), c.key, c.token, "v")
			if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), c.text) {
				t.Errorf("Write: %v, want ErrInvalid saying %q", err, c.text)
			}
			if c.token != 0 {
				if _, err := c.g.Token(context.Background(), c.key); !errors.Is(err, redlock.ErrInvalid) {
					t.Errorf("Token: %v, want ErrInvalid", err)
				}
			}
		})
	}
	if n := m.CommandCount() - before; n != 0 {
		t.Errorf("bad input sent %d commands", n)
	}
	if nilRedis.TTL() != 0 {
		t.Errorf("a nil Redis's TTL is %v", nilRedis.TTL())
	}
}

// TestRedisOneRoundTrip: a guarded write is one command from the client (EVALSHA, counted
// by a go-redis hook), once the server has the script, accepted or refused: one round trip,
// as a plain SET is.
func TestRedisOneRoundTrip(t *testing.T) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: srv.start(t)})
			defer rdb.Close()
			var sent []string
			rdb.AddHook(countHook{&sent})
			g, err := fence.NewRedis(rlgoredis.New(rdb), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			ctx := ctxT(t)
			if err := g.Write(ctx, "k", 5, "v"); err != nil { // may load the script (NOSCRIPT, EVAL)
				t.Fatal(err)
			}
			for _, token := range []uint64{5, 6, 4, 7, 1} {
				sent = sent[:0]
				if err := g.Write(ctx, "k", token, "v"); err != nil && !errors.Is(err, fence.ErrStale) {
					t.Fatal(err)
				}
				if len(sent) != 1 || sent[0] != "evalsha" {
					t.Fatalf("Write(%d) sent %v, want one EVALSHA", token, sent)
				}
			}
		})
	}
}

// countHook records the name of each command a go-redis client sends.
type countHook struct{ sent *[]string }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		*h.sent = append(*h.sent, cmd.Name())
		return next(ctx, cmd)
	}
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		*h.sent = append(*h.sent, "pipeline")
		return next(ctx, cmds)
	}
}

// TestRedisConcurrentWriters: writers with distinct tokens write one record at once; the
// record ends with the highest token and the value written with it, and every write was
// either accepted or refused for a higher token.
func TestRedisConcurrentWriters(t *testing.T) {
	eachNode(t, func(t *testing.T, node redlock.Node, rdb *redis.Client) {
		g, err := fence.NewRedis(node, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxT(t)
		const writers, writes = 8, 25
		var wg sync.WaitGroup
		errs := make(chan error, writers*writes)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range writes {
					token := uint64(1_000_000 + i*writers + w)
					err := g.Write(ctx, "shared", token, fmt.Sprint(token))
					var stale *fence.StaleError
					if err != nil && !(errors.As(err, &stale) && stale.Highest > token) {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		highest := uint64(1_000_000 + writers*writes - 1)
		if got, err := g.Token(ctx, "shared"); err != nil || got != highest {
			t.Errorf("Token = %d, %v; want %d", got, err, highest)
		}
		if v := rdb.HGet(ctx, "shared", "value").Val(); v != fmt.Sprint(highest) {
			t.Errorf("value %q, want %d's", v, highest)
		}
	})
}

// TestRedisClosedDriver: a closed driver client's error reaches the caller, matching
// redlock.ErrClosed, and names the key.
func TestRedisClosedDriver(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	g, err := fence.NewRedis(rlgoredis.New(rdb), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_ = rdb.Close()
	err = g.Write(ctxT(t), "k", 1, "v")
	if !errors.Is(err, redlock.ErrClosed) || !strings.Contains(err.Error(), `"k"`) {
		t.Errorf("Write over a closed client: %v, want ErrClosed naming the key", err)
	}
}

// BenchmarkWrite compares a plain SET with the guarded write, both through go-redis, on
// miniredis and on redis-server (skipped if it is not installed): the guard is one round trip
// too (EVALSHA), plus the script's work. "script" is an EVALSHA of a script that does
// nothing, the cost of running any Lua (miniredis starts a Lua interpreter per call).
func BenchmarkWrite(b *testing.B) {
	noop := redis.NewScript("return 1")
	for _, srv := range servers {
		b.Run(srv.name, func(b *testing.B) {
			// ContextTimeoutEnabled, as the README asks.
			rdb := redis.NewClient(&redis.Options{Addr: srv.start(b), ContextTimeoutEnabled: true})
			b.Cleanup(func() { _ = rdb.Close() })
			// A context with a deadline, as a caller's usually has: the backend then lets
			// go-redis bound the call, with no goroutine of its own.
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			b.Run("SET", func(b *testing.B) {
				for b.Loop() {
					if err := rdb.Set(ctx, "plain", "value", time.Hour).Err(); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("script", func(b *testing.B) {
				for b.Loop() {
					if err := noop.Run(ctx, rdb, nil).Err(); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("guarded", func(b *testing.B) {
				g, err := fence.NewRedis(rlgoredis.New(rdb), time.Hour)
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() { // the same holder writing again: the whole check, and the write
					if err := g.Write(ctx, "guarded", 1795305105661725, "value"); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// TestRedisLongestTTL: the longest TTLs, within a millisecond of time.Duration's largest,
// still give every write's record a TTL of about that long, and TTL() returns it: rounding
// them up to whole milliseconds must not overflow into a negative PEXPIRE, which deletes
// the record as it is written.
func TestRedisLongestTTL(t *testing.T) {
	for _, ttl := range []time.Duration{math.MaxInt64, math.MaxInt64 - time.Millisecond + 2} {
		m := miniredis.RunT(t)
		g, err := fence.NewRedis(drivers[0].node(t, m.Addr()), ttl)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.TTL(); got <= 0 || ttl-got >= time.Millisecond {
			t.Errorf("NewRedis(%d).TTL() = %d, want within a millisecond of it", ttl, got)
		}
		if err := g.Write(ctxT(t), "k", 1, "v"); err != nil {
			t.Fatalf("TTL %d: Write: %v", ttl, err)
		}
		if !m.Exists("k") {
			t.Fatalf("TTL %d: the record is gone after its write", ttl)
		}
		if got := m.TTL("k"); got < ttl-time.Second {
			t.Errorf("TTL %d: the record's TTL is %v, want %v", ttl, got, g.TTL())
		}
	}
}
