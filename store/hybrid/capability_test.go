package hybrid_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/hybrid"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// plainBackend hides every capability of the store it wraps.
type plainBackend struct{ store.Store }

// reportingBackend is a backend that reports an eviction policy and
// refunds.
type reportingBackend struct{ store.Store }

var _ store.Refunder = reportingBackend{}

func (reportingBackend) EvictionPolicy() string { return "noeviction" }
func (reportingBackend) Refunds() uint64        { return 3 }
func (reportingBackend) Unrefunded() uint64     { return 1 }
func (reportingBackend) Settle(context.Context, store.Request, store.Decision, int64) error {
	return nil
}

// TestForwardsCapabilities: the blocks, evictions, eviction policy and
// refunds a hybrid store reports are its backend's.
func TestForwardsCapabilities(t *testing.T) {
	ctx := context.Background()
	m, err := memstore.New(memstore.Options{MaxKeys: 2, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := newHybrid(t, m, hybrid.Options{SyncInterval: time.Hour})
	lim := store.Limit{Name: "minute", Rate: 1, Period: time.Minute, Block: time.Minute}
	for _, key := range []string{"login:a", "login:b", "login:c"} {
		for range 2 {
			if _, err := s.Take(ctx, store.Request{Key: key, Limits: []store.Limit{lim}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	blocks, next, err := s.(store.BlockLister).Blocks(ctx, "login:", "", 10)
	want, _, _ := m.(store.BlockLister).Blocks(ctx, "login:", "", 10)
	if err != nil || next != "" || len(blocks) == 0 || len(blocks) != len(want) {
		t.Errorf("Blocks: got %v, %q, %v; want the backend's %v", blocks, next, err, want)
	}
	if got := s.(store.EvictionCounter).Evictions(); got == 0 || got != m.(store.EvictionCounter).Evictions() {
		t.Errorf("Evictions: got %d, want the backend's %d (> 0)", got, m.(store.EvictionCounter).Evictions())
	}

	r := newHybrid(t, reportingBackend{m}, hybrid.Options{})
	if p, n, u := r.(store.EvictionPolicyReporter).EvictionPolicy(), r.(store.Refunder).Refunds(), r.(store.Refunder).Unrefunded(); p != "noeviction" || n != 3 || u != 1 {
		t.Errorf("got policy %q, refunds %d, unrefunded %d; want the backend's noeviction, 3, 1", p, n, u)
	}
}

// TestCapabilitiesOfAPlainBackend: over a backend without them, a hybrid
// store reports no evictions, no policy and no refunds, its block
// listing fails with errors.ErrUnsupported and it settles nothing.
func TestCapabilitiesOfAPlainBackend(t *testing.T) {
	m, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := newHybrid(t, plainBackend{m}, hybrid.Options{})
	if _, _, err := s.(store.BlockLister).Blocks(context.Background(), "", "", 10); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Blocks: got %v, want errors.ErrUnsupported", err)
	}
	if e, p, n, u := s.(store.EvictionCounter).Evictions(), s.(store.EvictionPolicyReporter).EvictionPolicy(), s.(store.Refunder).Refunds(), s.(store.Refunder).Unrefunded(); e != 0 || p != "" || n != 0 || u != 0 {
		t.Errorf("got evictions %d, policy %q, refunds %d, unrefunded %d; want 0, \"\", 0, 0", e, p, n, u)
	}
	r := store.Request{Key: "k", Limits: []store.Limit{{Rate: 10, Period: time.Hour}}, Cost: 4}
	if err := s.(store.Refunder).Settle(context.Background(), r, store.Decision{Allowed: true}, 7); !errors.Is(err, store.ErrInvalidRequest) {
		t.Errorf("Settle: got %v, want ErrInvalidRequest (the backend does not settle)", err)
	}
}

// TestSettlePassesToTheBackend: a settlement through a hybrid store
// charges the backend's state at once.
func TestSettlePassesToTheBackend(t *testing.T) {
	ctx := context.Background()
	m, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := newHybrid(t, m, hybrid.Options{SyncInterval: time.Hour})
	r := store.Request{Key: "k", Limits: []store.Limit{{Rate: 10, Period: time.Hour}}, Cost: 4}
	if err := s.(store.Refunder).Settle(ctx, r, store.Decision{Allowed: true}, 7); err != nil {
		t.Fatalf("Settle: got %v, want nil", err)
	}
	d, err := m.Peek(ctx, store.Request{Key: "k", Limits: r.Limits})
	if err != nil || d.Remaining != 6 {
		t.Errorf("backend after a charge of 3: got %+v, %v, want 6 remaining after one more unit", d, err)
	}
}
