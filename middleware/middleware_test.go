package middleware

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
)

func TestNewValidates(t *testing.T) {
	s := &funcStore{take: func(context.Context, store.Request) (store.Decision, error) { return store.Decision{}, nil }}
	k := constKey("k")
	l := store.PerMinute(10)
	tests := []struct {
		name  string
		s     store.Store
		k     keyfunc.KeyFunc
		l     store.Limit
		o     Options
		field string
	}{
		{"nil store", nil, k, l, Options{}, "nil store"},
		{"zero rate", s, k, store.Limit{Period: time.Second}, Options{}, "Rate"},
		{"zero period", s, k, store.Limit{Rate: 1}, Options{}, "Period"},
		{"bad algorithm", s, k, store.Limit{Algorithm: 77, Rate: 1, Period: time.Second}, Options{}, "Algorithm"},
		{"long name", s, k, l, Options{Name: strings.Repeat("a", 65)}, "Options.Name"},
		{"name with colon", s, k, l, Options{Name: "a:b"}, "Options.Name"},
		{"mixed algorithms", s, k, l, Options{Limits: []store.Limit{{Algorithm: store.FixedWindow, Rate: 1, Period: time.Hour}}}, "one algorithm"},
		{"nil exemption", s, k, l, Options{Exempt: []func(*http.Request) bool{nil}}, "Options.Exempt[0]"},
		{"breaker threshold too large", s, k, l, Options{BreakerThreshold: 1<<30 + 1}, "Options.BreakerThreshold"},
		{"negative breaker cooldown", s, k, l, Options{BreakerThreshold: 3, BreakerCooldown: -time.Second}, "Options.BreakerCooldown"},
		{"unknown failure mode", s, k, l, Options{FailureMode: 9}, "Options.FailureMode"},
		{"store for LimitByIP", s, k, l, Options{Store: s}, "Options.Store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.s, tt.k, tt.l, tt.o)
			if err == nil {
				t.Fatalf("got nil error, want one mentioning %q", tt.field)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("got %q, want it to mention %q", err, tt.field)
			}
		})
	}
}

func TestAllowedSetsHeaders(t *testing.T) {
	now := time.Unix(1767225600, 0)
	var got store.Request
	s := &funcStore{take: func(_ context.Context, req store.Request) (store.Decision, error) {
		got = req
		return store.Decision{Allowed: true, Capacity: 10, Remaining: 9, ResetAfter: 6 * time.Second}, nil
	}}
	lim := mustNew(t, s, constKey("203.0.113.7"), store.PerMinute(10), Options{Name: "api", Clock: func() time.Time { return now }})
	rec := do(lim.Handler(okHandler))
	if rec.Code != http.StatusOK {
		t.Fatalf("status: got %d, want 200", rec.Code)
	}
	want := map[string]string{"X-Ratelimit-Limit": "10", "X-Ratelimit-Remaining": "9", "X-Ratelimit-Reset": "1767225606", "Retry-After": ""}
	for k, v := range want {
		if g := rec.Header().Get(k); g != v {
			t.Errorf("%s: got %q, want %q", k, g, v)
		}
	}
	if got.Key != "api:203.0.113.7" {
		t.Errorf("store key: got %q, want %q", got.Key, "api:203.0.113.7")
	}
	if got.Cost != 1 || len(got.Limits) != 1 {
		t.Errorf("request: got cost %d and %d limits, want 1 and 1", got.Cost, len(got.Limits))
	}
}

type limitedBody struct {
	Error      string `json:"error"`
	Message    string `json:"message"`
	RetryAfter int64  `json:"retry_after"`
	Limit      int64  `json:"limit"`
	Remaining  int64  `json:"remaining"`
	Reset      int64  `json:"reset"`
	Policy     string `json:"policy"`
}

