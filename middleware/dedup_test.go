package middleware_test

import (
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
// one Idempotency-Key all reached the handler against a limit of 100: the
// first admission and its replays (3 by default, or as DedupReplays and DedupWindow
// says) reach the handler without being counted, and then every request
// is counted, so the handler runs 100 + replays times and the rest are
// refused with 429.
func TestDedupIDDoesNotBypassLimit(t *testing.T) {
	tests := []struct {
		name    string
		o       middleware.Options
		replays int
	}{
		{"default bound", middleware.Options{}, 3},
		{"one replay", middleware.Options{DedupReplays: 1}, 1},
		{"ten replays within 30s", middleware.Options{DedupReplays: 10, DedupWindow: 30 * time.Second}, 10},
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
			want := int64(100 + tt.replays)
			if got := runs.Load(); got != want {
				t.Errorf("handler runs: got %d, want %d (100 counted, %d replays)", got, want, tt.replays)
			}
			if got := refused.Load(); got != 500-want {
				t.Errorf("429 responses: got %d, want %d", got, 500-want)
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
