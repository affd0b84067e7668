// Package redlockotel records the events of redlock's locks as OpenTelemetry metrics and
// spans: an implementation of redlock.Observer, in a module of its own so that the redlock
// module does not depend on OpenTelemetry. Its import path is
// github.com/go-redlock/redlock/contrib/otel; its name is redlockotel.
//
//	obs, err := redlockotel.New() // the global MeterProvider and TracerProvider
//	if err != nil { ... }
//	client, err := redlock.New(nodes, redlock.WithObserver(obs))
//
// # Metrics
//
// Durations are in seconds. Every instrument has the attribute redlock.lock.kind ("lease",
// "mutex", "rwmutex_write" or "rwmutex_read"), and with WithLockName(true) also
// redlock.lock.name; the others are listed with each instrument.
//
//	redlock.lock.acquisitions       counter    acquisitions that ended; redlock.outcome ("ok", "held", "timeout", "error")
//	redlock.lock.wait.duration      histogram  how long each acquisition took (its wait); redlock.outcome
//	redlock.lock.acquire.attempts   histogram  attempts per acquisition; redlock.outcome
//	redlock.lock.hold.duration      histogram  how long a lock was held, at its first release; redlock.outcome ("ok", "not_held", "error")
//	redlock.lock.extensions         counter    extensions that ended, successful or not; redlock.extension.auto (bool)
//	redlock.lock.extension.failures counter    failed extensions; redlock.extension.auto, error.type ("lost", "no_quorum", "timeout", "other")
//	redlock.lock.losses             counter    holdings that ended otherwise than by a release; redlock.loss.reason ("expired", "lost", "max_hold", "other")
//	redlock.node.errors             counter    failed calls to a node; redlock.node, redlock.op ("acquire", "extend", "release", "raise"), error.type ("timeout", "other")
//	redlock.node.abstentions        counter    a node's abstentions under the restart guard; redlock.node, redlock.op
//	redlock.lock.waits              up-down    acquisitions waiting now (from redlock.WaitEvent to its AcquireEvent)
//	redlock.lock.holdings           up-down    holdings now (from a held AcquireEvent to their LostEvent or first release)
//
// What a count includes follows from redlock.Observer: node errors count every failed
// call to a node, in operations that succeeded too and in the requests sent in the
// background, so a node that is down shows while the lock still works. The module's README
// gives each instrument's unit and bucket boundaries, every attribute's values, and
// queries for a dashboard.
//
// # Spans
//
// An acquisition and a release each make one span, "redlock.acquire" and
// "redlock.release", with the operation's own start and end times (trace.WithTimestamp),
// as a child of the span in the call's context (none for Lock, RLock, TryLock, TryRLock,
// Unlock and RUnlock, which take no context). The Observer learns of an operation only when
// it has ended, so the span is made then: it cannot be the parent of other spans, nor be
// seen while the operation runs. Spans carry the lock's name (redlock.lock.name) whatever
// WithLockName says, its kind and its outcome (redlock.outcome, as on the metrics), and
// for an acquisition its attempts and hand-over, for a release the hold time.
//
// A span's status is Error, with the error as an "exception" event, when its operation
// returned an error, except for a refusal: an acquisition whose outcome is "timeout" (the
// caller's context ended first) or "error", and a release whose outcome is "not_held" or
// "error". A refusal, the outcome "held" (a TryAcquire, TryLock or TryRLock that found the
// lock held), is an answer, not a failure: its span's status is Unset and it has no event,
// as has a success. Extensions and losses make no spans (an automatic extension has no
// caller to belong to); they are counted.
package redlockotel

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-redlock/redlock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/go-redlock/redlock/contrib/otel"

