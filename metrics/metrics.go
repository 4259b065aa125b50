package metrics

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

// defaultNamespace prefixes every metric name unless [Options.Namespace]
// says otherwise.
const defaultNamespace = "ratekeeper"

// defaultBuckets are the decision-latency histogram buckets, in seconds:
// from 100µs (an in-memory decision or a Redis on loopback) to 100ms (past
// any sensible decision budget).
var defaultBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1}

// Options configures a [Collector]. The zero value is the default.
type Options struct {
	// Namespace prefixes metric names. Empty means "ratekeeper".
	Namespace string
	// Buckets for the latency histogram, in seconds. Nil means 100µs, 250µs,
	// 500µs, 1ms, 2.5ms, 5ms, 10ms, 25ms, 50ms and 100ms: from an in-memory
	// decision or a Redis on loopback to past any sensible store timeout.
	Buckets []float64
	// ConstLabels are added to every series (for example the service name).
	ConstLabels prometheus.Labels
	// Store, when set, is the store whose optional capabilities New
	// exports too, read from it at every scrape: its evictions
	// ([store.EvictionCounter]: "<namespace>_store_evictions_total"), its
	// refunds of stacked decisions ([store.Refunder]:
	// "<namespace>_stack_refunds_total" and
	// "<namespace>_stack_unrefunded_total") and its backend's eviction
	// policy ([store.EvictionPolicyReporter]:
	// "<namespace>_redis_maxmemory_policy"), and a hybrid store's counters
	// ("<namespace>_hybrid_*", package doc). These series carry no policy
	// label, so one Collector per registry (or per ConstLabels) exports
	// one store's. Nil exports none of them.
	Store store.Store
}

// Collector counts limiter decisions: give its [Collector.Observe] method to
// [middleware.Options].Observer. It is safe for concurrent use.
type Collector struct {
	decisions   *prometheus.CounterVec
	blocks      *prometheus.CounterVec
	storeErrors *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	degraded    *prometheus.CounterVec
	unavailable *prometheus.GaugeVec
	cached      *prometheus.CounterVec
	repaired    *prometheus.CounterVec
	suppressed  *prometheus.CounterVec
	delayed     *prometheus.CounterVec
	delay       *prometheus.CounterVec
}

// Metric names without the namespace (the package documentation lists
// the series).
const (
	nameDecisions   = "decisions_total"
	nameBlocks      = "blocks_total"
	nameStoreErrors = "store_errors_total"
	nameLatency     = "decision_duration_seconds"
	nameDegraded    = "degraded_requests_total"
	nameUnavailable = "store_unavailable"
	nameCached      = "cached_refusals_total"
	nameRepaired    = "repaired_state_total"
	nameSuppressed  = "suppressed_refusals_total"
	nameDelayed     = "delayed_admissions_total"
	nameDelay       = "admission_delay_seconds_total"
)

