package policy_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/middleware/policy"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// TestCalendarQuota: a daily quota of a policy file counts in the days of
// its time zone, and its refusal names the real end of the day: on the
// day daylight saving time ends in Berlin, 25 hours long.
func TestCalendarQuota(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}
	now := time.Date(2026, 10, 25, 0, 30, 0, 0, berlin) // CEST
	st, err := memstore.New(memstore.Options{Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	set, err := policy.New("quota.yaml", []byte(`
policies:
  api:
    key: ip
    limits:
      - name: daily
        rate: 2
        calendar: day
        timezone: Europe/Berlin
`), st, appOptions())
	if err != nil {
		t.Fatal(err)
	}
	h := set.Handler("api")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	serve := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "203.0.113.7:1234"
		h.ServeHTTP(rec, r)
		return rec
	}
	for i := range 2 {
		if rec := serve(); rec.Code != http.StatusOK {
			t.Fatalf("request %d: status %d, want 200", i+1, rec.Code)
		}
	}
	rec := serve()
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("third request: status %d, want 429", rec.Code)
	}
	// Midnight after the 25-hour day: 2026-10-26 00:00 CET, 24h30m away.
	end := time.Date(2026, 10, 26, 0, 0, 0, 0, berlin)
	if got, want := rec.Header().Get("Retry-After"), "88200"; got != want || end.Sub(now) != 88200*time.Second {
		t.Errorf("Retry-After: got %s, want %s (until %s)", got, want, end)
	}
	// The next day admits again.
	now = end
	if rec := serve(); rec.Code != http.StatusOK {
		t.Fatalf("at midnight: status %d, want 200", rec.Code)
	}
}