func TestLimitedResponse(t *testing.T) {
	now := time.Unix(1767225600, 0)
	tests := []struct {
		retry   time.Duration
		secs    int64
		message string
	}{
		{16*time.Second + 200*time.Millisecond, 17, "Too many requests. Try again in 17 seconds."},
		{300 * time.Millisecond, 1, "Too many requests. Try again in 1 second."},
		{2 * time.Hour, 7200, "Too many requests. Try again in 7200 seconds."},
	}
	for _, tt := range tests {
		t.Run(tt.retry.String(), func(t *testing.T) {
			s := &funcStore{take: func(context.Context, store.Request) (store.Decision, error) {
				return store.Decision{Allowed: false, Capacity: 100, Remaining: 0, ResetAfter: 3 * time.Hour, RetryAfter: tt.retry}, nil
			}}
			called := false
			next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })
			lim := mustNew(t, s, constKey("k"), store.PerHour(100), Options{Name: "api", Clock: func() time.Time { return now }})
			rec := do(lim.Handler(next))
			if called {
				t.Fatal("next was called for a limited request")
			}
			if rec.Code != http.StatusTooManyRequests {
				t.Fatalf("status: got %d, want 429", rec.Code)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type: got %q, want application/json", ct)
			}
			if ra := rec.Header().Get("Retry-After"); ra != fmt.Sprint(tt.secs) {
				t.Errorf("Retry-After: got %q, want %d", ra, tt.secs)
			}
			var b limitedBody
			dec := json.NewDecoder(rec.Body)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&b); err != nil {
				t.Fatalf("body: %v", err)
			}
			want := limitedBody{"rate_limit_exceeded", tt.message, tt.secs, 100, 0, now.Unix() + tt.secs, "api"}
			if b != want {
				t.Errorf("body: got %+v, want %+v", b, want)
			}
			if rs := rec.Header().Get("X-Ratelimit-Reset"); rs != fmt.Sprint(want.Reset) {
				t.Errorf("X-RateLimit-Reset: got %s, want %d (the retry instant)", rs, want.Reset)
			}
		})
	}
}

func TestStoreFailureModes(t *testing.T) {
	secret := "dial tcp 10.0.0.5:6379: connection refused"
	failing := func() *funcStore {
		return &funcStore{take: func(context.Context, store.Request) (store.Decision, error) {
			return store.Decision{}, &store.BackendError{Op: "take", Kind: "connection", Err: errors.New(secret)}
		}}
	}
	t.Run("fail open", func(t *testing.T) {
		lim := mustNew(t, failing(), constKey("k"), store.PerMinute(1))
		rec := do(lim.Handler(okHandler))
		if rec.Code != http.StatusOK || rec.Body.String() != "ok" {
			t.Fatalf("got %d %q, want 200 ok", rec.Code, rec.Body.String())
		}
		if h := rec.Header().Get("X-Ratelimit-Limit"); h != "" {
			t.Errorf("X-RateLimit-Limit: got %q, want none on fail-open", h)
		}
	})
	t.Run("fail closed", func(t *testing.T) {
		called := false
		lim := mustNew(t, failing(), constKey("k"), store.PerMinute(1), Options{FailureMode: limiter.FailClosed})
		rec := do(lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })))
		if called {
			t.Fatal("next was called in fail-closed mode")
		}
		if rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("status: got %d, want 503", rec.Code)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type: got %q, want application/json", ct)
		}
		var b map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
			t.Fatalf("body is not JSON: %v", err)
		}
		if b["error"] != "rate_limiter_unavailable" {
			t.Errorf("error: got %v, want rate_limiter_unavailable", b["error"])
		}
		if strings.Contains(rec.Body.String(), "10.0.0.5") || strings.Contains(rec.Body.String(), "refused") {
			t.Errorf("body leaks the store error: %s", rec.Body.String())
		}
		if rec.Header().Get("Retry-After") == "" {
			t.Error("Retry-After missing on 503")
		}
	})
}

