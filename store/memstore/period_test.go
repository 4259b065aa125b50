package memstore

import (
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// TestWindowAfterPeriodChange: a named window limit whose period a reload
// changes keeps its state, and the state lives as long as the new period
// calls for. The Redis store's TestWindowTTLAfterPeriodChange runs the
// same requests against real Redis: both stores refuse the hour's fourth
// unit 4 s after the reload.
func TestWindowAfterPeriodChange(t *testing.T) {
	for _, alg := range []store.Algorithm{store.FixedWindow, store.SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			s, clk := newTestStore(t, Options{})
			short := store.Limit{Name: "api", Algorithm: alg, Rate: 100, Period: 2 * time.Second}
			long := store.Limit{Name: "api", Algorithm: alg, Rate: 3, Period: time.Hour}
			take := func(l store.Limit) store.Decision {
				t.Helper()
				d, err := s.Take(ctx, store.Request{Key: "client", Limits: []store.Limit{l}})
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			take(short)
			take(short)
			if d := take(long); !d.Allowed || d.Remaining != 0 {
				t.Fatalf("first take after the reload: allowed %v, remaining %d; want admitted with 0 left", d.Allowed, d.Remaining)
			}
			clk.Advance(4200 * time.Millisecond)
			for i := range 3 {
				if d := take(long); d.Allowed {
					t.Errorf("take %d, 4 s after the reload: admitted with %d left; the hour's 3 units were used", i, d.Remaining)
				}
			}
		})
	}
}
