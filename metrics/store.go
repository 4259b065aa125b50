package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratekeeper/ratekeeper/store"
)

// Names of the series read from the store's capabilities, without the
// namespace.
const (
	nameEvictions       = "store_evictions_total"
	nameRefunds         = "stack_refunds_total"
	nameUnrefunded      = "stack_unrefunded_total"
	nameMaxmemoryPolicy = "redis_maxmemory_policy"
)

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
	return cs
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
