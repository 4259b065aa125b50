package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type fixedPolicy string

func (p *fixedPolicy) EvictionPolicy() string { return string(*p) }

// TestEvictionPolicyGauge: no series until the store knows its policy,
// then one series labelled with it.
func TestEvictionPolicyGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := fixedPolicy("")
	if err := RegisterEvictionPolicy(reg, &p, Options{}); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "ratekeeper_redis_maxmemory_policy"); err != nil || n != 0 {
		t.Fatalf("before the check: %d series (%v), want 0", n, err)
	}
	p = "allkeys-lru"
	want := `
# HELP ratekeeper_redis_maxmemory_policy The maxmemory-policy of the store's Redis (1 for the policy found); allkeys-* policies may evict limiter state.
# TYPE ratekeeper_redis_maxmemory_policy gauge
ratekeeper_redis_maxmemory_policy{policy="allkeys-lru"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ratekeeper_redis_maxmemory_policy"); err != nil {
		t.Fatal(err)
	}
}
