package otelratekeeper

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

// scopeName is the instrumentation scope of the meter.
const scopeName = "github.com/ratekeeper/ratekeeper/metrics/otel"

// defaultNamespace prefixes instrument names unless [Options.Namespace]
// says otherwise.
const defaultNamespace = "ratekeeper"

// defaultBuckets are the bucket boundaries of the latency histogram, in
// seconds: those of package metrics.
var defaultBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1}

// eventName names the span event of a decision.
const eventName = "ratekeeper.decision"

// Options configures a [Recorder]. The zero value is the default.
type Options struct {
	// MeterProvider provides the meter of the instruments. Nil means the
	// global one (otel.GetMeterProvider()).
	MeterProvider metric.MeterProvider
	// Namespace prefixes instrument names. Empty means "ratekeeper".
	Namespace string
	// Buckets are the bucket boundaries of the latency histogram, in
	// seconds. Nil means those of package metrics: 100µs, 250µs, 500µs,
	// 1ms, 2.5ms, 5ms, 10ms, 25ms, 50ms and 100ms.
	Buckets []float64
	// Store, when set, is the store whose optional capabilities are
	// exported too, read from it at every collection, as package metrics
	// does with its Options.Store: its evictions
	// ("<namespace>.store_evictions"), its refunds of stacked decisions
	// ("<namespace>.stack_refunds", "<namespace>.stack_unrefunded") and
	// its backend's eviction policy ("<namespace>.redis_maxmemory_policy",
	// 1 with the policy as its policy attribute). Nil exports none.
	Store store.Store
}

// Recorder records limiter decisions on spans and in OpenTelemetry
// instruments. It is safe for concurrent use.
type Recorder struct {
	decisions   metric.Int64Counter
	blocks      metric.Int64Counter
	storeErrors metric.Int64Counter
	latency     metric.Float64Histogram
	degraded    metric.Int64Counter
	unavailable metric.Int64Gauge
	cached      metric.Int64Counter
	repaired    metric.Int64Counter
	suppressed  metric.Int64Counter
}

// New creates the instruments on the meter of opts.MeterProvider. It
// returns an error when the meter refuses one (an invalid namespace, say).
func New(opts Options) (*Recorder, error) {
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	ns := opts.Namespace
	if ns == "" {
		ns = defaultNamespace
	}
	buckets := opts.Buckets
	if buckets == nil {
		buckets = defaultBuckets
	}
	m := mp.Meter(scopeName)
	var (
		r    Recorder
		errs []error
	)
	counter := func(name, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(ns+"."+name, metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	r.decisions = counter("decisions", "Rate-limit decisions by policy and outcome.")
	r.blocks = counter("blocks", "Abuse blocks started, by policy and the limit (scope) that tripped.")
	r.storeErrors = counter("store_errors", "Store failures by policy and kind; calls skipped by the circuit breaker are not counted.")
	r.degraded = counter("degraded_requests", "Requests decided without the store, by policy and mode (fail_open, fail_closed, fallback).")
	r.cached = counter("cached_refusals", "Refusals answered from the store's local deny cache, by policy.")
	r.repaired = counter("repaired_state", "Decisions for which the store replaced state it could not read, by policy.")
	r.suppressed = counter("suppressed_refusals", "Refusals of the suppressed strategy drawn against its suppression factor, by policy.")
	var err error
	r.latency, err = m.Float64Histogram(ns+".decision_duration", metric.WithUnit("s"),
		metric.WithDescription("Time spent in the store deciding one request, by policy and store."),
		metric.WithExplicitBucketBoundaries(buckets...))
	errs = append(errs, err)
	r.unavailable, err = m.Int64Gauge(ns+".store_unavailable",
		metric.WithDescription("1 while the limiter's circuit breaker considers the store unavailable, else 0."))
	errs = append(errs, err)
	errs = append(errs, observeStore(m, ns, opts.Store))
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("ratekeeper: otel: %w", err)
	}
	return &r, nil
}

// observeStore creates the observable instruments of the optional
// capabilities s has (none for a nil s), read from s at every collection.
func observeStore(m metric.Meter, ns string, s store.Store) error {
	var errs []error
	observe := func(name, desc string, read func() uint64) {
		_, err := m.Int64ObservableCounter(ns+"."+name, metric.WithDescription(desc),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				o.Observe(int64(read()))
				return nil
			}))
		errs = append(errs, err)
	}
	if ec, ok := s.(store.EvictionCounter); ok {
		observe("store_evictions", "Keys the store evicted to stay within its bound.", ec.Evictions)
	}
	if rf, ok := s.(store.Refunder); ok {
		observe("stack_refunds", "Parts of stacked decisions refunded because a later step refused the request.", rf.Refunds)
		observe("stack_unrefunded", "Parts of stacked decisions whose refund failed.", rf.Unrefunded)
	}
	if ep, ok := s.(store.EvictionPolicyReporter); ok {
		_, err := m.Int64ObservableGauge(ns+".redis_maxmemory_policy",
			metric.WithDescription("The maxmemory-policy of the store's Redis (1 for the policy found); allkeys-* policies may evict limiter state."),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				if p := ep.EvictionPolicy(); p != "" {
					o.Observe(1, metric.WithAttributes(attribute.String("policy", p)))
				}
				return nil
			}))
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Observe records one decision: in the instruments, and, when ctx (the
// request's context) carries a recording span, as attributes and an event
// on that span (see the package documentation). Its signature is that of
// a limiter's observer: pass it as limiter.Options.Observer or
// middleware.Options.Observer. It is safe for concurrent use.
func (r *Recorder) Observe(ctx context.Context, e limiter.Event) {
	r.recordSpan(ctx, &e)
	r.recordMetrics(ctx, &e)
}

// recordSpan sets the decision's attributes on the span of ctx and adds
// its event.
func (r *Recorder) recordSpan(ctx context.Context, e *limiter.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, attribute.String("ratekeeper.policy", e.Policy), attribute.String("ratekeeper.outcome", string(e.Outcome)))
	if e.Tier != "" {
		attrs = append(attrs, attribute.String("ratekeeper.tier", e.Tier))
	}
	if e.Capacity > 0 {
		attrs = append(attrs, attribute.Int64("ratekeeper.limit", e.Capacity), attribute.Int64("ratekeeper.remaining", e.Remaining))
	}
	if e.RetryAfter > 0 && !e.Allowed {
		attrs = append(attrs, attribute.Float64("ratekeeper.retry_after", e.RetryAfter.Seconds()))
	}
	span.SetAttributes(attrs...)
	span.AddEvent(eventName, trace.WithAttributes(attrs...))
}