// The store's own budget (the Redis store's Options.Timeout) bounds a
// decision, and the request's deadline bounds it too; the middleware adds
// no deadline of its own, so there is one budget, in one place.
func TestHangingStoreBoundedByRequestDeadline(t *testing.T) {
	s := &funcStore{take: func(ctx context.Context, _ store.Request) (store.Decision, error) {
		<-ctx.Done() // a store that honours its context but never answers
		return store.Decision{}, &store.BackendError{Op: "take", Kind: "timeout", Err: ctx.Err()}
	}}
	for _, mode := range []limiter.FailureMode{limiter.FailOpen, limiter.FailClosed} {
		t.Run(map[limiter.FailureMode]string{limiter.FailOpen: "fail_open", limiter.FailClosed: "fail_closed"}[mode], func(t *testing.T) {
			budget := 20 * time.Millisecond
			lim := mustNew(t, s, constKey("k"), store.PerMinute(1), Options{
				FailureMode:      mode,
				BreakerThreshold: -1,
				BreakerCooldown:  0,
			})
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			defer cancel()
			start := time.Now()
			rec := serveReq(lim.Handler(okHandler), httptest.NewRequest("GET", "/", nil).WithContext(ctx))
			if el := time.Since(start); el > budget+200*time.Millisecond {
				t.Errorf("request took %s, want about the %s deadline", el, budget)
			}
			want := map[limiter.FailureMode]int{limiter.FailOpen: 200, limiter.FailClosed: 503}[mode]
			if rec.Code != want {
				t.Errorf("status: got %d, want %d", rec.Code, want)
			}
		})
	}
}

// Regression: the middleware put its own 50ms deadline on every store
// call, so a larger store budget (the Redis store's Options.Timeout) was
// cut short, and the middleware's WithTimeout(500ms) had no effect under
// the store's 50ms. The store must receive the request's context as it is.
func TestStoreGetsTheRequestContextWithoutDeadline(t *testing.T) {
	type mark struct{}
	var sawDeadline, sawValue bool
	s := &funcStore{take: func(ctx context.Context, _ store.Request) (store.Decision, error) {
		_, sawDeadline = ctx.Deadline()
		sawValue = ctx.Value(mark{}) == "trace-1"
		return store.Decision{Allowed: true, Capacity: 1}, nil
	}}
	lim := mustNew(t, s, constKey("k"), store.PerMinute(1))
	r := httptest.NewRequest("GET", "/", nil)
	r = r.WithContext(context.WithValue(r.Context(), mark{}, "trace-1"))
	serveReq(lim.Handler(okHandler), r)
	if sawDeadline {
		t.Error("the store call had a deadline the request did not have")
	}
	if !sawValue {
		t.Error("the store call did not get the request's context values")
	}
}

func TestBreakerSkipsDeadStoreAndProbes(t *testing.T) {
	var healthy atomic.Bool
	s := &funcStore{take: func(context.Context, store.Request) (store.Decision, error) {
		if healthy.Load() {
			return store.Decision{Allowed: true, Capacity: 1, Remaining: 1}, nil
		}
		return store.Decision{}, &store.BackendError{Op: "take", Kind: "connection", Err: errors.New("down")}
	}}
	clock := time.Unix(1000, 0)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	lim := mustNew(t, s, constKey("k"), store.PerMinute(100), Options{
		BreakerThreshold: 3,
		BreakerCooldown:  time.Second,
		Clock:            now,
	})
	h := lim.Handler(okHandler)
	for range 10 {
		do(h)
	}
	if got := s.calls.Load(); got != 3 {
		t.Fatalf("store calls while down: got %d, want 3 (breaker opens after 3 failures)", got)
	}
	mu.Lock()
	clock = clock.Add(1500 * time.Millisecond)
	mu.Unlock()
	healthy.Store(true)
	rec := do(h)
	if rec.Header().Get("X-Ratelimit-Limit") != "1" {
		t.Fatalf("probe after cooldown did not reach the store: headers %v", rec.Header())
	}
	for range 5 {
		do(h)
	}
	if got := s.calls.Load(); got != 3+1+5 {
		t.Fatalf("store calls after recovery: got %d, want 9", got)
	}
}

