package middleware

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

func TestExemptionsSendNoHeaders(t *testing.T) {
	st := &recordingStore{decide: func(store.Request) store.Decision { return store.Decision{Capacity: 1, RetryAfter: time.Second} }}
	cidrs, err := ExemptCIDRs(nil, "10.0.0.0/8", "2001:db8::1")
	if err != nil {
		t.Fatal(err)
	}
	obs := &recObserver{}
	l := mustNew(t, st, keyfunc.RemoteIP, store.PerMinute(1), Options{Observer: obs.Observe, Exempt: []func(*http.Request) bool{ExemptPaths("/healthz", "/static/*"), func(r *http.Request) bool { return r.Method == http.MethodOptions }, cidrs}})
	h := l.Handler(okHandler)
	tests := []struct {
		name, method, path, remote string
		exempt                     bool
	}{
		{"health check", "GET", "/healthz", "192.0.2.1:1", true},
		{"static prefix", "GET", "/static/app.js", "192.0.2.1:1", true},
		{"prefix needs the slash", "GET", "/staticx", "192.0.2.1:1", false},
		{"options", "OPTIONS", "/api/ping", "192.0.2.1:1", true},
		{"allow-listed v4", "GET", "/api/ping", "10.2.3.4:1", true},
		{"allow-listed v6 address", "GET", "/api/ping", "[2001:db8::1]:1", true},
		{"ipv4-mapped allow-listed", "GET", "/api/ping", "[::ffff:10.9.9.9]:1", true},
		{"other client limited", "GET", "/api/ping", "192.0.2.1:1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := serveReq(h, request(tt.method, tt.path, tt.remote))
			if tt.exempt {
				if rec.Code != 200 || len(rec.Header().Values("X-Ratelimit-Limit")) != 0 || rec.Header().Get("Retry-After") != "" {
					t.Fatalf("got %d with headers %v, want 200 and no rate-limit headers", rec.Code, rec.Header())
				}
				if o := obs.outcomes(); o[len(o)-1] != limiter.OutcomeExempt {
					t.Errorf("outcome: got %s, want exempt", o[len(o)-1])
				}
			} else if rec.Code != 429 {
				t.Fatalf("status: got %d, want 429", rec.Code)
			}
		})
	}
	if _, err := ExemptCIDRs(nil, "10.0.0.0/33"); err == nil {
		t.Fatal("got nil error for a bad CIDR, want one")
	}
}

// An IPv4-mapped entry is read as the IPv4 one, as client addresses are
// (and as TrustedProxies reads it).
func TestExemptCIDRsMappedEntries(t *testing.T) {
	for _, cidr := range []string{"::ffff:192.0.2.7", "::ffff:192.0.2.0/120", "::ffff:192.0.2.7/128", " 192.0.2.0/24 "} {
		ex, err := ExemptCIDRs(nil, cidr)
		if err != nil {
			t.Fatalf("%q: %v", cidr, err)
		}
		for _, remote := range []string{"192.0.2.7:1000", "[::ffff:192.0.2.7]:1000"} {
			if !ex(request("GET", "/", remote)) {
				t.Errorf("ExemptCIDRs(%q) does not exempt %s", cidr, remote)
			}
		}
		if ex(request("GET", "/", "198.51.100.7:1000")) {
			t.Errorf("ExemptCIDRs(%q) exempts 198.51.100.7", cidr)
		}
	}
}