// The attribute keys.
const (
	KeyLockName   = attribute.Key("redlock.lock.name")        // the lock's name: on spans, and with WithLockName on metrics
	KeyKind       = attribute.Key("redlock.lock.kind")        // redlock.Kind's String
	KeyOutcome    = attribute.Key("redlock.outcome")          // an acquisition's (redlock.Outcome's String) or a release's
	KeyNode       = attribute.Key("redlock.node")             // a node's name, as in redlock.NodeEvent
	KeyOp         = attribute.Key("redlock.op")               // a node event's operation
	KeyAuto       = attribute.Key("redlock.extension.auto")   // an automatic extension
	KeyLossReason = attribute.Key("redlock.loss.reason")      // why a holding was lost
	KeyErrorType  = attribute.Key("error.type")               // the class of a failed extension's or a node's error
	KeyAttempts   = attribute.Key("redlock.acquire.attempts") // on acquisition spans
	KeyHold       = attribute.Key("redlock.hold.duration")    // on release spans: the hold time, in seconds
)

const (
	acquireSpanName  = "redlock.acquire"
	releaseSpanName  = "redlock.release"
	holdOutcomeOK    = "ok"
	holdOutcomeGone  = "not_held"
	holdOutcomeError = "error"
)

// Bucket boundaries, in seconds: waits from a local round trip (0.5 ms) to a minute, holds
// from a millisecond to an hour.
var (
	waitBuckets     = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	holdBuckets     = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600}
	attemptsBuckets = []float64{1, 2, 3, 5, 10, 20, 50, 100}
)

// Option configures New.
type Option func(*config)

type config struct {
	meters   metric.MeterProvider
	tracers  trace.TracerProvider
	lockName bool
}

// WithMeterProvider sets where the metrics go. Default: otel.GetMeterProvider(), the global
// one, as it is when New is called.
func WithMeterProvider(p metric.MeterProvider) Option { return func(c *config) { c.meters = p } }

// WithTracerProvider sets where the spans go. Default: otel.GetTracerProvider(), the global
// one, as it is when New is called. Pass a noop.NewTracerProvider() (from
// go.opentelemetry.io/otel/trace/noop) for metrics only.
func WithTracerProvider(p trace.TracerProvider) Option { return func(c *config) { c.tracers = p } }

// WithLockName puts the lock's name on every metric, as the attribute redlock.lock.name.
// Default off: each name is a time series of each instrument, so turn it on only if the
// names are few (not one per user, job or order, say). Spans carry the name either way.
func WithLockName(on bool) Option { return func(c *config) { c.lockName = on } }

// Observer is a redlock.Observer that records metrics and spans (see the package doc).
// Give it to redlock.New (or to one call) with redlock.WithObserver. It is safe for
// concurrent use, and does not block beyond what the MeterProvider's and TracerProvider's
// instruments do (the SDK's record in memory; export happens elsewhere).
type Observer struct {
	redlock.NopObserver // events added to redlock.Observer later are ignored

	tracer   trace.Tracer
	lockName bool

	acquisitions, extensions, extensionFailures, losses, nodeErrors, abstentions metric.Int64Counter
	waits, holdings                                                              metric.Int64UpDownCounter
	wait, hold                                                                   metric.Float64Histogram
	attempts                                                                     metric.Int64Histogram

	// kinds holds, per known kind and outcome, the attribute set without a lock name;
	// bare, per known kind, the kind alone.
	kinds [kindCount][outcomeCount]metric.MeasurementOption
	bare  [kindCount]metric.MeasurementOption
}

const (
	kindCount    = int(redlock.KindRWMutexRead) + 1
	outcomeCount = int(redlock.OutcomeError) + 1
)

var _ redlock.Observer = (*Observer)(nil)

