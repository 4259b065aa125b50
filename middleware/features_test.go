package middleware

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
)

// recordingStore records the requests it sees and answers with decide.
type recordingStore struct {
	mu     sync.Mutex
	reqs   []store.Request
	decide func(store.Request) store.Decision
}

func (s *recordingStore) Take(_ context.Context, req store.Request) (store.Decision, error) {
	if err := req.Validate(); err != nil {
		return store.Decision{}, err
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	if s.decide == nil {
		return store.Decision{Allowed: true, Limit: req.Limits[0].Capacity(), Remaining: 1}, nil
	}
	return s.decide(req), nil
}
func (s *recordingStore) Peek(ctx context.Context, req store.Request) (store.Decision, error) {
	return s.Take(ctx, req)
}
func (s *recordingStore) Reset(context.Context, store.Request) error { return nil }

func (s *recordingStore) last(t *testing.T) store.Request {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatal("store was not called")
	}
	return s.reqs[len(s.reqs)-1]
}

type recObserver struct {
	mu     sync.Mutex
	events []Event
}

func (o *recObserver) Observe(e Event) { o.mu.Lock(); o.events = append(o.events, e); o.mu.Unlock() }
func (o *recObserver) outcomes() []Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []Outcome
	for _, e := range o.events {
		out = append(out, e.Outcome)
	}
	return out
}

func request(method, path, remote string, hdr ...string) *http.Request {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	return r
}

