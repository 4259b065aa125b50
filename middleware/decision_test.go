package middleware

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
)

// A handler limits by an identity it finds only in the body, with the same
// headers and 429 the middleware writes.
func TestAllowFromHandler(t *testing.T) {
	obs := &recObserver{}
	verify := mustNew(t, mustMem(t), nil, store.Limit{Rate: 2, Period: time.Hour}, Options{Name: "verify", Observer: obs.Observe})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		email, _ := io.ReadAll(r.Body)
		d, err := verify.Allow(r.Context(), string(email))
		if err != nil {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		if !verify.Enforce(w, r, d) {
			return
		}
		_, _ = io.WriteString(w, "sent")
	})
	send := func(email string) *http.Response {
		r := request("POST", "/verify", "192.0.2.1:1")
		r.Body = io.NopCloser(strings.NewReader(email))
		return serveReq(h, r).Result()
	}
	for i, want := range []string{"1", "0"} {
		res := send("ann@example.com")
		if res.StatusCode != 200 || res.Header.Get("X-Ratelimit-Remaining") != want || res.Header.Get("X-Ratelimit-Limit") != "2" {
			t.Fatalf("request %d: got %d remaining %q, want 200 and %s", i+1, res.StatusCode, res.Header.Get("X-Ratelimit-Remaining"), want)
		}
	}
	res := send("ann@example.com")
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "1800" {
		t.Fatalf("third request: got %d Retry-After %q, want 429 and 1800", res.StatusCode, res.Header.Get("Retry-After"))
	}
	var b map[string]any
	if err := json.NewDecoder(res.Body).Decode(&b); err != nil || b["error"] != "rate_limit_exceeded" || b["policy"] != "verify" || b["retry_after"] != 1800.0 {
		t.Fatalf("body: got %v (%v)", b, err)
	}
	if res := send("bob@example.com"); res.StatusCode != 200 {
		t.Errorf("another address: got %d, want 200", res.StatusCode)
	}
	if got := obs.outcomes(); len(got) != 4 || got[2] != limiter.OutcomeLimited {
		t.Errorf("observed outcomes: got %v, want four with the third limited", got)
	}
}

// The same identity shares counters between the middleware and Allow.
func TestAllowSharesCountersWithTheMiddleware(t *testing.T) {
	lim := mustNew(t, mustMem(t), keyfunc.RemoteIP, store.PerMinute(10))
	serveReq(lim.Handler(okHandler), request("GET", "/", "192.0.2.7:1"))
	d, err := lim.AllowN(context.Background(), "192.0.2.7", 3)
	if err != nil || !d.Allowed || d.Remaining != 6 {
		t.Fatalf("got allowed %v remaining %d (%v), want 6 left after 1 + 3", d.Allowed, d.Remaining, err)
	}
	// A peek answers as Allow would: 5 would be left after one more unit.
	p, err := lim.Peek(context.Background(), "192.0.2.7")
	if err != nil || !p.Allowed || p.Remaining != 5 {
		t.Fatalf("peek: got allowed %v remaining %d (%v), want 5", p.Allowed, p.Remaining, err)
	}
	p, _ = lim.Peek(context.Background(), "192.0.2.7")
	if p.Remaining != 5 {
		t.Fatalf("second peek: got remaining %d, want 5 (peeks record nothing)", p.Remaining)
	}
}

