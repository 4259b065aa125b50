package middleware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/internal/redistest"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// tokenRoute is a route under a request budget (1 unit a request) and a
// token budget (an estimate of 10 a request, settled at the tokens the
// handler reports in the "used" query parameter; "panic" panics after
// reporting), both limits of algorithm alg.
func tokenRoute(t *testing.T, s store.Store, alg store.Algorithm) (h http.Handler, requests, tokens *Limiter) {
	t.Helper()
	requests = mustNew(t, s, constKey("alice"), store.Limit{Name: "requests", Algorithm: alg, Rate: 100, Period: time.Hour}, Options{Name: "requests", Headers: headers.Options{IETF: true}, DecisionInContext: true})
	base := mustNew(t, s, constKey("alice"), store.Limit{Name: "tokens", Algorithm: alg, Rate: 1000, Period: time.Hour}, Options{Name: "tokens", Headers: headers.Options{IETF: true}, DecisionInContext: true})
	tokens, err := base.WithCost(10)
	if err != nil {
		t.Fatal(err)
	}
	h = requests.Handler(tokens.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		used, _ := strconv.ParseInt(r.URL.Query().Get("used"), 10, 64)
		if err := tokens.ReportCost(r.Context(), used); err != nil {
			t.Errorf("ReportCost: %v", err)
		}
		if cancel, ok := r.Context().Value(cancelKey{}).(context.CancelFunc); ok {
			cancel() // the client goes away while the handler works
		}
		if r.URL.Query().Get("panic") != "" {
			panic(http.ErrAbortHandler)
		}
		w.WriteHeader(http.StatusOK)
	})))
	return h, requests, tokens
}

type cancelKey struct{}

// left returns the units lim has left for alice.
func left(t *testing.T, lim *Limiter) int64 {
	t.Helper()
	d, err := lim.Peek(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	return d.Remaining + d.Cost // Peek reports what is left after its cost
}

// TestReportCostSettles, for every algorithm: the token budget is charged
// what the handler reported, not the estimate, after a normal return, a
// panic and a client that went away; the request budget is charged 1 a
// request throughout; the headers describe both budgets.
func TestReportCostSettles(t *testing.T) {
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) { testReportCostSettles(t, alg) })
	}
}

func testReportCostSettles(t *testing.T, alg store.Algorithm) {
	h, requests, tokens := tokenRoute(t, mustMem(t), alg)
	rec := serveReq(h, httptest.NewRequest(http.MethodGet, "/complete?used=250", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	// The headers describe both budgets: the token budget's legacy
	// fields, and both policies in the IETF lists.
	if got := rec.Header().Get("X-RateLimit-Remaining"); got != "990" {
		t.Errorf("X-RateLimit-Remaining: got %q, want the token budget's 990 (before settlement)", got)
	}
	if got := strings.Join(rec.Header().Values("RateLimit-Policy"), ", "); !strings.Contains(got, `"requests"`) || !strings.Contains(got, `"tokens"`) || strings.Index(got, `"requests"`) > strings.Index(got, `"tokens"`) {
		t.Errorf("RateLimit-Policy: got %q, want the requests policy, then the tokens policy", got)
	}
	if got := rec.Header().Values("RateLimit"); len(got) != 2 || !strings.Contains(got[0], `"requests";r=99`) || !strings.Contains(got[1], `"tokens";r=990`) {
		t.Errorf("RateLimit: got %q, want the requests budget's 99 left, then the tokens budget's 990", got)
	}
	if got := left(t, tokens); got != 750 {
		t.Fatalf("after 250 tokens reported: %d tokens left, want 750", got)
	}
	func() {
		defer func() {
			if p := recover(); p != http.ErrAbortHandler {
				t.Fatalf("recovered %v, want the handler's panic", p)
			}
		}()
		serveReq(h, httptest.NewRequest(http.MethodGet, "/complete?used=40&panic=1", nil))
	}()
	if got := left(t, tokens); got != 710 {
		t.Fatalf("after a handler that panicked having reported 40: %d tokens left, want 710", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gone := httptest.NewRequest(http.MethodGet, "/complete?used=3", nil)
	serveReq(h, gone.WithContext(context.WithValue(ctx, cancelKey{}, cancel)))
	if got := left(t, tokens); got != 707 {
		t.Fatalf("after a client that went away, 3 reported: %d tokens left, want 707", got)
	}
	if got := left(t, requests); got != 97 {
		t.Fatalf("request budget: %d left, want 97", got)
	}
	// Without a report the estimate stands.
	plain := tokens.Handler(okHandler)
	serveReq(plain, httptest.NewRequest(http.MethodGet, "/", nil))
	if got := left(t, tokens); got != 697 {
		t.Fatalf("without a report: %d tokens left, want 697", got)
	}
	// A request the limiter did not admit cannot report.
	if err := tokens.ReportCost(context.Background(), 1); err == nil {
		t.Fatal("ReportCost outside an admitted request: got nil error")
	}
}

// TestReportCostOnRedis, for every algorithm: two instances of a route,
// each with its own limiter and Redis store on one Redis, share the token
// budget: each settles what its handler reported, also after a panic and
// after the client went away (a canceled context would fail a Redis
// call).
func TestReportCostOnRedis(t *testing.T) {
	srv := redistest.Require(t)
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) { testReportCostOnRedis(t, srv.Addr, alg) })
	}
}

func testReportCostOnRedis(t *testing.T, addr string, alg store.Algorithm) {
	prefix := "settle-" + alg.String()
	var routes [2]http.Handler
	var tokens [2]*Limiter
	for i := range routes {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = c.Close() })
		s, err := redisstore.New(c, redisstore.Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		routes[i], _, tokens[i] = tokenRoute(t, s, alg)
	}
	serveReq(routes[0], httptest.NewRequest(http.MethodGet, "/complete?used=250", nil))
	func() {
		defer func() { _ = recover() }()
		serveReq(routes[1], httptest.NewRequest(http.MethodGet, "/complete?used=40&panic=1", nil))
	}()
	ctx, cancel := context.WithCancel(context.Background())
	gone := httptest.NewRequest(http.MethodGet, "/complete?used=3", nil)
	serveReq(routes[0], gone.WithContext(context.WithValue(ctx, cancelKey{}, cancel)))
	for i, lim := range tokens {
		if got := left(t, lim); got != 707 {
			t.Errorf("instance %d: %d tokens left, want 1000-250-40-3 = 707", i, got)
		}
	}
}