// New creates the collectors, with those of [Options.Store]'s
// capabilities, and registers them on reg. It returns an error when reg
// is nil or registration fails (for example a second Collector with the
// same namespace on the same registry), and then registers nothing.
func New(reg prometheus.Registerer, opts Options) (*Collector, error) {
	if reg == nil {
		return nil, errors.New("ratekeeper: metrics: nil registerer")
	}
	ns := opts.Namespace
	if ns == "" {
		ns = defaultNamespace
	}
	buckets := opts.Buckets
	if buckets == nil {
		buckets = defaultBuckets
	}
	c := &Collector{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: nameDecisions, ConstLabels: opts.ConstLabels,
			Help: "Rate-limit decisions by policy and outcome (allowed, limited, blocked, in_flight, exempt, dry_run, failed_open, failed_closed, rejected, canceled, unlimited, suspended).",
		}, []string{"policy", "outcome"}),
		blocks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: nameBlocks, ConstLabels: opts.ConstLabels,
			Help: "Abuse blocks started, by policy and the limit (scope) that tripped.",
		}, []string{"policy", "scope"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: nameStoreErrors, ConstLabels: opts.ConstLabels,
			Help: "Store failures by policy and kind (timeout, connection, script, capacity, busy, clusterdown, oom, readonly, other); calls skipped by the circuit breaker are not counted here.",
		}, []string{"policy", "kind"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: nameLatency, ConstLabels: opts.ConstLabels, Buckets: buckets,
			Help: "Time spent in the store deciding one request, by policy and store.",
		}, []string{"policy", "store"}),
		degraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: nameDegraded, ConstLabels: opts.ConstLabels,
			Help: "Requests decided without the store, by policy and mode (fail_open, fail_closed, fallback).",
		}, []string{"policy", "mode"}),
		unavailable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: nameUnavailable, ConstLabels: opts.ConstLabels,
			Help: "1 while the limiter's circuit breaker considers the store unavailable, else 0, as of the policy's latest decision (a policy without traffic keeps its last value).",
		}, []string{"policy"}),
	}
	c.cached = policyCounter(ns, opts.ConstLabels, nameCached,
		"Refusals answered from the store's local deny cache without a round trip, by policy.")
	c.repaired = policyCounter(ns, opts.ConstLabels, nameRepaired,
		"Decisions for which the store replaced state it could not read (of the wrong type or malformed) and decided as for a fresh key, by policy.")
	c.suppressed = policyCounter(ns, opts.ConstLabels, nameSuppressed,
		"Refusals of the suppressed strategy drawn against its suppression factor (between the soft and the hard limit), by policy; refusals by the hard limit are not counted here.")
	c.delayed = policyCounter(ns, opts.ConstLabels, nameDelayed,
		"Admissions that waited for their turn instead of being refused (MaxWait), by policy; they count as allowed decisions too.")
	c.delay = policyCounter(ns, opts.ConstLabels, nameDelay,
		"Total time delayed admissions were told to wait for their turn, in seconds, by policy.")
	cols := []prometheus.Collector{c.decisions, c.blocks, c.storeErrors, c.latency, c.degraded, c.unavailable, c.cached, c.repaired, c.suppressed, c.delayed, c.delay}
	if err := registerAll(reg, append(cols, storeCollectors(opts.Store, ns, opts.ConstLabels)...)); err != nil {
		return nil, err
	}
	return c, nil
}

// policyCounter returns a counter named name, labelled by policy.
func policyCounter(ns string, constLabels prometheus.Labels, name, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, ConstLabels: constLabels, Help: help}, []string{"policy"})
}

// registerAll registers cols on reg, or none of them: on a failure it
// unregisters those it registered, leaving the registry as it was.
func registerAll(reg prometheus.Registerer, cols []prometheus.Collector) error {
	for i, col := range cols {
		if err := reg.Register(col); err != nil {
			for _, done := range cols[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("ratekeeper: metrics: register: %w", err)
		}
	}
	return nil
}

// Observe records one decision; pass it to [middleware.Options].Observer
// (or [limiter.Options].Observer). It does not use ctx, the request's
// context. It is safe for concurrent use.
func (c *Collector) Observe(_ context.Context, e limiter.Event) {
	c.decisions.WithLabelValues(e.Policy, string(e.Outcome)).Inc()
	if e.Latency > 0 {
		c.latency.WithLabelValues(e.Policy, e.Store).Observe(e.Latency.Seconds())
	}
	if e.BlockStarted {
		c.blocks.WithLabelValues(e.Policy, e.LimitID).Inc()
	}
	if e.Cached {
		c.cached.WithLabelValues(e.Policy).Inc()
	}
	if e.Repaired {
		c.repaired.WithLabelValues(e.Policy).Inc()
	}
	if e.Delay > 0 && e.Allowed {
		c.delayed.WithLabelValues(e.Policy).Inc()
		c.delay.WithLabelValues(e.Policy).Add(e.Delay.Seconds())
	}
	if e.Suppressed && e.Outcome == limiter.OutcomeLimited {
		// A drawn refusal that dry-run let through refused nothing.
		c.suppressed.WithLabelValues(e.Policy).Inc()
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
	if degraded == "" {
		if storeInvolved(e.Outcome) {
			c.setUnavailable(e)
		}
		return
	}
	c.degraded.WithLabelValues(e.Policy, degraded).Inc()
	// A skipped call is not a store error: the breaker counted the errors
	// that opened it.
	if !e.Skipped {
		c.storeErrors.WithLabelValues(e.Policy, store.KindOf(e.Err)).Inc()
	}
	c.setUnavailable(e)
}

func (c *Collector) setUnavailable(e limiter.Event) {
	v := 0.0
	if e.StoreDown {
		v = 1
	}
	c.unavailable.WithLabelValues(e.Policy).Set(v)
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
