package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/internal/keybuf"
	"github.com/ratekeeper/ratekeeper/internal/keybuf/keybuftest"
	"github.com/ratekeeper/ratekeeper/store"
)

// lentKey returns a context and key in the memory that context lends.
func lentKey(key string) (*keybuftest.Ctx, string) {
	c, k, _ := keybuftest.Lent(context.Background(), key)
	return c, k
}

// TestNewRecordCopiesLentKey: a record made for a key in lent memory keeps
// a copy, on the plain path, the general path, a stack and a settlement, so that
// the store never keeps a request's state alive; a known key is taken
// without a copy.
func TestNewRecordCopiesLentKey(t *testing.T) {
	gcra := []store.Limit{{Rate: 10, Period: time.Second}}
	tests := []struct {
		name string
		do   func(s *memStore, ctx context.Context, key string) error
	}{
		{"plain take", func(s *memStore, ctx context.Context, key string) error {
			_, err := s.Take(ctx, store.Request{Key: key, Limits: gcra})
			return err
		}},
		{"take with a de-duplication id", func(s *memStore, ctx context.Context, key string) error {
			_, err := s.Take(ctx, store.Request{Key: key, Limits: gcra, DedupID: "r1", DedupReplays: 1, DedupWindow: time.Minute})
			return err
		}},
		{"take of two limits", func(s *memStore, ctx context.Context, key string) error {
			_, err := s.Take(ctx, store.Request{Key: key, Limits: []store.Limit{gcra[0], {Rate: 100, Period: time.Minute}}})
			return err
		}},
		{"stack", func(s *memStore, ctx context.Context, key string) error {
			_, err := s.TakeMulti(ctx, []store.Request{{Key: key, Limits: gcra}, {Key: "route", Limits: gcra}})
			return err
		}},
		{"settle", func(s *memStore, ctx context.Context, key string) error {
			return s.Settle(ctx, store.Request{Key: key, Limits: gcra, Cost: 1}, store.Decision{Allowed: true}, 3)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestStore(t, Options{Shards: 1})
			ctx, key := lentKey("api:203.0.113.7")
			if err := tc.do(s, ctx, key); err != nil {
				t.Fatal(err)
			}
			r := s.shards[0].index.get(key, keyHash(s.seed, key))
			if r == nil {
				t.Fatalf("no record for %q", key)
			}
			if keybuf.Holds(ctx, r.key) {
				t.Fatalf("record key %q: got the lent memory, want a copy", r.key)
			}
			s.shards[0].index.each(func(r *record) {
				if keybuf.Holds(ctx, r.key) {
					t.Errorf("index key %q: got the lent memory, want a copy", r.key)
				}
			})
		})
	}
}

// TestTakeTakesStampedInstant: a plain take whose context carries the
// instant of its decision (stamped by the decision core, which read the
// same clock) decides at that instant instead of reading the clock again;
// a store with its own Options.Clock ignores the stamp.
func TestTakeTakesStampedInstant(t *testing.T) {
	hourly := []store.Limit{{Rate: 1, Period: time.Hour}}
	stamped := func(at time.Time) context.Context {
		c := &keybuftest.Ctx{Context: context.Background()}
		c.KeyBuffer().Stamp(at)
		return c
	}
	take := func(s *memStore, ctx context.Context) bool {
		t.Helper()
		d, err := s.Take(ctx, store.Request{Key: "k", Limits: hourly})
		if err != nil {
			t.Fatal(err)
		}
		return d.Allowed
	}

	s, err := newMem(Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if !take(s, stamped(now)) {
		t.Fatal("first take: refused, want admitted")
	}
	if take(s, context.Background()) {
		t.Fatal("second take, at the clock's instant: admitted, want refused")
	}
	if !take(s, stamped(now.Add(time.Hour+time.Second))) {
		t.Fatal("take stamped an hour later: refused, want admitted (the stamp is the decision's instant)")
	}

	frozen, _ := newTestStore(t, Options{})
	if !take(frozen, stamped(now)) {
		t.Fatal("store with its own clock, first take: refused, want admitted")
	}
	if take(frozen, stamped(now.Add(time.Hour+time.Second))) {
		t.Fatal("store with its own clock, take stamped an hour later: admitted, want refused (its clock has not moved)")
	}
}
