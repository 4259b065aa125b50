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

// TestSlotsAreTheBackends: a hybrid store's in-flight caps are kept by
// its backend alone, so two hybrid stores over one backend share a cap;
// over a backend without caps every call fails with ErrUnsupported.
func TestSlotsAreTheBackends(t *testing.T) {
	ctx := context.Background()
	m, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := newHybrid(t, m, hybrid.Options{SyncInterval: time.Hour}).(store.SlotStore)
	b := newHybrid(t, m, hybrid.Options{SyncInterval: time.Hour}).(store.SlotStore)
	one := store.Slot{Key: "k", ID: "1"}
	if ok, held, err := a.Acquire(ctx, one, 1, time.Minute); err != nil || !ok || held != 1 {
		t.Fatalf("a: got %t, %d, %v; want the slot", ok, held, err)
	}
	if ok, _, err := b.Acquire(ctx, store.Slot{Key: "k", ID: "2"}, 1, time.Minute); err != nil || ok {
		t.Fatalf("b while a holds the only slot: got %t, %v; want refused", ok, err)
	}
	if n, err := b.Renew(ctx, []store.Slot{one}, time.Minute); err != nil || n != 1 {
		t.Fatalf("b renews a's slot: got %d, %v; want 1", n, err)
	}
	if err := b.Release(ctx, one); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := a.Acquire(ctx, store.Slot{Key: "k", ID: "3"}, 1, time.Minute); err != nil || !ok {
		t.Fatalf("after the release: got %t, %v; want the slot", ok, err)
	}

	plain := newHybrid(t, plainBackend{m}, hybrid.Options{SyncInterval: time.Hour}).(store.SlotStore)
	if _, _, err := plain.Acquire(ctx, one, 1, time.Minute); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Acquire over a backend without caps: got %v, want ErrUnsupported", err)
	}
	if err := plain.Release(ctx, one); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Release: got %v, want ErrUnsupported", err)
	}
	if _, err := plain.Renew(ctx, []store.Slot{one}, time.Minute); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Renew: got %v, want ErrUnsupported", err)
	}
}
