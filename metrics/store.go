package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/hybrid"
)

// Names of the series read from the store's capabilities, without the
// namespace.
const (
	nameEvictions       = "store_evictions_total"
	nameRefunds         = "stack_refunds_total"
	nameUnrefunded      = "stack_unrefunded_total"
	nameMaxmemoryPolicy = "redis_maxmemory_policy"
	// The hybrid store's counters (hybrid.Stats), in subsystem "hybrid".
	subsystemHybrid = "hybrid"
)

// hybridStats is what the hybrid store offers beyond its capabilities:
// its counters. An interface, so that any value hybrid.New returns has it.
type hybridStats interface {
	Stats() hybrid.Stats
}

// storeCollectors returns the collectors of the optional capabilities s
// has (none for a nil s), each read from s at every scrape.
func storeCollectors(s store.Store, ns string, labels prometheus.Labels) []prometheus.Collector {
	var cs []prometheus.Collector
	if ec, ok := s.(store.EvictionCounter); ok {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: ns, Name: nameEvictions, ConstLabels: labels,
			Help: "Keys the store evicted to stay within its bound.",
		}, func() float64 { return float64(ec.Evictions()) }))
	}
	if r, ok := s.(store.Refunder); ok {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: ns, Name: nameRefunds, ConstLabels: labels,
			Help: "Parts of stacked decisions refunded because a later step refused the request.",
		}, func() float64 { return float64(r.Refunds()) }), prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: ns, Name: nameUnrefunded, ConstLabels: labels,
			Help: "Parts of stacked decisions whose refund failed; their units stay charged until they expire.",
		}, func() float64 { return float64(r.Unrefunded()) }))
	}
	if ep, ok := s.(store.EvictionPolicyReporter); ok {
		cs = append(cs, &policyCollector{s: ep, desc: prometheus.NewDesc(prometheus.BuildFQName(ns, "", nameMaxmemoryPolicy),
			"The maxmemory-policy of the store's Redis (1 for the policy found); allkeys-* policies may evict limiter state.",
			[]string{"policy"}, labels)})
	}
	if hs, ok := s.(hybridStats); ok {
		cs = append(cs, newHybridCollector(hs, ns, labels))
	}
	return cs
}

// hybridCollector exports a hybrid store's counters, read once per scrape.
type hybridCollector struct {
	s                                                                  hybridStats
	refreshes, commits, committed, failures, unconfirmed, overadmitted *prometheus.Desc
}

func newHybridCollector(s hybridStats, ns string, labels prometheus.Labels) *hybridCollector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, subsystemHybrid, name), help, nil, labels)
	}
	return &hybridCollector{
		s:            s,
		refreshes:    desc("refreshes_total", "Synchronous backend calls of the hybrid store for keys whose lease was spent (each key's first request included)."),
		commits:      desc("commits_total", "Background commits of locally admitted units that succeeded."),
		committed:    desc("committed_units_total", "Units those commits recorded in the backend."),
		failures:     desc("backend_failures_total", "Backend calls of the hybrid store (requests, commits, probes) that failed."),
		unconfirmed:  desc("unconfirmed_units_total", "Units in failed backend calls whose outcome is unknown: the backend undercounts by at most this many."),
		overadmitted: desc("overadmitted_units_total", "Units admitted locally that the backend refused when committed: the overshoot actually incurred, committed later as capacity frees."),
	}
}

func (c *hybridCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.refreshes, c.commits, c.committed, c.failures, c.unconfirmed, c.overadmitted} {
		ch <- d
	}
}

func (c *hybridCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	for _, m := range []struct {
		d *prometheus.Desc
		v uint64
	}{{c.refreshes, st.Refreshes}, {c.commits, st.Commits}, {c.committed, st.CommittedUnits}, {c.failures, st.Failures}, {c.unconfirmed, st.Unconfirmed}, {c.overadmitted, st.Overadmitted}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
}

// policyCollector exports the eviction policy of a store: no series while
// it is unknown.
type policyCollector struct {
	s    store.EvictionPolicyReporter
	desc *prometheus.Desc
}

func (c *policyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *policyCollector) Collect(ch chan<- prometheus.Metric) {
	if p := c.s.EvictionPolicy(); p != "" {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, p)
	}
}