func serveReq(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func TestTiersAndFallback(t *testing.T) {
	st := &recordingStore{}
	subject := func(r *http.Request) (string, error) {
		switch r.Header.Get("Authorization") {
		case "":
			return "", keyfunc.ErrNoToken
		case "Bearer good":
			return "sub:alice", nil
		case "Bearer vip":
			return "sub:vip", nil
		case "Bearer banned":
			return "sub:mallory", nil
		}
		return "", keyfunc.ErrInvalidToken
	}
	tiers := []Tier{
		{Name: TierAnonymous, Limits: []store.Limit{store.PerMinute(10)}},
		{Name: TierAuthenticated, Limits: []store.Limit{store.PerMinute(100)}},
		{Name: TierTrusted, Unlimited: true},
		{Name: TierSuspended, Suspended: true},
	}
	mk := func(rejectInvalid bool) http.Handler {
		c, err := AuthClassifier(AuthOptions{Subject: subject, Anonymous: keyfunc.RemoteIP, RejectInvalid: rejectInvalid,
			Trusted:   func(s string, _ *http.Request) bool { return s == "sub:vip" },
			Suspended: func(s string, _ *http.Request) bool { return s == "sub:mallory" }})
		if err != nil {
			t.Fatal(err)
		}
		l, err := NewTiered(st, c, tiers, WithName("api"), WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		return l.Handler(okHandler)
	}
	lenient, strict := mk(false), mk(true)
	tests := []struct {
		name     string
		h        http.Handler
		auth     string
		code     int
		key      string // expected store key, "" = store not called
		rate     int64
		headers  bool
		errorVal string
	}{
		{"anonymous by ip", lenient, "", 200, "api/anonymous:192.0.2.1", 10, true, ""},
		{"authenticated by subject", lenient, "Bearer good", 200, "api/authenticated:sub:alice", 100, true, ""},
		{"invalid token falls back to anonymous", lenient, "Bearer forged", 200, "api/anonymous:192.0.2.1", 10, true, ""},
		{"invalid token rejected when configured", strict, "Bearer forged", 401, "", 0, false, "unauthorized"},
		{"missing token is anonymous even when strict", strict, "", 200, "api/anonymous:192.0.2.1", 10, true, ""},
		{"trusted is unlimited", lenient, "Bearer vip", 200, "", 0, false, ""},
		{"suspended is refused", lenient, "Bearer banned", 403, "", 0, false, "suspended"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st.mu.Lock()
			st.reqs = nil
			st.mu.Unlock()
			var hdr []string
			if tt.auth != "" {
				hdr = []string{"Authorization", tt.auth}
			}
			rec := serveReq(tt.h, request("GET", "/api/ping", "192.0.2.1:4711", hdr...))
			if rec.Code != tt.code {
				t.Fatalf("status: got %d, want %d", rec.Code, tt.code)
			}
			if tt.key != "" {
				req := st.last(t)
				if req.Key != tt.key || req.Limits[0].Rate != tt.rate {
					t.Errorf("store request: got key %q rate %d, want %q %d", req.Key, req.Limits[0].Rate, tt.key, tt.rate)
				}
			} else if len(st.reqs) != 0 {
				t.Errorf("store called %d times, want 0", len(st.reqs))
			}
			if got := rec.Header().Get("X-Ratelimit-Limit") != ""; got != tt.headers {
				t.Errorf("rate-limit headers present: got %v, want %v", got, tt.headers)
			}
			if tt.errorVal != "" {
				var b map[string]any
				if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b["error"] != tt.errorVal {
					t.Errorf("body: got %s, want error %q", rec.Body.String(), tt.errorVal)
				}
			}
		})
	}
}

func TestNewTieredValidates(t *testing.T) {
	st := &recordingStore{}
	c := func(*http.Request) (string, string, error) { return "a", "k", nil }
	ok := []store.Limit{store.PerMinute(1)}
	tests := []struct {
		name  string
		c     Classifier
		tiers []Tier
		opts  []Option
		want  string
	}{
		{"nil classifier", nil, []Tier{{Name: "a", Limits: ok}}, nil, "nil classifier"},
		{"no tiers", c, nil, nil, "no tiers"},
		{"bad tier name", c, []Tier{{Name: "a b", Limits: ok}}, nil, "tier 0 name"},
		{"duplicate tier", c, []Tier{{Name: "a", Limits: ok}, {Name: "a", Limits: ok}}, nil, "configured twice"},
		{"tier without limits", c, []Tier{{Name: "a"}}, nil, "no Limits"},
		{"unlimited and suspended", c, []Tier{{Name: "a", Unlimited: true, Suspended: true}}, nil, "both"},
		{"invalid tier limit", c, []Tier{{Name: "a", Limits: []store.Limit{{Rate: 1}}}}, nil, "Period"},
		{"cost too high for a tier", c, []Tier{{Name: "a", Limits: ok}}, []Option{WithCost(2)}, "cost 2"},
		{"WithLimits refused", c, []Tier{{Name: "a", Limits: ok}}, []Option{WithLimits(store.PerHour(5))}, "WithLimits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewTiered(st, tt.c, tt.tiers, tt.opts...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

func TestUnknownTierIs500(t *testing.T) {
	st := &recordingStore{}
	l, err := NewTiered(st, func(*http.Request) (string, string, error) { return "gold", "k", nil },
		[]Tier{{Name: "silver", Limits: []store.Limit{store.PerMinute(1)}}}, WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	if rec := serveReq(l.Handler(okHandler), request("GET", "/", "192.0.2.1:1")); rec.Code != 500 {
		t.Fatalf("status: got %d, want 500", rec.Code)
	}
}

func TestExemptionsSendNoHeaders(t *testing.T) {
	st := &recordingStore{decide: func(store.Request) store.Decision { return store.Decision{Limit: 1, RetryAfter: time.Second} }}
	cidrs, err := ExemptCIDRs(nil, "10.0.0.0/8", "2001:db8::1")
	if err != nil {
		t.Fatal(err)
	}
	obs := &recObserver{}
	l := mustNew(t, st, keyfunc.RemoteIP, store.PerMinute(1), WithObserver(obs),
		WithExempt(ExemptPaths("/healthz", "/static/*")), WithExempt(ExemptMethods("options")), WithExempt(cidrs))
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
				if o := obs.outcomes(); o[len(o)-1] != OutcomeExempt {
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

func TestDryRunNeverBlocks(t *testing.T) {
	st := &recordingStore{decide: func(store.Request) store.Decision {
		return store.Decision{Allowed: false, Limit: 5, RetryAfter: 3 * time.Second}
	}}
	obs := &recObserver{}
	l := mustNew(t, st, constKey("k"), store.PerMinute(5), WithDryRun(), WithObserver(obs))
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
	if got := obs.outcomes(); len(got) != 1 || got[0] != OutcomeDryRun {
		t.Errorf("outcomes: got %v, want [dry_run]", got)
	}
	if len(st.reqs) != 1 {
		t.Errorf("store calls: got %d, want 1 (dry-run still records)", len(st.reqs))
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

	costOf := func(r *http.Request) (int64, error) {
		switch r.URL.Query().Get("n") {
		case "bad":
			return 0, errors.New("unparsable")
		case "0":
			return 0, nil
		case "50":
			return 50, nil
		}
		return 3, nil
	}
	cl := mustNew(t, st, constKey("k"), store.Limit{Rate: 10, Period: time.Minute}, WithCostFunc(costOf))
	tests := []struct {
		q    string
		code int
		err  string
	}{
		{"", 200, ""},
		{"0", 500, "internal_error"},
		{"bad", 500, "internal_error"},
		{"50", 429, "cost_exceeds_limit"},
	}
	for _, tt := range tests {
		t.Run("cost func n="+tt.q, func(t *testing.T) {
			rec := serveReq(cl.Handler(okHandler), request("GET", "/bulk?n="+tt.q, "192.0.2.1:1"))
			if rec.Code != tt.code {
				t.Fatalf("status: got %d, want %d", rec.Code, tt.code)
			}
			if tt.err != "" {
				var b map[string]any
				if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b["error"] != tt.err {
					t.Fatalf("body: got %s, want error %q", rec.Body.String(), tt.err)
				}
				if rec.Header().Get("Retry-After") != "" {
					t.Errorf("Retry-After: got %q, want none (waiting cannot help)", rec.Header().Get("Retry-After"))
				}
			}
		})
	}
}

func TestLimitsFunc(t *testing.T) {
	st := &recordingStore{}
	plans := map[string]int64{"free": 10, "pro": 1000}
	l := mustNew(t, st, constKey("k"), store.PerMinute(1), WithLimitsFunc(func(r *http.Request) ([]store.Limit, error) {
		n, ok := plans[r.Header.Get("X-Plan")]
		if !ok {
			return nil, fmt.Errorf("unknown plan")
		}
		return []store.Limit{store.PerMinute(n)}, nil
	}))
	h := l.Handler(okHandler)
	serveReq(h, request("GET", "/", "192.0.2.1:1", "X-Plan", "pro"))
	if got := st.last(t).Limits[0].Rate; got != 1000 {
		t.Errorf("pro plan rate: got %d, want 1000", got)
	}
	if rec := serveReq(h, request("GET", "/", "192.0.2.1:1", "X-Plan", "gold")); rec.Code != 500 {
		t.Errorf("unknown plan: got %d, want 500", rec.Code)
	}
}

func TestDedupIDReachesStore(t *testing.T) {
	st := &recordingStore{}
	l := mustNew(t, st, constKey("k"), store.PerMinute(1), WithDedup(func(r *http.Request) string { return r.Header.Get("Idempotency-Key") }))
	serveReq(l.Handler(okHandler), request("POST", "/orders", "192.0.2.1:1", "Idempotency-Key", "abc"))
	if got := st.last(t).DedupID; got != "abc" {
		t.Fatalf("DedupID: got %q, want abc", got)
	}
}

func TestBlockedAndProblemBodies(t *testing.T) {
	now := time.Unix(1767225600, 0)
	blocked := store.Decision{Allowed: false, Blocked: true, Limit: 5, RetryAfter: 15 * time.Minute, ResetAfter: 15 * time.Minute, LimitID: "minute"}
	st := &recordingStore{decide: func(store.Request) store.Decision { return blocked }}
	obs := &recObserver{}
	l := mustNew(t, st, constKey("k"), store.Limit{Name: "minute", Algorithm: store.SlidingWindowLog, Rate: 5, Period: time.Minute, Block: 15 * time.Minute},
		WithName("login"), WithClock(func() time.Time { return now }), WithObserver(obs), WithHeaders(headers.Writer{Omit: true}))
	rec := do(l.Handler(okHandler))
	if rec.Code != 429 {
		t.Fatalf("status: got %d, want 429", rec.Code)
	}
	if len(rec.Header().Values("Retry-After")) != 0 || len(rec.Header().Values("X-Ratelimit-Limit")) != 0 {
		t.Errorf("headers: got %v, want none (Omit)", rec.Header())
	}
	var b map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		t.Fatal(err)
	}
	if b["error"] != "blocked" || b["message"] != "Too many attempts. Try again in 900 seconds." || b["scope"] != "minute" || b["retry_after"] != 900.0 {
		t.Errorf("body: got %v", b)
	}
	if got := obs.outcomes(); got[0] != OutcomeBlocked {
		t.Errorf("outcome: got %s, want blocked", got[0])
	}

	st.decide = func(store.Request) store.Decision {
		return store.Decision{Allowed: false, Limit: 100, RetryAfter: 17 * time.Second}
	}
	pl := mustNew(t, st, constKey("k"), store.PerHour(100), WithName("api"), WithBody(BodyProblem), WithClock(func() time.Time { return now }))
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
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %s: %v", rec.Body.String(), err)
	}
	if p.Type != ProblemTypeQuotaExceeded || p.Status != 429 || p.Detail != "Too many requests. Try again in 17 seconds." ||
		len(p.Violated) != 1 || p.Violated[0] != "api" || p.Retry != 17 || p.Title == "" {
		t.Errorf("problem: got %+v", p)
	}
}