// With UsePeerOnMalformed a broken chain is keyed by its proxy, but it is
// not exempt for the proxy's address: its client is unknown.
func TestExemptCIDRsBrokenChainNotExempt(t *testing.T) {
	ip, err := keyfunc.NewClientIP(keyfunc.IPOptions{TrustedProxies: []string{"10.0.0.5"}, Header: "X-Real-IP", UsePeerOnMalformed: true})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := ExemptCIDRs(ip, "10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	broken := request("GET", "/", "10.0.0.5:4000")
	broken.Header.Add("X-Real-IP", "junk")        // the client's
	broken.Header.Add("X-Real-IP", "203.0.113.7") // the proxy's, added
	if k, err := ip.Key(broken); err != nil || k != "10.0.0.5" {
		t.Fatalf("key of the broken chain: %q, %v; want the proxy's, 10.0.0.5", k, err)
	}
	if ex(broken) {
		t.Error("a request whose client address cannot be determined is exempt")
	}
	inside := request("GET", "/", "10.0.0.5:4000")
	inside.Header.Set("X-Real-IP", "10.1.2.3")
	outside := request("GET", "/", "10.0.0.5:4000")
	outside.Header.Set("X-Real-IP", "203.0.113.7")
	if !ex(inside) || ex(outside) {
		t.Errorf("through the proxy: 10.1.2.3 exempt %v (want true), 203.0.113.7 exempt %v (want false)", ex(inside), ex(outside))
	}
	// The proxy's own request (no header) is its own client.
	if !ex(request("GET", "/", "10.0.0.5:4000")) {
		t.Error("the proxy's own request is not exempt")
	}
}

func TestDryRunNeverBlocks(t *testing.T) {
	st := &recordingStore{decide: func(store.Request) store.Decision {
		return store.Decision{Allowed: false, Capacity: 5, RetryAfter: 3 * time.Second}
	}}
	obs := &recObserver{}
	l := mustNew(t, st, constKey("k"), store.PerMinute(5), Options{DryRun: true, Observer: obs.Observe})
	rec := do(l.Handler(okHandler))
	if rec.Code != 200 || rec.Body.String() != "ok" {
		t.Fatalf("got %d %q, want the handler's 200 ok", rec.Code, rec.Body.String())
	}
	if rec.Header().Get("X-Ratelimit-Remaining") != "0" || rec.Header().Get("X-Ratelimit-Limit") != "5" {
		t.Errorf("headers: got %v, want the decision's headers", rec.Header())
	}
	if ra := rec.Header().Get("Retry-After"); ra != "" {
		t.Errorf("Retry-After: got %q, want none on a dry-run 200", ra)
	}
	if got := obs.outcomes(); len(got) != 1 || got[0] != limiter.OutcomeDryRun {
		t.Errorf("outcomes: got %v, want [dry_run]", got)
	}
	if st.count() != 1 {
		t.Errorf("store calls: got %d, want 1 (dry-run still records)", st.count())
	}
}

// A cost above the capacity of the limits a limits function gives is
// refused outside dry-run mode; in it the request goes on, reported as
// a dry-run refusal, through the middleware and Allow with Enforce.
func TestDryRunCostAboveCapacity(t *testing.T) {
	for _, dry := range []bool{false, true} {
		st, err := memstore.New(memstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		obs := &recObserver{}
		l := mustNew(t, st, constKey("k"), store.PerMinute(10), Options{DryRun: dry, Observer: obs.Observe,
			LimitsFunc: func(*http.Request, string) ([]store.Limit, error) { return []store.Limit{store.PerMinute(2)}, nil }})
		c5, err := l.WithCost(5)
		if err != nil {
			t.Fatal(err)
		}
		rec := do(c5.Handler(okHandler))
		wantCode, wantOutcome := 429, limiter.OutcomeLimited
		if dry {
			wantCode, wantOutcome = 200, limiter.OutcomeDryRun
		}
		if rec.Code != wantCode || (dry && rec.Body.String() != "ok") {
			t.Errorf("dry run %v: got %d %q, want %d", dry, rec.Code, rec.Body.String(), wantCode)
		}
		if got := obs.outcomes(); len(got) != 1 || got[0] != wantOutcome {
			t.Errorf("dry run %v: outcomes %v, want [%s]", dry, got, wantOutcome)
		}
		// Outside a request the handler saw, the configured limit (10).
		r := request("GET", "/", "192.0.2.1:1")
		d, err := c5.AllowN(r.Context(), "k", 11)
		if !errors.Is(err, store.ErrCostExceedsCapacity) || d.Outcome != wantOutcome {
			t.Errorf("dry run %v: AllowN: %s, %v; want %s and the cost error", dry, d.Outcome, err, wantOutcome)
		}
		w := httptest.NewRecorder()
		if ok := c5.Enforce(w, r, d); ok != dry || (!dry && w.Code != 429) {
			t.Errorf("dry run %v: Enforce: %v (status %d)", dry, ok, w.Code)
		}
	}
}

func TestCosts(t *testing.T) {
	st := &recordingStore{}
	l := mustNew(t, st, constKey("k"), store.Limit{Rate: 10, Period: time.Minute})
	search, err := l.WithCost(5)
	if err != nil {
		t.Fatal(err)
	}
	do(search.Handler(okHandler))
	if got := st.last(t); got.Cost != 5 || got.Key != "default:k" {
		t.Errorf("search request: got cost %d key %q, want 5 and the shared key default:k", got.Cost, got.Key)
	}
	do(l.Handler(okHandler))
	if got := st.last(t); got.Cost != 1 {
		t.Errorf("ping cost: got %d, want 1", got.Cost)
	}
	for _, n := range []int64{0, -1, 11} {
		if _, err := l.WithCost(n); err == nil {
			t.Errorf("WithCost(%d): got nil error, want one", n)
		}
	}
}

func TestLimitsFunc(t *testing.T) {
	st := &recordingStore{}
	plans := map[string]int64{"free": 10, "pro": 1000}
	l := mustNew(t, st, constKey("k"), store.PerMinute(1), Options{LimitsFunc: func(r *http.Request, _ string) ([]store.Limit, error) {
		switch p := r.Header.Get("X-Plan"); p {
		case "":
			return nil, nil // the configured limits
		case "broken":
			return []store.Limit{{Rate: 1}}, nil
		default:
			n, ok := plans[p]
			if !ok {
				return nil, fmt.Errorf("unknown plan")
			}
			return []store.Limit{store.PerMinute(n)}, nil
		}
	}})
	h := l.Handler(okHandler)
	serveReq(h, request("GET", "/", "192.0.2.1:1", "X-Plan", "pro"))
	if got := st.last(t).Limits[0].Rate; got != 1000 {
		t.Errorf("pro plan rate: got %d, want 1000", got)
	}
	serveReq(h, request("GET", "/", "192.0.2.1:1"))
	if got := st.last(t).Limits[0].Rate; got != 1 {
		t.Errorf("no plan: got rate %d, want the configured 1", got)
	}
	for _, plan := range []string{"gold", "broken"} {
		if rec := serveReq(h, request("GET", "/", "192.0.2.1:1", "X-Plan", plan)); rec.Code != 500 {
			t.Errorf("plan %s: got %d, want 500", plan, rec.Code)
		}
	}
}

// Regression: the limits function was not told the tier, so it silently
// replaced every tier's limits, those of anonymous clients included.
func TestLimitsFuncToldTheTier(t *testing.T) {
	st := &recordingStore{}
	var tiers []string
	lim, err := NewTiered(st, AuthOptions{Subject: fakeSubject, Anonymous: keyfunc.RemoteIP}, fourTiers[:2], Options{Logger: quiet, LimitsFunc: func(_ *http.Request, tier string) ([]store.Limit, error) {
		tiers = append(tiers, tier)
		if tier == tierAuthenticated {
			return []store.Limit{store.PerMinute(500)}, nil
		}
		return nil, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := lim.Handler(okHandler)
	serveReq(h, request("GET", "/", "192.0.2.1:1"))
	if got := st.last(t).Limits[0].Rate; got != 10 {
		t.Errorf("anonymous rate: got %d, want its own 10", got)
	}
	serveReq(h, request("GET", "/", "192.0.2.1:1", "Authorization", "Bearer ann-token"))
	if got := st.last(t).Limits[0].Rate; got != 500 {
		t.Errorf("authenticated rate: got %d, want 500 from the function", got)
	}
	if want := []string{tierAnonymous, tierAuthenticated}; fmt.Sprint(tiers) != fmt.Sprint(want) {
		t.Errorf("tiers passed: got %v, want %v", tiers, want)
	}
}

// A limits function that returns the same limits every time costs no
// validation or header formatting per request: each distinct result is
// compiled once.
func TestLimitsFuncCompiledOncePerResult(t *testing.T) {
	var calls atomic.Int64
	lim := mustNew(t, mustMem(t), keyfunc.RemoteIP, store.PerMinute(1), Options{Headers: headers.Options{IETF: true}, LimitsFunc: func(r *http.Request, _ string) ([]store.Limit, error) {
		calls.Add(1)
		n := int64(1000)
		if r.Header.Get("X-Plan") == "pro" {
			n = 5000
		}
		return []store.Limit{{Rate: n, Period: time.Minute}}, nil // a fresh slice each time
	}})
	h := lim.Handler(okHandler)
	for i := range 20 {
		plan := []string{"free", "pro"}[i%2]
		rec := serveReq(h, request("GET", "/", fmt.Sprintf("192.0.2.%d:1", i), "X-Plan", plan))
		want := map[string]string{"free": `"default";q=1000;w=60`, "pro": `"default";q=5000;w=60`}[plan]
		if got := rec.Header().Get("RateLimit-Policy"); got != want {
			t.Fatalf("RateLimit-Policy: got %q, want %q", got, want)
		}
	}
	quietHandler := lim.Handler(nopHandler)
	r := request("GET", "/", "192.0.2.77:1", "X-Plan", "pro")
	w := &nopWriter{h: http.Header{}}
	allocs := testing.AllocsPerRun(100, func() { quietHandler.ServeHTTP(w, r) })
	// The storage key, the request's state and the slice the function
	// returns; compiling would add a dozen.
	if allocs > 3 {
		t.Errorf("allocations per request with a limits function: got %.1f, want <= 3 (no per-request compile)", allocs)
	}
}

func TestDedupIDReachesStore(t *testing.T) {
	st := &recordingStore{}
	l := mustNew(t, st, constKey("k"), store.PerMinute(1), Options{Dedup: func(r *http.Request) string { return r.Header.Get("Idempotency-Key") }})
	serveReq(l.Handler(okHandler), request("POST", "/orders", "192.0.2.1:1", "Idempotency-Key", "abc"))
	if got := st.last(t).DedupID; got != "abc" {
		t.Fatalf("DedupID: got %q, want abc", got)
	}
}

func TestBlockedAndProblemBodies(t *testing.T) {
	now := time.Unix(1767225600, 0)
	blocked := store.Decision{Allowed: false, Blocked: true, Capacity: 5, RetryAfter: 15 * time.Minute, ResetAfter: 15 * time.Minute, LimitID: "minute"}
	st := &recordingStore{decide: func(store.Request) store.Decision { return blocked }}
	obs := &recObserver{}
	l := mustNew(t, st, constKey("k"), store.Limit{Name: "minute", Algorithm: store.SlidingWindowLog, Rate: 5, Period: time.Minute, Block: 15 * time.Minute},
		Options{
			Name:     "login",
			Clock:    func() time.Time { return now },
			Observer: obs.Observe,
			Headers:  headers.Options{Omit: true},
		})
	rec := do(l.Handler(okHandler))
	if rec.Code != 429 {
		t.Fatalf("status: got %d, want 429", rec.Code)
	}
	var b map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		t.Fatal(err)
	}
	if b["error"] != "blocked" || b["message"] != "Too many attempts. Try again in 900 seconds." || b["scope"] != "minute" || b["retry_after"] != 900.0 {
		t.Errorf("body: got %v", b)
	}
	if got := obs.outcomes(); got[0] != limiter.OutcomeBlocked {
		t.Errorf("outcome: got %s, want blocked", got[0])
	}

	st.decide = func(store.Request) store.Decision {
		return store.Decision{Allowed: false, Capacity: 100, RetryAfter: 17 * time.Second}
	}
	pl := mustNew(t, st, constKey("k"), store.PerHour(100), Options{
		Name:           "api",
		ProblemDetails: true,
		Clock:          func() time.Time { return now },
	})
	rec = do(pl.Handler(okHandler))
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type: got %q, want application/problem+json", ct)
	}
	var p struct {
		Type     string   `json:"type"`
		Title    string   `json:"title"`
		Status   int      `json:"status"`
		Detail   string   `json:"detail"`
		Violated []string `json:"violated-policies"`
		Retry    int64    `json:"retry_after"`
		Reset    int64    `json:"reset"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %s: %v", rec.Body.String(), err)
	}
	if p.Type != problemTypeQuotaExceeded || p.Status != 429 || p.Detail != "Too many requests. Try again in 17 seconds." ||
		len(p.Violated) != 1 || p.Violated[0] != "api" || p.Retry != 17 || p.Title == "" || p.Reset != now.Unix()+17 {
		t.Errorf("problem: got %+v", p)
	}
}

func TestProblemBodyNamesViolatedItem(t *testing.T) {
	lim := mustNew(t, mustMem(t), constKey("k"), store.Limit{Name: "burst", Algorithm: store.FixedWindow, Rate: 5, Period: time.Minute},
		Options{
			ProblemDetails: true,
			Headers:        headers.Options{IETF: true},
			Limits:         []store.Limit{store.Limit{Name: "hourly", Algorithm: store.FixedWindow, Rate: 1, Period: time.Hour}},
		})
	h := lim.Handler(okHandler)
	do(h)
	rec := do(h)
	var p struct {
		Violated []string `json:"violated-policies"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Violated) != 1 || p.Violated[0] != "hourly" {
		t.Fatalf("violated-policies: got %v, want [hourly], the RateLimit-Policy item that refused", p.Violated)
	}
}

func TestBlockedBodyIsValidJSONForAnyScope(t *testing.T) {
	s := &funcStore{take: func(context.Context, store.Request) (store.Decision, error) {
		return store.Decision{Blocked: true, Capacity: 1, RetryAfter: time.Second, LimitID: "m\xff\"é"}, nil
	}}
	rec := do(mustNew(t, s, constKey("k"), store.PerMinute(1)).Handler(okHandler))
	if !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("body is not valid JSON: %q", rec.Body.String())
	}
}

// A cost no limit can hold answers 429 with error cost_exceeds_limit: the
// X-RateLimit-* state of the limits, but no Retry-After, since no wait can
// admit it.
func TestCostExceedsCapacity(t *testing.T) {
	for _, problem := range []bool{false, true} {
		t.Run(fmt.Sprint("problem=", problem), func(t *testing.T) {
			o := Options{LimitsFunc: func(*http.Request, string) ([]store.Limit, error) {
				return []store.Limit{store.PerMinute(3)}, nil // below the route's cost
			}, ProblemDetails: problem}
			base := mustNew(t, mustMem(t), constKey("k"), store.PerMinute(10), o)
			bulk, err := base.WithCost(9)
			if err != nil {
				t.Fatal(err)
			}
			rec := do(bulk.Handler(okHandler))
			if rec.Code != 429 || rec.Header().Get("Retry-After") != "" {
				t.Fatalf("got %d with Retry-After %q, want 429 without Retry-After", rec.Code, rec.Header().Get("Retry-After"))
			}
			for k, want := range map[string]string{"X-Ratelimit-Limit": "3", "X-Ratelimit-Remaining": "3"} {
				if got := rec.Header().Get(k); got != want {
					t.Errorf("%s: got %q, want %q", k, got, want)
				}
			}
			if rec.Header().Get("X-Ratelimit-Reset") == "" {
				t.Error("X-RateLimit-Reset missing")
			}
			var b map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b["error"] != "cost_exceeds_limit" || b["cost"] != 9.0 || b["limit"] != 3.0 {
				t.Fatalf("body: got %s, %v", rec.Body.String(), err)
			}
			wantCT := map[bool]string{false: "application/json", true: "application/problem+json"}[problem]
			if ct := rec.Header().Get("Content-Type"); ct != wantCT || !strings.Contains(rec.Body.String(), `"policy":"default"`) {
				t.Errorf("Content-Type %q body %s, want %s naming the policy", ct, rec.Body.String(), wantCT)
			}
		})
	}
}
