package middleware

import (
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

func TestLimitByIPLimitsEachAddress(t *testing.T) {
	h := LimitByIP(3, time.Hour)(okHandler)
	for i := range 3 {
		if w := send(h, "192.0.2.1"); w.Code != http.StatusOK || w.Header().Get("X-RateLimit-Limit") != "3" {
			t.Fatalf("request %d: got %d with X-RateLimit-Limit %q, want 200 with 3", i+1, w.Code, w.Header().Get("X-RateLimit-Limit"))
		}
	}
	w := send(h, "192.0.2.1")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("request 4: got %d, want 429", w.Code)
	}
	// 3 per hour: one unit comes back every 20 minutes.
	if got := w.Header().Get("Retry-After"); got != "1200" {
		t.Fatalf("Retry-After: got %q, want 1200", got)
	}
	if w := send(h, "192.0.2.2"); w.Code != http.StatusOK {
		t.Fatalf("another address: got %d, want 200", w.Code)
	}
	// Each call counts on a store of its own.
	if w := send(LimitByIP(3, time.Hour)(okHandler), "192.0.2.1"); w.Code != http.StatusOK {
		t.Fatalf("a second LimitByIP: got %d, want 200 (its own counters)", w.Code)
	}
}

func TestLimitByIPOnAStore(t *testing.T) {
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := LimitByIP(2, time.Minute, Options{Store: st, Name: "per-ip"})(okHandler)
	send(h, "192.0.2.1")
	req := store.Request{Key: limiter.StoreKey("per-ip", "", "192.0.2.1"), Limits: []store.Limit{{Rate: 2, Period: time.Minute}}}
	d, err := st.Peek(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if d.Remaining != 0 { // a peek reports what would be left after it
		t.Fatalf("the given store after one request: got Remaining %d after a peek, want 0 (one unit used)", d.Remaining)
	}
	// The naming rule holds: a second unnamed limiter on one store would
	// share the first's quota by accident.
	first := LimitByIP(2, time.Minute, Options{Store: st})
	msg := panicked(func() { LimitByIP(2, time.Minute, Options{Store: st}) })
	runtime.KeepAlive(first) // a limiter nobody holds any more does not count
	if !strings.Contains(msg, "LimitByIP") || !strings.Contains(msg, "name") {
		t.Fatalf("a second unnamed LimitByIP on one store: got panic %q, want one naming LimitByIP and the naming rule", msg)
	}
	if _, err := New(st, nil, store.PerMinute(1), Options{Store: st, Name: "x"}); err == nil || !strings.Contains(err.Error(), "Options.Store") {
		t.Fatalf("New with Options.Store: got error %v, want one naming Options.Store", err)
	}
}

func TestLimitByIPPanicsAtSetupOnBadLimits(t *testing.T) {
	for _, tc := range []struct {
		n   int64
		per time.Duration
	}{{0, time.Minute}, {10, 0}, {10, time.Microsecond}} {
		if msg := panicked(func() { LimitByIP(tc.n, tc.per) }); !strings.Contains(msg, "LimitByIP") || !strings.Contains(msg, "invalid limit") {
			t.Errorf("LimitByIP(%d, %s): got panic %q, want one naming LimitByIP and the invalid limit", tc.n, tc.per, msg)
		}
	}
}

// panicked runs f and returns the message it panicked with, "" if none.
func panicked(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg, _ = r.(string)
		}
	}()
	f()
	return ""
}
