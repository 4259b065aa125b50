package middleware

import (
	"context"
	"encoding/json"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// fakeClock is a settable clock for the memory store.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// unitsLeft returns how many units the store would admit now for key: a
// peek at cost 1 reports what would be left after it.
func unitsLeft(t *testing.T, s store.Store, key string, l store.Limit) int64 {
	t.Helper()
	d, err := s.Peek(context.Background(), store.Request{Key: key, Limits: []store.Limit{l}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed {
		return d.Remaining + 1
	}
	return d.Remaining
}

// nestedAPI builds a chi service whose /api group uses api (10 per minute
// per client) and whose /api/export route, inside the group, also uses
// api at cost 10: one quota seen twice on one request.
func nestedAPI(t *testing.T) (http.Handler, store.Store, *fakeClock) {
	t.Helper()
	clock := &fakeClock{now: time.Unix(1767225600, 0)}
	st, err := memstore.New(memstore.Options{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	api := mustNew(t, st, keyfunc.RemoteIP, store.Limit{Rate: 10, Period: time.Minute}, Options{Name: "api", Clock: clock.Now})
	export, err := api.WithCost(10)
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Route("/api", func(r chi.Router) {
		r.Use(api.Handler)
		r.Get("/ping", okHandler)
		r.With(export.Handler).Get("/export", okHandler)
	})
	return r, st, clock
}

// Regression: a route at cost 10 inside a group already using the same
// limiter was charged 1 + 10, so with a limit of 10 a fresh client could
// never reach it, and each 429 said "remaining":9 with a Retry-After that
// never helped.
func TestSameQuotaTwiceIsChargedOnceAtTheLargerCost(t *testing.T) {
	h, st, _ := nestedAPI(t)
	rec := serveReq(h, request("GET", "/api/export", "192.0.2.1:1000"))
	if rec.Code != 200 {
		t.Fatalf("fresh client on the cost-10 route: got %d, want 200", rec.Code)
	}
	if got := rec.Header().Get("X-Ratelimit-Remaining"); got != "0" {
		t.Errorf("X-RateLimit-Remaining: got %s, want 0 (10 units charged once)", got)
	}
	if left := unitsLeft(t, st, "api:192.0.2.1", store.Limit{Rate: 10, Period: time.Minute}); left != 0 {
		t.Errorf("store state: got %d units left, want the quota used up by exactly 10", left)
	}
}

// A refusal on the inner limiter names a Retry-After after which a retry,
// which passes the enclosing limiter again, is admitted; its headers and
// body state what the store holds.
func TestNestedRefusalRetryAfterHelps(t *testing.T) {
	h, st, clock := nestedAPI(t)
	const client = "192.0.2.2:1000"
	for range 3 {
		serveReq(h, request("GET", "/api/ping", client))
	}
	rec := serveReq(h, request("GET", "/api/export", client))
	if rec.Code != 429 {
		t.Fatalf("export with 4 units used: got %d, want 429", rec.Code)
	}
	left := unitsLeft(t, st, "api:192.0.2.2", store.Limit{Rate: 10, Period: time.Minute})
	var body struct {
		Remaining  int64 `json:"remaining"`
		RetryAfter int64 `json:"retry_after"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if body.Remaining != left || rec.Header().Get("X-Ratelimit-Remaining") != strconv.FormatInt(left, 10) {
		t.Errorf("remaining: body %d, header %s; want the store's %d", body.Remaining, rec.Header().Get("X-Ratelimit-Remaining"), left)
	}
	ra, _ := strconv.Atoi(rec.Header().Get("Retry-After"))
	if int64(ra) != body.RetryAfter {
		t.Errorf("Retry-After: header %d, body %d; want them equal", ra, body.RetryAfter)
	}
	// 4 units are held (3 pings and the enclosing limiter's unit of this
	// request); a retry needs all 10 free, since the enclosing limiter
	// charges its unit again: 4 units drain in 24 s at 10 per minute.
	if ra != 24 {
		t.Fatalf("Retry-After: got %d, want 24", ra)
	}
	clock.Add(time.Duration(ra) * time.Second)
	if rec := serveReq(h, request("GET", "/api/export", client)); rec.Code != 200 {
		t.Fatalf("retry after Retry-After: got %d, want 200", rec.Code)
	}
}

// The same limiter twice (a group and a route both using it) charges the
// request once; a different limiter inside charges its own quota.
func TestNestingChargesEachQuotaOnce(t *testing.T) {
	st := mustMem(t)
	api := mustNew(t, st, keyfunc.RemoteIP, store.PerMinute(10), Options{Name: "api"})
	other := mustNew(t, st, keyfunc.RemoteIP, store.PerMinute(10), Options{Name: "other"})
	var inner limiter.Decision
	capture := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner, _ = DecisionFrom(r.Context())
	})
	h := api.Handler(api.Handler(other.Handler(capture)))
	rec := serveReq(h, request("GET", "/", "192.0.2.3:1"))
	if got := rec.Header().Get("X-Ratelimit-Remaining"); got != "9" {
		t.Errorf("remaining after one request: got %s, want 9", got)
	}
	if inner.Policy != "other" || inner.Remaining != 9 {
		t.Errorf("innermost decision: got %s remaining %d, want other with 9", inner.Policy, inner.Remaining)
	}
	if left := unitsLeft(t, st, "api:192.0.2.3", store.PerMinute(10)); left != 9 {
		t.Errorf("api quota: got %d units left, want 9", left)
	}
}

// A smaller cost inside a larger one is already paid: the inner limiter
// neither calls the store nor changes the headers.
func TestNestedSmallerCostIsFree(t *testing.T) {
	st := &recordingStore{decide: func(req store.Request) store.Decision {
		return store.Decision{Allowed: true, Capacity: 10, Remaining: 10 - req.Cost}
	}}
	api := mustNew(t, st, constKey("k"), store.PerMinute(10))
	search, _ := api.WithCost(5)
	rec := serveReq(search.Handler(api.Handler(okHandler)), httptest.NewRequest("GET", "/", nil))
	if st.count() != 1 || st.last(t).Cost != 5 || rec.Header().Get("X-Ratelimit-Remaining") != "5" {
		t.Fatalf("got %d store calls (last cost %d), remaining %s; want one call at cost 5",
			st.count(), st.last(t).Cost, rec.Header().Get("X-Ratelimit-Remaining"))
	}
}
