package redlockotel_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	redlockotel "github.com/go-redlock/redlock/contrib/otel"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// env is an Observer over an SDK MeterProvider with a ManualReader and a TracerProvider
// that exports synchronously to memory.
type env struct {
	obs    *redlockotel.Observer
	reader *sdkmetric.ManualReader
	spans  *tracetest.InMemoryExporter
	tracer trace.Tracer // for the tests' own parent spans
}

func newEnv(t *testing.T, opts ...redlockotel.Option) *env {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	obs, err := redlockotel.New(append([]redlockotel.Option{redlockotel.WithMeterProvider(mp), redlockotel.WithTracerProvider(tp)}, opts...)...)
	require.NoError(t, err)
	return &env{obs: obs, reader: reader, spans: spans, tracer: tp.Tracer("test")}
}

// collect returns the metrics recorded so far, by name.
func (e *env) collect(t *testing.T) map[string]metricdata.Metrics {
	var rm metricdata.ResourceMetrics
	require.NoError(t, e.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, redlockotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// matches reports whether set has every attribute of want.
func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// count sums the counter name's points that have the attributes want.
func count(t *testing.T, ms map[string]metricdata.Metrics, name string, want ...attribute.KeyValue) int64 {
	return sum(t, ms, name, true, want)
}

// gauge sums the up-down counter name's points that have the attributes want.
func gauge(t *testing.T, ms map[string]metricdata.Metrics, name string, want ...attribute.KeyValue) int64 {
	return sum(t, ms, name, false, want)
}

// sum sums the int sum name's points that have the attributes want; monotonic says which
// kind of sum it must be.
func sum(t *testing.T, ms map[string]metricdata.Metrics, name string, monotonic bool, want []attribute.KeyValue) int64 {
	m, ok := ms[name]
	if !ok {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T", name, m.Data)
	assert.Equal(t, monotonic, sum.IsMonotonic, name)
	var n int64
	for _, p := range sum.DataPoints {
		if matches(p.Attributes, want) {
			n += p.Value
		}
	}
	return n
}

// histogram returns the count, sum and maximum of the float histogram name's points that
// have the attributes want.
func histogram(t *testing.T, ms map[string]metricdata.Metrics, name string, want ...attribute.KeyValue) (n uint64, sum, most float64) {
	m, ok := ms[name]
	require.True(t, ok, "no %s", name)
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a %T", name, m.Data)
	assert.Equal(t, "s", m.Unit)
	for _, p := range h.DataPoints {
		if matches(p.Attributes, want) {
			n += p.Count
			sum += p.Sum
			if v, ok := p.Max.Value(); ok && v > most {
				most = v
			}
		}
	}
	return n, sum, most
}

// noName asserts that no metric point carries the lock's name.
func noName(t *testing.T, ms map[string]metricdata.Metrics) {
	for name, m := range ms {
		var sets []attribute.Set
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				sets = append(sets, p.Attributes)
			}
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				sets = append(sets, p.Attributes)
			}
		case metricdata.Histogram[int64]:
			for _, p := range d.DataPoints {
				sets = append(sets, p.Attributes)
			}
		}
		for _, s := range sets {
			assert.False(t, s.HasValue(redlockotel.KeyLockName), "%s carries the lock's name", name)
		}
	}
}

// nodes starts n miniredis servers and returns a Node for each.
func nodes(t *testing.T, n int) ([]redlock.Node, []*miniredis.Miniredis) {
	ns := make([]redlock.Node, n)
	servers := make([]*miniredis.Miniredis, n)
	for i := range n {
		servers[i] = miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: servers[i].Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		ns[i] = goredis.New(rdb)
		t.Cleanup(func() { _ = ns[i].(*goredis.Node).Close() })
	}
	return ns, servers
}

// attemptsNode is a goredis Node that records the tokens of the acquisition attempts it
// has answered.
type attemptsNode struct {
	*goredis.Node
	mu     sync.Mutex
	tokens []string // of the attempts answered
}

func (n *attemptsNode) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	vals, err := n.Node.Eval(ctx, s, keys, args...)
	if s.Name() == "acquire" && len(args) > 0 {
		n.mu.Lock()
		n.tokens = append(n.tokens, args[0])
		n.mu.Unlock()
	}
	return vals, err
}

// waiterOf returns the waiter of an attempt's token "<waiter id>.<attempt>".
func waiterOf(token string) string { return token[:max(strings.LastIndexByte(token, '.'), 0)] }

