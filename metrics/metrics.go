package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
)

// DefaultNamespace prefixes every metric name unless [Options.Namespace]
// says otherwise.
const DefaultNamespace = "ratekeeper"

// DefaultBuckets are the decision-latency histogram buckets, in seconds:
// from 100µs (an in-memory decision or a Redis on loopback) to 100ms (past
// any sensible decision budget).
var DefaultBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1}

// Options configures a [Collector]. The zero value is the default.
type Options struct {
	// Namespace prefixes metric names. Empty means [DefaultNamespace].
	Namespace string
	// Buckets for the latency histogram. Nil means [DefaultBuckets].
	Buckets []float64
	// ConstLabels are added to every series (for example the service name).
	ConstLabels prometheus.Labels
}

// Collector counts limiter decisions. It implements [middleware.Observer]
// and is safe for concurrent use.
type Collector struct {
	decisions   *prometheus.CounterVec
	blocks      *prometheus.CounterVec
	storeErrors *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	degraded    *prometheus.CounterVec
	unavailable *prometheus.GaugeVec
}

// Metric names without the namespace, exported so tooling (dashboards,
// alert rules, tests) can check them by name.
const (
	NameDecisions   = "decisions_total"
	NameBlocks      = "blocks_total"
	NameStoreErrors = "store_errors_total"
	NameLatency     = "decision_duration_seconds"
	NameDegraded    = "degraded_requests_total"
	NameUnavailable = "store_unavailable"
)

// New creates the collectors and registers them on reg. It returns an error
// when reg is nil or registration fails (for example a second Collector
// with the same namespace on the same registry).
func New(reg prometheus.Registerer, opts Options) (*Collector, error) {
	if reg == nil {
		return nil, errors.New("ratekeeper: metrics: nil registerer")
	}
	ns := opts.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	buckets := opts.Buckets
	if buckets == nil {
		buckets = DefaultBuckets
	}
	c := &Collector{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: NameDecisions, ConstLabels: opts.ConstLabels,
			Help: "Rate-limit decisions by policy and outcome (allowed, limited, blocked, exempt, dry_run, failed_open, failed_closed, rejected, canceled).",
		}, []string{"policy", "outcome"}),
		blocks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: NameBlocks, ConstLabels: opts.ConstLabels,
			Help: "Abuse blocks started, by policy and the limit (scope) that tripped.",
		}, []string{"policy", "scope"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: NameStoreErrors, ConstLabels: opts.ConstLabels,
			Help: "Store failures by policy and kind (timeout, connection, script, capacity, other, breaker_open).",
		}, []string{"policy", "kind"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: NameLatency, ConstLabels: opts.ConstLabels, Buckets: buckets,
			Help: "Time spent in the store deciding one request, by policy and store.",
		}, []string{"policy", "store"}),
		degraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: NameDegraded, ConstLabels: opts.ConstLabels,
			Help: "Requests served without a store decision, by policy and failure mode (fail_open, fail_closed).",
		}, []string{"policy", "mode"}),
		unavailable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: NameUnavailable, ConstLabels: opts.ConstLabels,
			Help: "1 while the limiter's circuit breaker considers the store unavailable, else 0.",
		}, []string{"policy"}),
	}
	for _, col := range []prometheus.Collector{c.decisions, c.blocks, c.storeErrors, c.latency, c.degraded, c.unavailable} {
		if err := reg.Register(col); err != nil {
			return nil, fmt.Errorf("ratekeeper: metrics: register: %w", err)
		}
	}
	return c, nil
}

// Observe records one decision. It implements [middleware.Observer].
func (c *Collector) Observe(e middleware.Event) {
	c.decisions.WithLabelValues(e.Policy, string(e.Outcome)).Inc()
	if e.Latency > 0 {
		c.latency.WithLabelValues(e.Policy, e.Store).Observe(e.Latency.Seconds())
	}
	if e.Decision.BlockStarted {
		c.blocks.WithLabelValues(e.Policy, e.Decision.Policy).Inc()
	}
	switch e.Outcome {
	case middleware.OutcomeFailedOpen, middleware.OutcomeFailedClosed:
		kind := string(store.KindOf(e.Err))
		if e.Skipped {
			kind = "breaker_open"
		}
		c.storeErrors.WithLabelValues(e.Policy, kind).Inc()
		mode := "fail_open"
		if e.Outcome == middleware.OutcomeFailedClosed {
			mode = "fail_closed"
		}
		c.degraded.WithLabelValues(e.Policy, mode).Inc()
	}
	if e.Outcome != middleware.OutcomeRejected && e.Outcome != middleware.OutcomeCanceled {
		v := 0.0
		if e.StoreDown {
			v = 1
		}
		c.unavailable.WithLabelValues(e.Policy).Set(v)
	}
}
