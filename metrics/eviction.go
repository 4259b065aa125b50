package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// PolicyReporter is implemented by stores that know the eviction policy of
// their backend, such as the Redis store (its EvictionPolicy method).
type PolicyReporter interface {
	EvictionPolicy() string
}

// RegisterEvictionPolicy registers "<namespace>_redis_maxmemory_policy",
// a gauge of value 1 labelled with the policy s found on its server
// ("unknown" when the server refused CONFIG; no series until the store's
// first decision). Alert on policy=~"allkeys-.*": Redis may then evict
// limiter state under memory pressure, admitting clients afresh.
func RegisterEvictionPolicy(reg prometheus.Registerer, s PolicyReporter, opts Options) error {
	if reg == nil || s == nil {
		return errors.New("ratekeeper: metrics: nil registerer or store")
	}
	ns := opts.Namespace
	if ns == "" {
		ns = defaultNamespace
	}
	c := &policyCollector{s: s, desc: prometheus.NewDesc(prometheus.BuildFQName(ns, "", nameMaxmemoryPolicy),
		"The maxmemory-policy of the store's Redis (1 for the policy found); allkeys-* policies may evict limiter state.",
		[]string{"policy"}, opts.ConstLabels)}
	if err := reg.Register(c); err != nil {
		return fmt.Errorf("ratekeeper: metrics: register: %w", err)
	}
	return nil
}

// nameMaxmemoryPolicy is the eviction-policy gauge's name.
const nameMaxmemoryPolicy = "redis_maxmemory_policy"

type policyCollector struct {
	s    PolicyReporter
	desc *prometheus.Desc
}

func (c *policyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *policyCollector) Collect(ch chan<- prometheus.Metric) {
	if p := c.s.EvictionPolicy(); p != "" {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, p)
	}
}
