// Package otelratekeeper reports a limiter's decisions through
// OpenTelemetry: on the request's span, and as the metrics the Prometheus
// collector of package metrics exports, through the OpenTelemetry metrics
// API. It is its own module (github.com/ratekeeper/ratekeeper/metrics/otel),
// so that users of the HTTP middleware never get OpenTelemetry in their
// module graph.
//
// # Use
//
// Build a [Recorder] once with [New] and make its Observe method the
// observer of every limiter it should record:
//
//	rec, err := otelratekeeper.New(otelratekeeper.Options{MeterProvider: mp})
//	lim, err := middleware.New(st, key, limit, middleware.Options{Name: "api", Observer: rec.Observe})
//
// A limiter hands its observer each decision with the context of the
// request it belongs to: the HTTP request's for the middleware, the call's
// for the gRPC interceptors of module
// github.com/ratekeeper/ratekeeper/middleware/grpc, the one given to
// limiter.Limiter.Decide otherwise. So the decision lands on the span a
// tracing middleware or interceptor started for that request. To feed the
// Prometheus collector too, call both:
//
//	Observer: func(ctx context.Context, e limiter.Event) { col.Observe(ctx, e); rec.Observe(ctx, e) }
//
// One Recorder serves any number of limiters; the policy attribute
// separates them.
//
// # Spans
//
// When the context carries a recording span, Observe sets these
// attributes on it and adds an event named "ratekeeper.decision" with the
// same attributes, one per decision (a request that passes several
// limiters gets several events; the attributes hold the last decision):
//
//	ratekeeper.policy        the policy ("api", or "api/authenticated" for a tier)
//	ratekeeper.tier          the tier, when the limiter has tiers
//	ratekeeper.outcome       what the limiter did (allowed, limited, blocked, failed_open, ...)
//	ratekeeper.limit         the deciding limit's capacity, when a limit decided
//	ratekeeper.remaining     units left, when a limit decided
//	ratekeeper.retry_after   seconds to wait, for a refusal that a wait can admit
//
// The identity (address, subject, API key) is never recorded: events do
// not carry it.
//
// # Metrics
//
// The instruments are those of package metrics, named so that the
// OpenTelemetry Prometheus exporter, which turns "." into "_", appends
// "_total" to counters and the unit to names, exports the Prometheus
// collector's series names; the attributes are its label names. With the
// default namespace "ratekeeper":
//
//	ratekeeper.decisions{policy,outcome}              counter    ratekeeper_decisions_total
//	ratekeeper.blocks{policy,scope}                   counter    ratekeeper_blocks_total
//	ratekeeper.store_errors{policy,kind}              counter    ratekeeper_store_errors_total
//	ratekeeper.decision_duration{policy,store}        histogram, seconds    ratekeeper_decision_duration_seconds
//	ratekeeper.degraded_requests{policy,mode}         counter    ratekeeper_degraded_requests_total
//	ratekeeper.store_unavailable{policy}              gauge      ratekeeper_store_unavailable
//	ratekeeper.cached_refusals{policy}                counter    ratekeeper_cached_refusals_total
//	ratekeeper.repaired_state{policy}                 counter    ratekeeper_repaired_state_total
//	ratekeeper.suppressed_refusals{policy}            counter    ratekeeper_suppressed_refusals_total
//
// Given the store (Options.Store), the series of its optional capabilities
// follow, read at every collection:
//
//	ratekeeper.store_evictions                        counter    ratekeeper_store_evictions_total
//	ratekeeper.stack_refunds                          counter    ratekeeper_stack_refunds_total
//	ratekeeper.stack_unrefunded                       counter    ratekeeper_stack_unrefunded_total
//	ratekeeper.redis_maxmemory_policy{policy}         gauge      ratekeeper_redis_maxmemory_policy
//
// Each is counted exactly as its Prometheus twin (package metrics,
// "Series"), and the latency histogram has the same bucket boundaries by
// default. Attribute values come from configuration and fixed sets, never
// from the traffic, so the number of series is bounded.
package otelratekeeper