func TestKeyErrors(t *testing.T) {
	s := &funcStore{take: func(context.Context, store.Request) (store.Decision, error) {
		return store.Decision{Allowed: true, Capacity: 1, Remaining: 0}, nil
	}}
	noID := func(*http.Request) (string, error) { return "", fmt.Errorf("no token: %w", keyfunc.ErrNoIdentity) }
	bad := func(*http.Request) (string, error) { return "", errors.New("malformed forwarded chain") }
	empty := func(*http.Request) (string, error) { return "", nil }
	tests := []struct {
		name string
		k    keyfunc.KeyFunc
		o    Options
		code int
	}{
		{"no identity gives 401", noID, Options{}, 401},
		{"malformed gives 400", bad, Options{}, 400},
		{"empty identity is refused", empty, Options{}, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := do(mustNew(t, s, tt.k, store.PerMinute(1), tt.o).Handler(okHandler))
			if rec.Code != tt.code {
				t.Fatalf("status: got %d, want %d", rec.Code, tt.code)
			}
			if tt.code != 200 && rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type: got %q, want application/json", rec.Header().Get("Content-Type"))
			}
		})
	}
}

func TestDeniedHandler(t *testing.T) {
	s := &funcStore{take: func(context.Context, store.Request) (store.Decision, error) {
		return store.Decision{Allowed: false, Capacity: 1, RetryAfter: time.Second}, nil
	}}
	var got limiter.Decision
	lim := mustNew(t, s, constKey("k"), store.PerMinute(1), Options{Name: "api", DeniedHandler: func(w http.ResponseWriter, r *http.Request, d limiter.Decision) {
		got = d
		w.WriteHeader(http.StatusTeapot)
	}})
	rec := do(lim.Handler(okHandler))
	if rec.Code != http.StatusTeapot {
		t.Fatalf("status: got %d, want 418", rec.Code)
	}
	if rec.Header().Get("Retry-After") != "1" {
		t.Errorf("Retry-After: got %q, want 1 (headers are set before the custom handler)", rec.Header().Get("Retry-After"))
	}
	if got.Policy != "api" || got.RetryAfter != time.Second {
		t.Errorf("decision: got policy %q retry %s, want api and 1s", got.Policy, got.RetryAfter)
	}
}

func TestHandlerPanicsAtSetup(t *testing.T) {
	tests := []struct {
		name string
		key  keyfunc.KeyFunc
		next http.Handler
	}{
		{"nil next", constKey("k"), nil},
		{"no key function", nil, okHandler},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := mustNew(t, &funcStore{}, tt.key, store.PerMinute(1))
			defer func() {
				if recover() == nil {
					t.Fatal("got no panic, want one at setup")
				}
			}()
			lim.Handler(tt.next)
		})
	}
}

// TestAppendPlainJSONString: printable ASCII without quotes or
// backslashes (policy names and tiers) is written as it is, anything else
// as encoding/json writes it; every
// result decodes to the string it was made from.
func TestAppendPlainJSONString(t *testing.T) {
	for _, s := range []string{"default", "api/authenticated", "a.b-c_D9", "", `say "hi"`, `back\slash`, "tab\there", "naïve", "<&>", "\x7f"} {
		got := appendPlainJSONString([]byte("x"), s)
		var back string
		if err := json.Unmarshal(got[1:], &back); err != nil || back != s {
			t.Fatalf("appendPlainJSONString(%q): got %s, which decodes to %q (%v), want %q", s, got[1:], back, err, s)
		}
		want, _ := json.Marshal(s)
		if plain := !strings.ContainsAny(s, "\"\\") && strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r >= 0x80 }) < 0; plain && string(got[1:]) != `"`+s+`"` {
			t.Fatalf("appendPlainJSONString(%q): got %s, want %q as it is", s, got[1:], s)
		} else if !plain && string(got[1:]) != string(want) {
			t.Fatalf("appendPlainJSONString(%q): got %s, want %s as encoding/json writes it", s, got[1:], want)
		}
	}
}