// waiters returns the waiters whose attempts the node has answered.
func (n *attemptsNode) waiters() map[string]bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	ids := make(map[string]bool)
	for _, token := range n.tokens {
		ids[waiterOf(token)] = true
	}
	return ids
}

// answered returns how many attempts of waiters other than those in old the node has
// answered (a late answer to an earlier waiter's call does not count).
func (n *attemptsNode) answered(old map[string]bool) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	count := 0
	for _, token := range n.tokens {
		if !old[waiterOf(token)] {
			count++
		}
	}
	return count
}

func newClient(t *testing.T, nodes []redlock.Node, opts ...redlock.Option) *redlock.Client {
	c, err := redlock.New(nodes, append([]redlock.Option{redlock.WithRestartGuard(0)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func spansNamed(spans tracetest.SpanStubs, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestAcquisitionsAndReleases: over one miniredis node, A acquires under a parent span; B's
// TryAcquire is refused, B's Acquire times out, and B's next Acquire waits 200 ms until
// A's release hands it the lock. The counters, histograms and spans say so: outcomes,
// waits, attempts, the hand-over, hold times, and spans with the operations' own times
// under the callers' spans.
func TestAcquisitionsAndReleases(t *testing.T) {
	e := newEnv(t)
	ns, _ := nodes(t, 1)
	// A 2 s node timeout: the waiter's refresh interval is 5 s, so it waits for the
	// hand-over rather than calling again.
	opts := []redlock.Option{redlock.WithNodeTimeout(2 * time.Second), redlock.WithObserver(e.obs)}
	bNode := &attemptsNode{Node: ns[0].(*goredis.Node)}
	a, b := newClient(t, ns, opts...), newClient(t, []redlock.Node{bNode}, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pctx, parent := e.tracer.Start(ctx, "parent")

	la, err := a.Acquire(pctx, "job")
	require.NoError(t, err)
	_, err = b.TryAcquire(ctx, "job")
	require.ErrorIs(t, err, redlock.ErrHeld)
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = b.Acquire(short, "job")
	cancelShort()
	require.ErrorIs(t, err, context.DeadlineExceeded)

	got := make(chan *redlock.Lease, 1)
	old := bNode.waiters()
	go func() {
		lb, err := b.Acquire(ctx, "job")
		assert.NoError(t, err)
		got <- lb
	}()
	// B's wait began before its first attempt was answered: A holds on for hold after that.
	const hold = 200 * time.Millisecond
	require.Eventually(t, func() bool { return bNode.answered(old) >= 1 }, 10*time.Second, time.Millisecond)
	time.Sleep(hold)
	// B waits to be woken once its second attempt (the one after it subscribed) has been
	// refused: release before that, and B would take the lock by calling.
	require.Eventually(t, func() bool { return bNode.answered(old) >= 2 }, 10*time.Second, time.Millisecond)
	require.NoError(t, la.Release(pctx))
	lb := <-got
	require.NotNil(t, lb)
	require.NoError(t, lb.Release(ctx))
	parent.End()

	ms := e.collect(t)
	lease := redlockotel.KeyKind.String("lease")
	outcome := func(o string) attribute.KeyValue { return redlockotel.KeyOutcome.String(o) }
	assert.EqualValues(t, 2, count(t, ms, "redlock.lock.acquisitions", lease, outcome("ok")))
	assert.EqualValues(t, 1, count(t, ms, "redlock.lock.acquisitions", lease, outcome("held")))
	assert.EqualValues(t, 1, count(t, ms, "redlock.lock.acquisitions", lease, outcome("timeout")))
	assert.EqualValues(t, 0, count(t, ms, "redlock.lock.acquisitions", outcome("error")))

	n, _, most := histogram(t, ms, "redlock.lock.wait.duration", lease, outcome("ok"))
	assert.EqualValues(t, 2, n)
	assert.GreaterOrEqual(t, most, hold.Seconds(), "B waited through A's hold")
	n, _, most = histogram(t, ms, "redlock.lock.wait.duration", outcome("timeout"))
	assert.EqualValues(t, 1, n)
	assert.GreaterOrEqual(t, most, 0.1)

	attempts := ms["redlock.lock.acquire.attempts"].Data.(metricdata.Histogram[int64])
	var okAttempts int64
	for _, p := range attempts.DataPoints {
		if matches(p.Attributes, []attribute.KeyValue{outcome("ok")}) {
			okAttempts += p.Sum
		}
	}
	assert.EqualValues(t, 1+3, okAttempts, "A's one attempt, and B's three: refused and queued, refused again once subscribed, then woken")

	n, sum, most := histogram(t, ms, "redlock.lock.hold.duration", lease, outcome("ok"))
	assert.EqualValues(t, 2, n)
	assert.GreaterOrEqual(t, most, hold.Seconds(), "A held it through the sleep")
	assert.Greater(t, sum, most)
	noName(t, ms)

	spans := e.spans.GetSpans()
	acquires := spansNamed(spans, "redlock.acquire")
	releases := spansNamed(spans, "redlock.release")
	require.Len(t, acquires, 4)
	require.Len(t, releases, 2)
	for _, s := range append(acquires, releases...) {
		assert.Equal(t, "job", attr(s, redlockotel.KeyLockName).AsString(), "spans carry the name")
		assert.Equal(t, "lease", attr(s, redlockotel.KeyKind).AsString())
		assert.False(t, s.EndTime.Before(s.StartTime))
	}
	first := acquires[0]
	assert.Equal(t, parent.SpanContext().SpanID(), first.Parent.SpanID(), "A's acquisition is a child of its caller's span")
	assert.Equal(t, parent.SpanContext().TraceID(), first.SpanContext.TraceID())
	assert.Equal(t, "ok", attr(first, redlockotel.KeyOutcome).AsString())
	assert.EqualValues(t, 1, attr(first, redlockotel.KeyAttempts).AsInt64())
	assert.Equal(t, codes.Unset, first.Status.Code)

	held, timedOut, waited := acquires[1], acquires[2], acquires[3]
	assert.False(t, held.Parent.IsValid(), "B's calls had no span")
	assert.Equal(t, "held", attr(held, redlockotel.KeyOutcome).AsString())
	assert.Equal(t, codes.Unset, held.Status.Code, "a refusal is no error")
	assert.Equal(t, "timeout", attr(timedOut, redlockotel.KeyOutcome).AsString())
	assert.Equal(t, codes.Error, timedOut.Status.Code)
	require.NotEmpty(t, timedOut.Events, "the error as an event")
	assert.Equal(t, "exception", timedOut.Events[0].Name)
	assert.GreaterOrEqual(t, timedOut.EndTime.Sub(timedOut.StartTime), 100*time.Millisecond)
	assert.GreaterOrEqual(t, waited.EndTime.Sub(waited.StartTime), hold, "the span covers the wait")
	assert.False(t, waited.StartTime.After(timedOut.EndTime.Add(time.Second)))

	aRelease := releases[0]
	assert.Equal(t, parent.SpanContext().SpanID(), aRelease.Parent.SpanID())
	assert.GreaterOrEqual(t, attr(aRelease, redlockotel.KeyHold).AsFloat64(), hold.Seconds())
	assert.False(t, aRelease.StartTime.Before(first.EndTime), "released after it was acquired")
	assert.Equal(t, codes.Unset, aRelease.Status.Code)
}

// TestExtensionsAndLosses: with WithLockName, over three miniredis nodes with a 300 ms
// TTL: a lease's automatic extensions are counted; deleting its keys is counted as a loss
// (lost) and as a failed extension (lost), and its later release as a hold of a lock no
// longer held; a lease left alone expires; one with a maximum hold time ends there. Every
// point carries the lock's name.
func TestExtensionsAndLosses(t *testing.T) {
	e := newEnv(t, redlockotel.WithLockName(true))
	ns, servers := nodes(t, 3)
	const ttl = 300 * time.Millisecond
	c := newClient(t, ns, redlock.WithTTL(ttl), redlock.WithObserver(e.obs))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := func(n string) attribute.KeyValue { return redlockotel.KeyLockName.String(n) }
	auto := redlockotel.KeyAuto.Bool(true)

	l, err := c.Acquire(ctx, "kept", redlock.WithAutoExtend(true))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return count(t, e.collect(t), "redlock.lock.extensions", name("kept"), auto) >= 2
	}, 5*ttl, 10*time.Millisecond, "no automatic extensions counted")
	for _, s := range servers {
		s.Del("redlock:{kept}")
	}
	require.Eventually(t, func() bool {
		return count(t, e.collect(t), "redlock.lock.losses", name("kept"), redlockotel.KeyLossReason.String("lost")) == 1
	}, 5*ttl, 10*time.Millisecond, "the loss was not counted")
	require.ErrorIs(t, l.Release(ctx), redlock.ErrLost)
	ms := e.collect(t)
	assert.EqualValues(t, 1, count(t, ms, "redlock.lock.extension.failures", name("kept"), auto, redlockotel.KeyErrorType.String("lost")))
	n, _, _ := histogram(t, ms, "redlock.lock.hold.duration", name("kept"), redlockotel.KeyOutcome.String("not_held"))
	assert.EqualValues(t, 1, n)

	_, err = c.TryAcquire(ctx, "left")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return count(t, e.collect(t), "redlock.lock.losses", name("left"), redlockotel.KeyLossReason.String("expired")) == 1
	}, 5*ttl, 10*time.Millisecond, "the expiry was not counted")

	_, err = c.Acquire(ctx, "bounded", redlock.WithMaxHold(50*time.Millisecond))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ms := e.collect(t)
		held, _, _ := histogram(t, ms, "redlock.lock.hold.duration", name("bounded"), redlockotel.KeyOutcome.String("ok"))
		return count(t, ms, "redlock.lock.losses", name("bounded"), redlockotel.KeyLossReason.String("max_hold")) == 1 && held == 1
	}, 5*ttl, 10*time.Millisecond, "the maximum hold time's loss and release were not counted")

	ms = e.collect(t)
	assert.EqualValues(t, 3, count(t, ms, "redlock.lock.acquisitions", redlockotel.KeyOutcome.String("ok")))
	for _, n := range []string{"kept", "left", "bounded"} {
		assert.EqualValues(t, 1, count(t, ms, "redlock.lock.acquisitions", name(n)), n)
	}
}

