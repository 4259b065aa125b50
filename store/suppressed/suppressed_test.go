package suppressed_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/hybrid"
	"github.com/ratekeeper/ratekeeper/store/memstore"
	"github.com/ratekeeper/ratekeeper/store/suppressed"
)

// newMem returns the suppressed store over a fresh memory store, with
// soft limits by limit name (half the hard limit for other names), and
// the memory store.
func newMem(t *testing.T, softs map[string]int64) (store.Store, store.Store) {
	t.Helper()
	m, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := suppressed.New(m, suppressed.Options{Soft: func(l store.Limit) int64 {
		if v, ok := softs[l.Name]; ok {
			return v
		}
		return max(l.Rate/2, 1)
	}})
	if err != nil {
		t.Fatal(err)
	}
	return s, m
}

// TestValidate: what the strategy takes. The hard limit is the counting
// limit's Rate (Burst is not its to give), the soft limit 1 to it; no
// block, no counted refusals, a cost up to the hard limit, de-duplication
// allowed; the counting limit is a sliding window counter.
func TestValidate(t *testing.T) {
	swc := func(name string, rate int64) store.Limit {
		return store.Limit{Name: name, Algorithm: store.SlidingWindowCounter, Rate: rate, Period: time.Minute}
	}
	softs := map[string]int64{"h15": 10, "h10": 10, "h9": 10, "zero": 0}
	tests := []struct {
		name string
		r    store.Request
		want error
	}{
		{"default soft limit", store.Request{Key: "k", Limits: []store.Limit{swc("d", 20)}, Cost: 20}, nil},
		{"cost above the hard limit", store.Request{Key: "k", Limits: []store.Limit{swc("d", 20)}, Cost: 21}, store.ErrCostExceedsCapacity},
		{"hard limit", store.Request{Key: "k", Limits: []store.Limit{swc("h15", 15)}, Cost: 15}, nil},
		{"hard limit equal to the soft one", store.Request{Key: "k", Limits: []store.Limit{swc("h10", 10)}}, nil},
		{"hard limit below the soft one", store.Request{Key: "k", Limits: []store.Limit{swc("h9", 9)}}, store.ErrInvalidLimit},
		{"soft limit 0", store.Request{Key: "k", Limits: []store.Limit{swc("zero", 10)}}, store.ErrInvalidLimit},
		{"hard limit too large", store.Request{Key: "k", Limits: []store.Limit{swc("d", 2<<30)}}, store.ErrInvalidLimit},
		{"block", store.Request{Key: "k", Limits: []store.Limit{{Algorithm: store.SlidingWindowCounter, Rate: 10, Period: time.Minute, Block: time.Minute}}}, store.ErrInvalidLimit},
		{"count denied", store.Request{Key: "k", Limits: []store.Limit{swc("d", 20)}, CountDenied: true}, store.ErrInvalidRequest},
		{"partial", store.Request{Key: "k", Limits: []store.Limit{swc("d", 20)}, Partial: true}, store.ErrInvalidRequest},
		{"dedup", store.Request{Key: "k", Limits: []store.Limit{swc("d", 20)}, DedupID: "x"}, nil},
		{"another counting algorithm", store.Request{Key: "k", Limits: []store.Limit{{Algorithm: store.GCRA, Rate: 10, Period: time.Minute}}}, store.ErrInvalidLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newMem(t, softs)
			for op, call := range map[string]func() error{
				"Take":  func() error { _, err := s.Take(context.Background(), tt.r); return err },
				"Peek":  func() error { _, err := s.Peek(context.Background(), tt.r); return err },
				"Reset": func() error { return s.Reset(context.Background(), tt.r) },
			} {
				err := call()
				if op == "Reset" && (tt.want == store.ErrCostExceedsCapacity || errors.Is(err, store.ErrNotFound)) {
					continue // Reset ignores the cost; nothing was stored
				}
				if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
					t.Errorf("%s: got error %v, want %v", op, err, tt.want)
				}
			}
		})
	}
}

// TestNewNeedsAnAtomicStore: only the stores that decide the strategy in
// one step take it; the hybrid store, which decides locally without every
// instance's offered load, does not.
func TestNewNeedsAnAtomicStore(t *testing.T) {
	m, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hybrid.New(m, hybrid.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := suppressed.New(h, suppressed.Options{}); err == nil {
		t.Error("suppressed.New(hybrid store): got no error, want one")
	}
	s, err := suppressed.New(m, suppressed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := suppressed.New(s, suppressed.Options{}); err == nil {
		t.Error("suppressed.New(suppressed store): got no error, want one")
	}
}

// TestCapabilities: the store forwards the backend's overrides, which
// apply to suppressed limits (a scale override scales both limits), and
// its eviction count and name; it is not a MultiStore.
func TestCapabilities(t *testing.T) {
	s, m := newMem(t, nil)
	ctx := context.Background()
	ov, ok := s.(store.OverrideStore)
	if !ok {
		t.Fatal("not a store.OverrideStore")
	}
	if err := ov.SetOverride(ctx, "k", store.Override{Kind: store.OverrideScale, Scale: 0.5, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.(store.OverrideStore).GetOverride(ctx, "k"); err != nil {
		t.Fatalf("the backend's override: %v", err)
	}
	l := store.Limit{Algorithm: store.SlidingWindowCounter, Rate: 20, Period: time.Minute}
	d, err := s.Take(ctx, store.Request{Key: "k", Limits: []store.Limit{l}, ApplyOverride: true})
	if err != nil || !d.Allowed || d.Capacity != 10 || d.Override != store.OverrideScale {
		t.Fatalf("under a 0.5 scale: got %+v, %v; want admitted with the hard limit 10", d, err)
	}
	if _, ok := s.(store.MultiStore); ok {
		t.Error("a store.MultiStore, want none: load shedding is not stacked")
	}
	if got := s.(store.EvictionCounter).Evictions(); got != 0 {
		t.Errorf("Evictions: got %d, want the backend's 0", got)
	}
	if got := s.(interface{ Name() string }).Name(); got != "memory" {
		t.Errorf("Name: got %q, want the backend's %q", got, "memory")
	}
}