// New returns an Observer that records into the providers the options give, or the global
// ones. It fails only if an instrument cannot be created (an error of the MeterProvider).
func New(opts ...Option) (*Observer, error) {
	c := config{}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.meters == nil {
		c.meters = otel.GetMeterProvider()
	}
	if c.tracers == nil {
		c.tracers = otel.GetTracerProvider()
	}
	m := c.meters.Meter(ScopeName)
	o := &Observer{tracer: c.tracers.Tracer(ScopeName), lockName: c.lockName}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		i, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	o.acquisitions = counter("redlock.lock.acquisitions", "{acquisition}", "Lock acquisitions that ended, by outcome.")
	o.extensions = counter("redlock.lock.extensions", "{extension}", "Extensions that ended, successful or not.")
	o.extensionFailures = counter("redlock.lock.extension.failures", "{extension}", "Extensions that failed.")
	o.losses = counter("redlock.lock.losses", "{loss}", "Holdings that ended otherwise than by a release.")
	o.nodeErrors = counter("redlock.node.errors", "{error}", "Failed calls to a node, in any operation, successful or not.")
	o.abstentions = counter("redlock.node.abstentions", "{abstention}", "A node's abstentions under the restart guard.")
	upDown := func(name, unit, desc string) metric.Int64UpDownCounter {
		i, err := m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	o.waits = upDown("redlock.lock.waits", "{wait}", "Acquisitions waiting for their lock now.")
	o.holdings = upDown("redlock.lock.holdings", "{holding}", "Locks held now.")
	var err error
	o.wait, err = m.Float64Histogram("redlock.lock.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("How long each acquisition took, by outcome."), metric.WithExplicitBucketBoundaries(waitBuckets...))
	errs = append(errs, err)
	o.hold, err = m.Float64Histogram("redlock.lock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("How long a lock was held, at its release."), metric.WithExplicitBucketBoundaries(holdBuckets...))
	errs = append(errs, err)
	o.attempts, err = m.Int64Histogram("redlock.lock.acquire.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts per acquisition, by outcome."), metric.WithExplicitBucketBoundaries(attemptsBuckets...))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("redlockotel: %w", err)
	}
	for k := range kindCount {
		o.bare[k] = metric.WithAttributeSet(attribute.NewSet(KeyKind.String(redlock.Kind(k).String())))
		for out := range outcomeCount {
			o.kinds[k][out] = metric.WithAttributeSet(attribute.NewSet(
				KeyKind.String(redlock.Kind(k).String()), KeyOutcome.String(redlock.Outcome(out).String())))
		}
	}
	return o, nil
}

// attrs returns the measurement option for kind, name (if on) and the rest.
func (o *Observer) attrs(kind redlock.Kind, name string, rest ...attribute.KeyValue) metric.MeasurementOption {
	kv := make([]attribute.KeyValue, 0, len(rest)+2)
	kv = append(kv, KeyKind.String(kind.String()))
	if o.lockName {
		kv = append(kv, KeyLockName.String(name))
	}
	return metric.WithAttributes(append(kv, rest...)...)
}

// acquireAttrs returns the measurement option for an acquisition's kind, name and outcome.
func (o *Observer) acquireAttrs(e *redlock.AcquireEvent) metric.MeasurementOption {
	if !o.lockName && int(e.Kind) < kindCount && int(e.Outcome) < outcomeCount {
		return o.kinds[e.Kind][e.Outcome]
	}
	return o.attrs(e.Kind, e.Name, KeyOutcome.String(e.Outcome.String()))
}

// Waiting counts a wait up.
func (o *Observer) Waiting(e redlock.WaitEvent) {
	o.waits.Add(context.Background(), 1, o.kindAttrs(e.Kind, e.Name))
}

// kindAttrs returns the measurement option for kind and name alone.
func (o *Observer) kindAttrs(kind redlock.Kind, name string) metric.MeasurementOption {
	if !o.lockName && int(kind) < kindCount {
		return o.bare[kind]
	}
	return o.attrs(kind, name)
}

// Acquired records an acquisition: its count, wait and attempts, and its span;
// it counts its wait down, and a holding up.
func (o *Observer) Acquired(e redlock.AcquireEvent) {
	ctx := context.Background()
	if e.Waiting {
		o.waits.Add(ctx, -1, o.kindAttrs(e.Kind, e.Name))
	}
	if e.Outcome == redlock.OutcomeOK {
		o.holdings.Add(ctx, 1, o.kindAttrs(e.Kind, e.Name))
	}
	a := o.acquireAttrs(&e)
	o.acquisitions.Add(ctx, 1, a)
	o.wait.Record(ctx, e.Wait.Seconds(), a)
	o.attempts.Record(ctx, int64(e.Attempts), a)

	end := e.Start.Add(e.Wait)
	_, span := o.tracer.Start(parent(e.Context), acquireSpanName,
		trace.WithTimestamp(e.Start),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			KeyLockName.String(e.Name),
			KeyKind.String(e.Kind.String()),
			KeyOutcome.String(e.Outcome.String()),
			KeyAttempts.Int(e.Attempts),
		))
	if e.Err != nil && e.Outcome != redlock.OutcomeHeld { // see the package doc: a refusal is no error
		span.RecordError(e.Err, trace.WithTimestamp(end))
		span.SetStatus(codes.Error, e.Outcome.String())
	}
	span.End(trace.WithTimestamp(end))
}