// recordMetrics counts e as the Prometheus collector of package metrics
// counts it.
func (r *Recorder) recordMetrics(ctx context.Context, e *limiter.Event) {
	policy := attribute.String("policy", e.Policy)
	r.decisions.Add(ctx, 1, metric.WithAttributes(policy, attribute.String("outcome", string(e.Outcome))))
	if e.Latency > 0 {
		r.latency.Record(ctx, e.Latency.Seconds(), metric.WithAttributes(policy, attribute.String("store", e.Store)))
	}
	if e.BlockStarted {
		r.blocks.Add(ctx, 1, metric.WithAttributes(policy, attribute.String("scope", e.LimitID)))
	}
	only := metric.WithAttributes(policy)
	if e.Cached {
		r.cached.Add(ctx, 1, only)
	}
	if e.Repaired {
		r.repaired.Add(ctx, 1, only)
	}
	if e.Suppressed && e.Outcome == limiter.OutcomeLimited {
		// A drawn refusal that dry-run let through refused nothing.
		r.suppressed.Add(ctx, 1, only)
	}
	degraded := ""
	switch {
	case e.Fallback:
		degraded = "fallback"
	case e.Outcome == limiter.OutcomeFailedOpen:
		degraded = "fail_open"
	case e.Outcome == limiter.OutcomeFailedClosed:
		degraded = "fail_closed"
	}
	if degraded == "" && !storeInvolved(e.Outcome) {
		return
	}
	var down int64
	if e.StoreDown {
		down = 1
	}
	r.unavailable.Record(ctx, down, only)
	if degraded == "" {
		return
	}
	r.degraded.Add(ctx, 1, metric.WithAttributes(policy, attribute.String("mode", degraded)))
	// A skipped call is not a store error: the breaker counted the errors
	// that opened it.
	if !e.Skipped {
		r.storeErrors.Add(ctx, 1, metric.WithAttributes(policy, attribute.String("kind", store.KindOf(e.Err))))
	}
}

// storeInvolved reports whether an outcome came from (or tried) the store,
// as opposed to exemptions, tiers without limits and rejected keys.
func storeInvolved(o limiter.Outcome) bool {
	switch o {
	case limiter.OutcomeAllowed, limiter.OutcomeLimited, limiter.OutcomeBlocked, limiter.OutcomeDryRun, limiter.OutcomeInFlight:
		return true
	}
	return false
}