// TestNodeErrorsAndAbstentions: over three miniredis nodes, with one closed a TryAcquire
// and its Release still succeed, and the closed node's failed calls are counted, by name
// and operation; with two closed, the failed TryAcquire counts an error for each of them,
// and so does the release of its attempt, and none for the live node. miniredis cannot report its uptime,
// so it never abstains: an abstention is counted from an event made by hand.
func TestNodeErrorsAndAbstentions(t *testing.T) {
	e := newEnv(t)
	ns, servers := nodes(t, 3)
	c := newClient(t, ns, redlock.WithObserver(e.obs), redlock.WithNodeTimeout(500*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	closed := []string{servers[1].Addr(), servers[2].Addr()}
	acquire, release := redlockotel.KeyOp.String("acquire"), redlockotel.KeyOp.String("release")
	// nodeErrors waits until the node errors of op on each closed node are want[i].
	nodeErrors := func(op attribute.KeyValue, want ...int64) {
		t.Helper()
		var got []int64
		assert.Eventually(t, func() bool {
			ms := e.collect(t)
			got = got[:0]
			for _, addr := range closed {
				got = append(got, count(t, ms, "redlock.node.errors", redlockotel.KeyNode.String(addr), op, redlockotel.KeyKind.String("lease")))
			}
			return slices.Equal(got, want)
		}, 10*time.Second, 10*time.Millisecond, "node errors of %v on %v: want %v", op, closed, want)
	}

	// One server closed: the lock works on the other two, and the closed one's failed
	// calls count all the same.
	servers[1].Close()
	l, err := c.TryAcquire(ctx, "down")
	require.NoError(t, err, "2 of 3 grant it")
	require.NoError(t, l.Release(ctx))
	nodeErrors(acquire, 1, 0)
	nodeErrors(release, 1, 0)

	// Two closed: the acquisition fails, and its attempt is let go of on both.
	servers[2].Close()
	_, err = c.TryAcquire(ctx, "down")
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	nodeErrors(acquire, 2, 1)
	nodeErrors(release, 2, 1)
	ms := e.collect(t)
	assert.EqualValues(t, 6, count(t, ms, "redlock.node.errors"))
	assert.EqualValues(t, 1, count(t, ms, "redlock.lock.acquisitions", redlockotel.KeyOutcome.String("error")))

	op := acquire
	e.obs.NodeError(redlock.NodeEvent{Name: "down", Kind: redlock.KindMutex, Op: "acquire", Node: "10.0.0.1:6379",
		Err: redlock.ErrRestarted, Abstained: true})
	e.obs.NodeError(redlock.NodeEvent{Name: "down", Kind: redlock.KindMutex, Op: "extend", Node: "10.0.0.2:6379",
		Err: redlock.ErrNodeTimeout, TimedOut: true})
	ms = e.collect(t)
	assert.EqualValues(t, 1, count(t, ms, "redlock.node.abstentions", redlockotel.KeyNode.String("10.0.0.1:6379"), op, redlockotel.KeyKind.String("mutex")))
	assert.EqualValues(t, 7, count(t, ms, "redlock.node.errors"), "an abstention is not an error")
	assert.EqualValues(t, 1, count(t, ms, "redlock.node.errors", redlockotel.KeyErrorType.String("timeout"), redlockotel.KeyOp.String("extend")))
	noName(t, ms)
}

// TestNewUsesGlobalProviders: without options, New takes the global providers (no-ops
// until set), and its Observer takes every event without failing.
func TestNewUsesGlobalProviders(t *testing.T) {
	o, err := redlockotel.New()
	require.NoError(t, err)
	now := time.Now()
	o.Acquired(redlock.AcquireEvent{Name: "n", Kind: redlock.KindLease, Start: now, Wait: time.Millisecond, Attempts: 1})
	o.Acquired(redlock.AcquireEvent{Kind: redlock.Kind(200), Outcome: redlock.Outcome(200), Err: errors.New("x")})
	o.Released(redlock.ReleaseEvent{Name: "n", Kind: redlock.KindLease, Start: now, Err: redlock.ErrNoQuorum})
	o.Extended(redlock.ExtendEvent{Name: "n", Kind: redlock.KindMutex, Err: context.Canceled})
	o.Lost(redlock.LostEvent{Name: "n", Kind: redlock.KindRWMutexRead, Reason: redlock.ErrExpired})
	o.NodeError(redlock.NodeEvent{Name: "n", Node: "a", Op: "release"})
}

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the tests close servers on purpose.
	redis.SetLogger(quietLogger{})
	m.Run()
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// TestSpanStatus: as the package doc says, an acquisition's span is an Error, with the error
// as an event, when it returned an error other than a refusal ("timeout", "error", and an
// outcome this package does not know); a refusal ("held") and a success are Unset and have
// no event. A release's span is an Error when Release returned an error ("not_held",
// "error").
func TestSpanStatus(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	failed := errors.New("failed")
	for _, tc := range []struct {
		outcome redlock.Outcome
		err     error
		want    codes.Code
	}{
		{redlock.OutcomeOK, nil, codes.Unset},
		{redlock.OutcomeHeld, redlock.ErrHeld, codes.Unset},
		{redlock.OutcomeTimeout, context.DeadlineExceeded, codes.Error},
		{redlock.OutcomeError, redlock.ErrNoQuorum, codes.Error},
		{redlock.Outcome(200), failed, codes.Error},
	} {
		e.spans.Reset()
		e.obs.Acquired(redlock.AcquireEvent{Name: "n", Kind: redlock.KindLease, Start: now, Wait: time.Millisecond,
			Attempts: 1, Outcome: tc.outcome, Err: tc.err})
		spans := e.spans.GetSpans()
		require.Len(t, spans, 1)
		s := spans[0]
		assert.Equal(t, tc.outcome.String(), attr(s, redlockotel.KeyOutcome).AsString())
		assert.Equal(t, tc.want, s.Status.Code, "acquisition, outcome %v", tc.outcome)
		if tc.want == codes.Error {
			assert.Equal(t, tc.outcome.String(), s.Status.Description)
			require.Len(t, s.Events, 1, "outcome %v: the error as an event", tc.outcome)
			assert.Equal(t, "exception", s.Events[0].Name)
		} else {
			assert.Empty(t, s.Events, "outcome %v: no event", tc.outcome)
		}
	}
	for _, tc := range []struct {
		err     error
		outcome string
		want    codes.Code
	}{
		{nil, "ok", codes.Unset},
		{fmt.Errorf("%w: %w", redlock.ErrNotHeld, redlock.ErrLost), "not_held", codes.Error},
		{redlock.ErrNoQuorum, "error", codes.Error},
	} {
		e.spans.Reset()
		e.obs.Released(redlock.ReleaseEvent{Name: "n", Kind: redlock.KindLease, Start: now, Err: tc.err})
		spans := e.spans.GetSpans()
		require.Len(t, spans, 1)
		s := spans[0]
		assert.Equal(t, tc.outcome, attr(s, redlockotel.KeyOutcome).AsString())
		assert.Equal(t, tc.want, s.Status.Code, "release, outcome %s", tc.outcome)
		if tc.want == codes.Error {
			require.Len(t, s.Events, 1)
		} else {
			assert.Empty(t, s.Events)
		}
	}
}

// TestInstruments: every instrument, as the package doc and the README list them for a
// dashboard: its name, type, unit, description, bucket boundaries and attribute keys, after
// one event of each kind.
func TestInstruments(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	e.obs.Waiting(redlock.WaitEvent{Name: "n", Kind: redlock.KindMutex, Start: now})
	e.obs.Acquired(redlock.AcquireEvent{Name: "n", Kind: redlock.KindMutex, Start: now, Wait: time.Millisecond, Attempts: 2})
	e.obs.Released(redlock.ReleaseEvent{Name: "n", Kind: redlock.KindMutex, Start: now, Hold: time.Second})
	e.obs.Extended(redlock.ExtendEvent{Name: "n", Kind: redlock.KindMutex, Auto: true, Err: redlock.ErrNoQuorum})
	e.obs.Lost(redlock.LostEvent{Name: "n", Kind: redlock.KindMutex, Reason: redlock.ErrExpired})
	e.obs.NodeError(redlock.NodeEvent{Name: "n", Kind: redlock.KindMutex, Op: "acquire", Node: "a:1", Err: redlock.ErrNodeTimeout, TimedOut: true})
	e.obs.NodeError(redlock.NodeEvent{Name: "n", Kind: redlock.KindMutex, Op: "acquire", Node: "a:1", Err: redlock.ErrRestarted, Abstained: true})

	const (
		counter   = "counter"
		upDown    = "up-down counter"
		histogram = "histogram"
		intHist   = "int histogram"
	)
	waits := []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	holds := []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600}
	attempts := []float64{1, 2, 3, 5, 10, 20, 50, 100}
	want := map[string]struct {
		kind, unit, desc string
		bounds           []float64
		keys             []string
	}{
		"redlock.lock.acquisitions":       {counter, "{acquisition}", "Lock acquisitions that ended, by outcome.", nil, []string{"redlock.lock.kind", "redlock.outcome"}},
		"redlock.lock.wait.duration":      {histogram, "s", "How long each acquisition took, by outcome.", waits, []string{"redlock.lock.kind", "redlock.outcome"}},
		"redlock.lock.acquire.attempts":   {intHist, "{attempt}", "Attempts per acquisition, by outcome.", attempts, []string{"redlock.lock.kind", "redlock.outcome"}},
		"redlock.lock.hold.duration":      {histogram, "s", "How long a lock was held, at its release.", holds, []string{"redlock.lock.kind", "redlock.outcome"}},
		"redlock.lock.extensions":         {counter, "{extension}", "Extensions that ended, successful or not.", nil, []string{"redlock.extension.auto", "redlock.lock.kind"}},
		"redlock.lock.extension.failures": {counter, "{extension}", "Extensions that failed.", nil, []string{"error.type", "redlock.extension.auto", "redlock.lock.kind"}},
		"redlock.lock.losses":             {counter, "{loss}", "Holdings that ended otherwise than by a release.", nil, []string{"redlock.lock.kind", "redlock.loss.reason"}},
		"redlock.node.errors":             {counter, "{error}", "Failed calls to a node, in any operation, successful or not.", nil, []string{"error.type", "redlock.lock.kind", "redlock.node", "redlock.op"}},
		"redlock.node.abstentions":        {counter, "{abstention}", "A node's abstentions under the restart guard.", nil, []string{"redlock.lock.kind", "redlock.node", "redlock.op"}},
		"redlock.lock.waits":              {upDown, "{wait}", "Acquisitions waiting for their lock now.", nil, []string{"redlock.lock.kind"}},
		"redlock.lock.holdings":           {upDown, "{holding}", "Locks held now.", nil, []string{"redlock.lock.kind"}},
	}
	ms := e.collect(t)
	assert.Len(t, ms, len(want))
	keysOf := func(set attribute.Set) []string {
		var keys []string
		for _, kv := range set.ToSlice() {
			keys = append(keys, string(kv.Key))
		}
		slices.Sort(keys)
		return keys
	}
	for name, w := range want {
		m, ok := ms[name]
		if !assert.True(t, ok, "no %s", name) {
			continue
		}
		assert.Equal(t, w.unit, m.Unit, name)
		assert.Equal(t, w.desc, m.Description, name)
		var kind string
		var sets []attribute.Set
		var bounds []float64
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			kind = counter
			if !d.IsMonotonic {
				kind = upDown
			}
			for _, p := range d.DataPoints {
				sets = append(sets, p.Attributes)
			}
		case metricdata.Histogram[float64]:
			kind = histogram
			for _, p := range d.DataPoints {
				sets, bounds = append(sets, p.Attributes), p.Bounds
			}
		case metricdata.Histogram[int64]:
			kind = intHist
			for _, p := range d.DataPoints {
				sets, bounds = append(sets, p.Attributes), p.Bounds
			}
		}
		assert.Equal(t, w.kind, kind, name)
		assert.Equal(t, w.bounds, bounds, name)
		require.Len(t, sets, 1, name)
		assert.Equal(t, w.keys, keysOf(sets[0]), name)
	}
}