// TestAllowAtMost: a handler takes as many items of a batch as its quota
// has room for, then none with a RetryAfter; the refusal is enforced as
// any other.
func TestAllowAtMost(t *testing.T) {
	lim := mustNew(t, mustMem(t), constKey("alice"), store.Limit{Algorithm: store.SlidingWindowLog, Rate: 10, Period: time.Hour})
	ctx := context.Background()
	for _, tc := range []struct{ n, granted int64 }{{4, 4}, {50, 6}} {
		d, err := lim.AllowAtMost(ctx, "bob", tc.n)
		if err != nil || !d.Allowed || d.Granted != tc.granted {
			t.Fatalf("AllowAtMost(%d): got allowed %t granted %d err %v, want %d granted", tc.n, d.Allowed, d.Granted, err, tc.granted)
		}
	}
	d, err := lim.AllowAtMost(ctx, "bob", 3)
	if err != nil || d.Allowed || d.Granted != 0 || d.RetryAfter <= 0 {
		t.Fatalf("full: got allowed %t granted %d retry %v err %v, want a refusal", d.Allowed, d.Granted, d.RetryAfter, err)
	}
	rec := httptest.NewRecorder()
	if lim.Enforce(rec, httptest.NewRequest(http.MethodGet, "/", nil), d) || rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("Enforce: status %d, Retry-After %q, want 429 with one", rec.Code, rec.Header().Get("Retry-After"))
	}
	if _, err := lim.AllowAtMost(ctx, "bob", 0); err == nil {
		t.Fatal("AllowAtMost(0): got nil error")
	}
}

// TestReportCostInAStack: a stack decides all or nothing and settles
// nothing: ReportCost says so, and the estimate stands.
func TestReportCostInAStack(t *testing.T) {
	s := mustMem(t)
	a := mustNew(t, s, constKey("alice"), store.Limit{Name: "a", Algorithm: store.TokenBucket, Rate: 100, Period: time.Hour}, Options{Name: "a"})
	b := mustNew(t, s, constKey("alice"), store.Limit{Name: "b", Algorithm: store.TokenBucket, Rate: 100, Period: time.Hour}, Options{Name: "b"})
	stack, err := NewStack(a, b)
	if err != nil {
		t.Fatal(err)
	}
	var reportErr error
	h := stack(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reportErr = b.ReportCost(r.Context(), 50) }))
	if rec := serveReq(h, httptest.NewRequest(http.MethodGet, "/", nil)); rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	if reportErr == nil {
		t.Error("ReportCost in a stack: got nil error")
	}
	if got := left(t, b); got != 99 {
		t.Errorf("after a stacked request: %d left, want 99", got)
	}
}

// TestReportCostOfAWindowLimit: a window algorithm's decision settles
// only as a reservation (Options.DecisionInContext); a limiter that
// attaches its decision only for its limits function says so at once
// rather than after the handler, and its estimate stands.
func TestReportCostOfAWindowLimit(t *testing.T) {
	l := store.Limit{Algorithm: store.FixedWindow, Rate: 10, Period: time.Hour}
	lim := mustNew(t, mustMem(t), constKey("alice"), l, Options{LimitsFunc: func(*http.Request, string) ([]store.Limit, error) { return []store.Limit{l}, nil }})
	var reportErr error
	h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reportErr = lim.ReportCost(r.Context(), 5) }))
	serveReq(h, httptest.NewRequest(http.MethodGet, "/", nil))
	if reportErr == nil || !strings.Contains(reportErr.Error(), "fixed_window") {
		t.Errorf("ReportCost under a fixed window without DecisionInContext: got %v, want an error naming it", reportErr)
	}
	if got := left(t, lim); got != 9 {
		t.Errorf("after the refused report: %d left, want 9", got)
	}
}