// Released records a release: the hold time (at a holding's first release only), and its
// span; it counts the holding down unless its loss did.
func (o *Observer) Released(e redlock.ReleaseEvent) {
	if !e.Retry && !e.Lost {
		o.holdings.Add(context.Background(), -1, o.kindAttrs(e.Kind, e.Name))
	}
	outcome := holdOutcomeOK
	switch {
	case errors.Is(e.Err, redlock.ErrNotHeld):
		outcome = holdOutcomeGone
	case e.Err != nil:
		outcome = holdOutcomeError
	}
	if !e.Retry { // a Release called again: its holding was recorded at the first
		o.hold.Record(context.Background(), e.Hold.Seconds(), o.attrs(e.Kind, e.Name, KeyOutcome.String(outcome)))
	}

	end := e.Start.Add(e.Duration)
	_, span := o.tracer.Start(parent(e.Context), releaseSpanName,
		trace.WithTimestamp(e.Start),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			KeyLockName.String(e.Name),
			KeyKind.String(e.Kind.String()),
			KeyOutcome.String(outcome),
			KeyHold.Float64(e.Hold.Seconds()),
		))
	if e.Err != nil {
		span.RecordError(e.Err, trace.WithTimestamp(end))
		span.SetStatus(codes.Error, outcome)
	}
	span.End(trace.WithTimestamp(end))
}

// Extended counts an extension, and a failed one.
func (o *Observer) Extended(e redlock.ExtendEvent) {
	ctx := context.Background()
	auto := KeyAuto.Bool(e.Auto)
	o.extensions.Add(ctx, 1, o.attrs(e.Kind, e.Name, auto))
	if e.Err == nil {
		return
	}
	var kind string
	switch {
	case errors.Is(e.Err, redlock.ErrNotHeld):
		kind = "lost"
	case errors.Is(e.Err, redlock.ErrNoQuorum):
		kind = "no_quorum"
	case errors.Is(e.Err, context.DeadlineExceeded), errors.Is(e.Err, context.Canceled):
		kind = "timeout"
	default:
		kind = "other"
	}
	o.extensionFailures.Add(ctx, 1, o.attrs(e.Kind, e.Name, auto, KeyErrorType.String(kind)))
}

// Lost counts a loss, by reason, and the holding down.
func (o *Observer) Lost(e redlock.LostEvent) {
	o.holdings.Add(context.Background(), -1, o.kindAttrs(e.Kind, e.Name))
	var reason string
	switch {
	case errors.Is(e.Reason, redlock.ErrExpired):
		reason = "expired"
	case errors.Is(e.Reason, redlock.ErrLost):
		reason = "lost"
	case errors.Is(e.Reason, redlock.ErrMaxHold):
		reason = "max_hold"
	default:
		reason = "other"
	}
	o.losses.Add(context.Background(), 1, o.attrs(e.Kind, e.Name, KeyLossReason.String(reason)))
}

// NodeError counts a node's error, or its abstention.
func (o *Observer) NodeError(e redlock.NodeEvent) {
	ctx := context.Background()
	if e.Abstained {
		o.abstentions.Add(ctx, 1, o.attrs(e.Kind, e.Name, KeyNode.String(e.Node), KeyOp.String(e.Op)))
		return
	}
	kind := "other"
	if e.TimedOut {
		kind = "timeout"
	}
	o.nodeErrors.Add(ctx, 1, o.attrs(e.Kind, e.Name, KeyNode.String(e.Node), KeyOp.String(e.Op), KeyErrorType.String(kind)))
}

// parent returns ctx, or context.Background if it is nil.
func parent(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
