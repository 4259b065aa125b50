// Package metrics exports a [middleware.Limiter]'s decisions as Prometheus
// metrics.
//
// [New] registers the collectors on the [prometheus.Registerer] the caller
// passes (never on the global registry unless that is what is passed) and
// returns a [Collector], whose Observe method a limiter reports to:
//
//	m, err := metrics.New(reg, metrics.Options{Store: st})
//	lim, err := middleware.New(st, key, limit, middleware.Options{Observer: m.Observe})
//
// One Collector serves any number of limiters; the policy name separates
// them. Given the store ([Options.Store]), it also exports what the
// store's optional capabilities report (package store, "Capabilities"):
// the store need not be registered capability by capability, and a
// decorator such as the hybrid store reports its backend's.
//
// # Series
//
// With the default namespace "ratekeeper":
//
//	ratekeeper_decisions_total{policy,outcome}            counter
//	ratekeeper_blocks_total{policy,scope}                 counter
//	ratekeeper_store_errors_total{policy,kind}            counter
//	ratekeeper_decision_duration_seconds{policy,store}    histogram
//	ratekeeper_degraded_requests_total{policy,mode}       counter
//	ratekeeper_store_unavailable{policy}                  gauge
//	ratekeeper_cached_refusals_total{policy}              counter
//	ratekeeper_repaired_state_total{policy}               counter
//	ratekeeper_suppressed_refusals_total{policy}          counter
//	ratekeeper_delayed_admissions_total{policy}           counter
//	ratekeeper_admission_delay_seconds_total{policy}      counter
//	ratekeeper_store_evictions_total                      counter (store.EvictionCounter)
//	ratekeeper_stack_refunds_total                        counter (store.Refunder)
//	ratekeeper_stack_unrefunded_total                     counter (store.Refunder)
//	ratekeeper_redis_maxmemory_policy{policy}             gauge (store.EvictionPolicyReporter)
//	ratekeeper_hybrid_refreshes_total                     counter (hybrid store)
//	ratekeeper_hybrid_commits_total                       counter (hybrid store)
//	ratekeeper_hybrid_committed_units_total               counter (hybrid store)
//	ratekeeper_hybrid_backend_failures_total              counter (hybrid store)
//	ratekeeper_hybrid_unconfirmed_units_total             counter (hybrid store)
//	ratekeeper_hybrid_overadmitted_units_total            counter (hybrid store)
//
// The last ten exist when [Options.Store] has the capability in
// parentheses; the hybrid_* series are the hybrid store's Stats
// (package store/hybrid) when Options.Store is one: overadmitted units
// are the overshoot the hybrid store actually incurred, unconfirmed units
// what the backend may undercount. The policy label of the eviction-policy gauge is the
// backend's maxmemory-policy ("unknown" when the server refused CONFIG; no
// series until the store knows it): alert on policy=~"allkeys-.*", Redis
// may then evict limiter state under memory pressure, admitting clients
// afresh.
//
// suppressed_refusals_total counts the refusals of a store of package
// store/suppressed that were random draws against the suppression factor; those
// refusals are also in decisions_total as limited (or dry_run), like the
// refusals by the hard limit, which it leaves out.
//
// delayed_admissions_total counts the admissions that waited for their
// turn instead of being refused (a MaxWait of package middleware or
// middleware/limiter), also counted in decisions_total as allowed, and
// admission_delay_seconds_total the waits they were given: their ratio
// is the mean wait.
//
// [RegisterPolicySet] adds the reload and mode series of a policy set.
//
// # Cardinality
//
// Labels never carry the key, the client IP, the subject or the path.
// policy comes from configuration, outcome, kind and mode from fixed sets,
// scope from the configured limit names, and store from the backend name,
// so the number of series is bounded by configuration, whatever the
// traffic.
package metrics