// TestReleaseCalledAgain: a Release called again after one that too few nodes answered is a
// second release span, but the holding's hold time is recorded once, at the first.
func TestReleaseCalledAgain(t *testing.T) {
	e := newEnv(t)
	ns, servers := nodes(t, 1)
	c := newClient(t, ns, redlock.WithObserver(e.obs))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := c.Acquire(ctx, "again")
	require.NoError(t, err)
	servers[0].SetError("LOADING Redis is loading the dataset in memory")
	require.ErrorIs(t, l.Release(ctx), redlock.ErrNoQuorum)
	servers[0].SetError("")
	require.NoError(t, l.Release(ctx))

	n, _, _ := histogram(t, e.collect(t), "redlock.lock.hold.duration", redlockotel.KeyKind.String("lease"))
	assert.EqualValues(t, 1, n, "hold times recorded")
	assert.Len(t, spansNamed(e.spans.GetSpans(), "redlock.release"), 2)
}

// TestGauges: over one miniredis node, the waits and holdings gauges say what is happening
// now: a lease held, a second Acquire waiting behind it, then both released; a lease lost
// behind its back and then released counts down once; a Mutex too.
func TestGauges(t *testing.T) {
	e := newEnv(t)
	ns, servers := nodes(t, 1)
	a := newClient(t, ns, redlock.WithObserver(e.obs), redlock.WithTTL(time.Second))
	b := newClient(t, ns, redlock.WithObserver(e.obs), redlock.WithTTL(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease := redlockotel.KeyKind.String("lease")
	now := func() (waits, holdings int64) {
		ms := e.collect(t)
		return gauge(t, ms, "redlock.lock.waits", lease), gauge(t, ms, "redlock.lock.holdings", lease)
	}

	held, err := a.Acquire(ctx, "g")
	require.NoError(t, err)
	w, h := now()
	assert.Equal(t, [2]int64{0, 1}, [2]int64{w, h}, "one lease held")
	done := make(chan error, 1)
	go func() {
		l, err := b.Acquire(ctx, "g")
		if err == nil {
			err = l.Release(ctx)
		}
		done <- err
	}()
	require.Eventually(t, func() bool { w, _ := now(); return w == 1 }, 30*time.Second, time.Millisecond, "the waiter is counted")
	require.NoError(t, held.Release(ctx))
	require.NoError(t, <-done)
	w, h = now()
	assert.Equal(t, [2]int64{0, 0}, [2]int64{w, h}, "both released")

	lost, err := a.Acquire(ctx, "lost", redlock.WithAutoExtend(true))
	require.NoError(t, err)
	servers[0].Del("redlock:{lost}")
	select {
	case <-lost.Done():
	case <-ctx.Done():
		t.Fatal("the loss was not seen")
	}
	require.ErrorIs(t, lost.Release(ctx), redlock.ErrLost)
	w, h = now()
	assert.Equal(t, [2]int64{0, 0}, [2]int64{w, h}, "lost, then released")

	m := a.NewMutex("m")
	m.Lock()
	assert.EqualValues(t, 1, gauge(t, e.collect(t), "redlock.lock.holdings", redlockotel.KeyKind.String("mutex")))
	m.Unlock()
	assert.EqualValues(t, 0, gauge(t, e.collect(t), "redlock.lock.holdings", redlockotel.KeyKind.String("mutex")))
}
