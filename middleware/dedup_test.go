package middleware_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// TestDedupIDDoesNotBypassLimit pins the bypass where 500 requests with
// one Idempotency-Key all reached the handler against a limit of 100, and
// the later one where the first admission's replays (3 by default, or as
// DedupReplays and DedupWindow say) reached the handler on top of the
// limit: replays are counted like any request, so the handler runs
// exactly 100 times, whatever the bound, and the rest are refused with 429.
func TestDedupIDDoesNotBypassLimit(t *testing.T) {
	tests := []struct {
		name string
		o    middleware.Options
	}{
		{"default bound", middleware.Options{}},
		{"one replay", middleware.Options{DedupReplays: 1}},
		{"ten replays within 30s", middleware.Options{DedupReplays: 10, DedupWindow: 30 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := memstore.New(memstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			o := tt.o
			o.Dedup = func(r *http.Request) string { return r.Header.Get("Idempotency-Key") }
			lim, err := middleware.New(st, keyfunc.RemoteIP, store.Limit{Algorithm: store.SlidingWindowLog, Rate: 100, Period: time.Hour}, o)
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int64
			h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { runs.Add(1) }))
			var refused atomic.Int64
			var wg sync.WaitGroup
			for range 500 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if res := get(h, "/orders", "192.0.2.8:1", "Idempotency-Key", "same"); res.StatusCode == http.StatusTooManyRequests {
						refused.Add(1)
					}
				}()
			}
			wg.Wait()
			if got := runs.Load(); got != 100 {
				t.Errorf("handler runs: got %d, want 100 (the limit; replays are counted)", got)
			}
			if got := refused.Load(); got != 400 {
				t.Errorf("429 responses: got %d, want 400", got)
			}
		})
	}
}

// TestDedupFreshIDsDoNotExceedLimit pins the bypass by fresh ids: a client
// that sends each new Idempotency-Key once and replays it DedupReplays
// times ran the handler 1 + DedupReplays times its limit (40 runs against
// a limit of 10 with the default bound), because replays were bounded per
// id, not per client. Every handler run now uses the client's quota, for
// every algorithm: the handler runs exactly 10 times, the replays that
// run are reported as duplicates, and the limit's headers count them.
func TestDedupFreshIDsDoNotExceedLimit(t *testing.T) {
	for _, alg := range []store.Algorithm{store.GCRA, store.SlidingWindowLog, store.SlidingWindowCounter, store.FixedWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			st, err := memstore.New(memstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			lim, err := middleware.New(st, keyfunc.RemoteIP, store.Limit{Algorithm: alg, Rate: 10, Period: time.Hour},
				middleware.Options{Dedup: func(r *http.Request) string { return r.Header.Get("Idempotency-Key") }, DecisionInContext: true})
			if err != nil {
				t.Fatal(err)
			}
			var runs, replays int
			h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs++
				if d, ok := middleware.DecisionFrom(r.Context()); ok && d.Duplicate {
					replays++
				}
			}))
			for i := range 100 {
				res := get(h, "/orders", "192.0.2.9:1", "Idempotency-Key", fmt.Sprintf("order-%d", i/4))
				if res.StatusCode == http.StatusOK && runs == 10 && res.Header.Get("X-RateLimit-Remaining") != "0" {
					t.Errorf("the 10th run: got X-RateLimit-Remaining %q, want 0", res.Header.Get("X-RateLimit-Remaining"))
				}
			}
			if runs != 10 {
				t.Errorf("handler runs: got %d, want 10 (the limit), whatever ids the client sends", runs)
			}
			if replays != 7 {
				t.Errorf("replays served: got %d, want 7 (three of each of the first two ids, one of the third)", replays)
			}
		})
	}
}

// TestDedupBoundInvalid: a negative bound makes New fail.
func TestDedupBoundInvalid(t *testing.T) {
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct {
		replays int
		window  time.Duration
	}{{-1, 0}, {0, -time.Second}} {
		if _, err := middleware.New(st, keyfunc.RemoteIP, store.Limit{Rate: 1, Period: time.Second}, middleware.Options{DedupReplays: b.replays, DedupWindow: b.window}); err == nil {
			t.Errorf("DedupReplays %d, DedupWindow %s: got no error, want one", b.replays, b.window)
		}
	}
}