func TestAllowErrors(t *testing.T) {
	ctx := context.Background()
	lim := mustNew(t, mustMem(t), nil, store.PerMinute(5))
	if _, err := lim.AllowN(ctx, "x", 0); err == nil {
		t.Error("AllowN(0): got nil error, want one")
	}
	if _, err := lim.Allow(ctx, ""); err == nil {
		t.Error("empty identity: got nil error, want one")
	}
	if _, err := lim.AllowN(ctx, "x", 6); !errors.Is(err, store.ErrCostExceedsCapacity) {
		t.Errorf("cost above capacity: got %v, want ErrCostExceedsCapacity", err)
	}
	down := mustNew(t, &funcStore{take: func(context.Context, store.Request) (store.Decision, error) { return store.Decision{}, errDown }}, nil, store.PerMinute(5))
	if _, err := down.Allow(ctx, "x"); !errors.Is(err, store.ErrStoreUnavailable) {
		t.Errorf("store down: got %v, want an error wrapping ErrStoreUnavailable", err)
	}
	tiered, err := NewTiered(mustMem(t), AuthOptions{Subject: fakeSubject, Anonymous: keyfunc.RemoteIP}, fourTiers[:2], Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tiered.Allow(ctx, "alice"); !errors.Is(err, errNoTier) {
		t.Errorf("tiered outside its Handler: got %v, want errNoTier", err)
	}
}

// Behind its own Handler, a tiered limiter's Allow uses the request's
// tier.
func TestAllowUsesTheRequestTier(t *testing.T) {
	st := &recordingStore{}
	lim, err := NewTiered(st, AuthOptions{Subject: fakeSubject, Anonymous: keyfunc.RemoteIP}, fourTiers[:2], Options{Name: "api", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var d limiter.Decision
	h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err = lim.AllowN(r.Context(), "alice", 7)
	}))
	serveReq(h, request("GET", "/", "192.0.2.1:1", "Authorization", "Bearer alice-token"))
	if err != nil || d.Tier != tierAuthenticated || d.Policy != "api/authenticated" {
		t.Fatalf("got tier %q policy %q (%v), want authenticated", d.Tier, d.Policy, err)
	}
	if got := st.last(t); got.Key != "api/authenticated:alice" || got.Cost != 7 {
		t.Errorf("store request: got key %q cost %d, want api/authenticated:alice and 7", got.Key, got.Cost)
	}
}

// The wrapped handler sees the decision the headers describe.
func TestDecisionFromDownstream(t *testing.T) {
	now := time.Unix(1767225600, 0)
	lim, err := NewTiered(mustMem(t), AuthOptions{Subject: fakeSubject, Anonymous: keyfunc.RemoteIP}, fourTiers, Options{
		Name:   "api",
		Logger: quiet,
		Clock:  func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	var got limiter.Decision
	var ok bool
	h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok = DecisionFrom(r.Context())
	}))
	rec := serveReq(h, request("GET", "/", "192.0.2.1:1"))
	if !ok || got.Policy != "api/anonymous" || got.Tier != tierAnonymous || !got.Allowed || got.Capacity != 10 || got.Remaining != 9 {
		t.Fatalf("got %+v, %v; want the anonymous decision", got, ok)
	}
	if reset := strconv.FormatInt(got.Reset.Unix(), 10); reset != rec.Header().Get("X-Ratelimit-Reset") {
		t.Errorf("Reset: got %s, want the header's %s", reset, rec.Header().Get("X-Ratelimit-Reset"))
	}
	serveReq(h, request("GET", "/", "192.0.2.1:1", "Authorization", "Bearer vip-token"))
	if _, ok := DecisionFrom(context.Background()); ok {
		t.Error("DecisionFrom on a bare context: got a decision, want none")
	}
}

// Enforce writes what the middleware writes: in dry-run, the headers
// without Retry-After, and the handler goes on.
func TestEnforceDryRun(t *testing.T) {
	lim := mustNew(t, mustMem(t), nil, store.PerMinute(1), Options{DryRun: true})
	ctx := context.Background()
	_, _ = lim.Allow(ctx, "x")
	d, err := lim.Allow(ctx, "x")
	if err != nil || d.Allowed {
		t.Fatalf("second Allow: got allowed %v (%v), want a refusal", d.Allowed, err)
	}
	rec := serveReq(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !lim.Enforce(w, r, d) {
			t.Error("Enforce in dry-run: got false, want true")
		}
	}), request("GET", "/", "192.0.2.1:1"))
	if rec.Header().Get("Retry-After") != "" || rec.Header().Get("X-Ratelimit-Remaining") != "0" {
		t.Errorf("headers: got %v, want the state without Retry-After", rec.Header())
	}
}
