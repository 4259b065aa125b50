package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/hybrid"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// evicter is a store that counts evictions.
type evicter struct {
	store.Store
	n uint64
}

func (e *evicter) Evictions() uint64 { return e.n }

// refunder is a store that refunds stacked decisions.
type refunder struct {
	store.Store
	refunds, unrefunded uint64
}

var _ store.Refunder = (*refunder)(nil)

func (r *refunder) Refunds() uint64    { return r.refunds }
func (r *refunder) Unrefunded() uint64 { return r.unrefunded }
func (r *refunder) Settle(context.Context, store.Request, store.Decision, int64) error {
	return nil
}

// fixedPolicy is a store whose backend has an eviction policy.
type fixedPolicy struct {
	store.Store
	p string
}

func (p *fixedPolicy) EvictionPolicy() string { return p.p }

func newMem(t *testing.T, opts memstore.Options) store.Store {
	t.Helper()
	m, err := memstore.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// gathered returns the value of each counter or gauge series of reg by
// name (the last series of a name).
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				got[mf.GetName()] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				got[mf.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	return got
}

// TestStoreEvictions: the evictions of Options.Store are a counter read at
// scrape time; a second Collector on the registry fails.
func TestStoreEvictions(t *testing.T) {
	reg := prometheus.NewRegistry()
	ev := &evicter{n: 7}
	if _, err := New(reg, Options{Store: ev}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg, Options{Store: ev}); err == nil {
		t.Fatal("a second registration: got nil error, want one")
	}
	ev.n = 9
	if got := gathered(t, reg)["ratekeeper_store_evictions_total"]; got != 9 {
		t.Fatalf("evictions: got %v, want 9 (read at scrape time)", got)
	}
}

// TestStoreRefunds: the refunds of Options.Store are two counters read at
// scrape time.
func TestStoreRefunds(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	r := &refunder{}
	if _, err := New(reg, Options{Store: r}); err != nil {
		t.Fatal(err)
	}
	r.refunds, r.unrefunded = 120, 2
	got := gathered(t, reg)
	if got["ratekeeper_stack_refunds_total"] != 120 || got["ratekeeper_stack_unrefunded_total"] != 2 {
		t.Fatalf("got %v, want 120 refunds and 2 unrefunded (read at scrape time)", got)
	}
	if n, err := testutil.GatherAndCount(reg, "ratekeeper_stack_refunds_total", "ratekeeper_stack_unrefunded_total"); err != nil || n != 2 {
		t.Fatalf("series: %d, %v; want 2", n, err)
	}
}

// TestEvictionPolicyGauge: no series until the store knows its policy,
// then one series labelled with it.
func TestEvictionPolicyGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := &fixedPolicy{}
	if _, err := New(reg, Options{Store: p}); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "ratekeeper_redis_maxmemory_policy"); err != nil || n != 0 {
		t.Fatalf("before the check: %d series (%v), want 0", n, err)
	}
	p.p = "allkeys-lru"
	want := `
# HELP ratekeeper_redis_maxmemory_policy The maxmemory-policy of the store's Redis (1 for the policy found); allkeys-* policies may evict limiter state.
# TYPE ratekeeper_redis_maxmemory_policy gauge
ratekeeper_redis_maxmemory_policy{policy="allkeys-lru"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ratekeeper_redis_maxmemory_policy"); err != nil {
		t.Fatal(err)
	}
}

// TestOnlyTheStoresCapabilities: a store exports the series of the
// capabilities it has and no others.
func TestOnlyTheStoresCapabilities(t *testing.T) {
	storeSeries := []string{"ratekeeper_store_evictions_total", "ratekeeper_stack_refunds_total", "ratekeeper_stack_unrefunded_total", "ratekeeper_redis_maxmemory_policy"}
	for name, tc := range map[string]struct {
		st   store.Store
		want int
	}{
		"none":  {nil, 0},
		"plain": {struct{ store.Store }{newMem(t, memstore.Options{})}, 0},
		// Evictions, and the refund counters of a Refunder (at 0: the
		// memory store settles costs but never refunds a stack).
		"memory":   {newMem(t, memstore.Options{}), 3},
		"refunder": {&refunder{}, 2},
		"policy":   {&fixedPolicy{p: "noeviction"}, 1},
	} {
		reg := prometheus.NewRegistry()
		if _, err := New(reg, Options{Store: tc.st}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n, err := testutil.GatherAndCount(reg, storeSeries...); err != nil || n != tc.want {
			t.Errorf("%s: got %d store series (%v), want %d", name, n, err, tc.want)
		}
	}
}

// TestHybridStoreReportsItsBackend: metrics given a hybrid store export
// what its backend reports.
func TestHybridStoreReportsItsBackend(t *testing.T) {
	m := newMem(t, memstore.Options{MaxKeys: 1, Shards: 1})
	h, err := hybrid.New(m, hybrid.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	reg := prometheus.NewRegistry()
	if _, err := New(reg, Options{Store: h}); err != nil {
		t.Fatal(err)
	}
	lim := store.Limit{Rate: 5, Period: time.Minute, Block: time.Minute} // decided by the backend
	for _, key := range []string{"a", "b", "c"} {
		if _, err := h.Take(context.Background(), store.Request{Key: key, Limits: []store.Limit{lim}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := gathered(t, reg)["ratekeeper_store_evictions_total"]; got == 0 || got != float64(m.(store.EvictionCounter).Evictions()) {
		t.Fatalf("evictions: got %v, want the backend's %d (> 0)", got, m.(store.EvictionCounter).Evictions())
	}
}

// TestHybridStoreStats: a hybrid store's counters are exported, read at
// scrape time; other stores have none of these series.
func TestHybridStoreStats(t *testing.T) {
	m := newMem(t, memstore.Options{})
	h, err := hybrid.New(m, hybrid.Options{SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	reg := prometheus.NewPedanticRegistry()
	if _, err := New(reg, Options{Store: h}); err != nil {
		t.Fatal(err)
	}
	lim := store.Limit{Rate: 100, Period: time.Minute}
	for range 3 {
		if _, err := h.Take(context.Background(), store.Request{Key: "a", Limits: []store.Limit{lim}}); err != nil {
			t.Fatal(err)
		}
	}
	got := gathered(t, reg)
	if got["ratekeeper_hybrid_refreshes_total"] != 1 || got["ratekeeper_hybrid_commits_total"] != 0 {
		t.Fatalf("got %v, want 1 refresh (the key's first request) and no commit yet", got)
	}
	series := []string{"ratekeeper_hybrid_refreshes_total", "ratekeeper_hybrid_commits_total", "ratekeeper_hybrid_committed_units_total",
		"ratekeeper_hybrid_backend_failures_total", "ratekeeper_hybrid_unconfirmed_units_total", "ratekeeper_hybrid_overadmitted_units_total"}
	if n, err := testutil.GatherAndCount(reg, series...); err != nil || n != 6 {
		t.Fatalf("hybrid series: %d, %v; want 6", n, err)
	}
	if err := h.Close(); err != nil { // commits the pending units
		t.Fatal(err)
	}
	if got := gathered(t, reg); got["ratekeeper_hybrid_committed_units_total"] != 2 {
		t.Errorf("after Close: got %v committed units, want 2 (the units admitted locally)", got["ratekeeper_hybrid_committed_units_total"])
	}
	other := prometheus.NewRegistry()
	if _, err := New(other, Options{Store: m}); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(other, series...); err != nil || n != 0 {
		t.Errorf("memory store: %d hybrid series (%v), want 0", n, err)
	}
}
