package middleware

import (
	"context"
	"errors"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
)

// TestOverrides: one client's raised limit, while another stays limited;
// an exempt client without headers; a suspended client answered 403; the
// override that applied visible to the handler.
func TestOverrides(t *testing.T) {
	ctx := context.Background()
	var seen []store.OverrideKind
	lim := mustNew(t, mustMem(t), keyfunc.RemoteIP, store.PerMinute(2), Options{Name: "api", Overrides: true})
	h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := DecisionFrom(r.Context())
		seen = append(seen, d.Override)
	}))
	send := func(ip string) (int, string) {
		rec := serveReq(h, request("GET", "/", ip+":1000"))
		return rec.Code, rec.Header().Get("X-RateLimit-Limit")
	}
	if err := lim.SetOverride(ctx, "", "192.0.2.1", store.Override{Kind: store.OverrideScale, Scale: 5, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 10; i++ {
		if code, limit := send("192.0.2.1"); code != 200 || limit != "10" {
			t.Fatalf("raised client, request %d: got %d with limit %q, want 200 with limit 10", i, code, limit)
		}
	}
	if code, _ := send("192.0.2.1"); code != 429 {
		t.Fatalf("raised client, request 11: got %d, want 429", code)
	}
	for i := 1; i <= 2; i++ {
		if code, limit := send("192.0.2.2"); code != 200 || limit != "2" {
			t.Fatalf("other client, request %d: got %d with limit %q, want 200 with limit 2", i, code, limit)
		}
	}
	if code, _ := send("192.0.2.2"); code != 429 {
		t.Fatalf("other client, request 3: got %d, want 429", code)
	}
	if seen[0] != store.OverrideScale || seen[len(seen)-1] != store.OverrideNone {
		t.Errorf("overrides seen by the handler: got %v, want scale first and none last", seen)
	}

	// Exempt: admitted past the limit, without rate-limit headers.
	if err := lim.SetOverride(ctx, "", "192.0.2.2", store.Override{Kind: store.OverrideExempt, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		rec := serveReq(h, request("GET", "/", "192.0.2.2:1000"))
		if rec.Code != 200 || rec.Header().Get("X-RateLimit-Limit") != "" || rec.Header().Get("X-RateLimit-Remaining") != "" {
			t.Fatalf("exempt client: got %d with headers %v, want 200 without rate-limit headers", rec.Code, rec.Header())
		}
	}

	// Suspended: 403 with the suspended body.
	if err := lim.SetOverride(ctx, "", "192.0.2.3", store.Override{Kind: store.OverrideSuspend, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	rec := serveReq(h, request("GET", "/", "192.0.2.3:1000"))
	if rec.Code != 403 || !strings.Contains(rec.Body.String(), "suspended") {
		t.Fatalf("suspended client: got %d %q, want 403 with the suspended body", rec.Code, rec.Body.String())
	}
	d, err := lim.Allow(ctx, "192.0.2.3")
	if err != nil || d.Allowed || d.Override != store.OverrideSuspend {
		t.Fatalf("Allow for a suspended client: got %+v, %v, want a refusal under the suspension", d, err)
	}
	w := serveReq(h, request("GET", "/", "192.0.2.9:1000")) // a fresh client is served
	if w.Code != 200 {
		t.Fatalf("fresh client: got %d, want 200", w.Code)
	}

	// Cleared: the suspended client is served again.
	if err := lim.ClearOverride(ctx, "", "192.0.2.3"); err != nil {
		t.Fatal(err)
	}
	if err := lim.ClearOverride(ctx, "", "192.0.2.3"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second ClearOverride: got %v, want ErrNotFound", err)
	}
	if code, _ := send("192.0.2.3"); code != 200 {
		t.Fatalf("after ClearOverride: got %d, want 200", code)
	}
}

// TestOverridesNotRead: a policy built without Options.Overrides never reads
// the store's override for its clients, and refuses to set one.
func TestOverridesNotRead(t *testing.T) {
	ctx := context.Background()
	mem := mustMem(t)
	lim := mustNew(t, mem, keyfunc.RemoteIP, store.PerMinute(1), Options{Name: "api"})
	if err := lim.SetOverride(ctx, "", "192.0.2.1", store.Override{Kind: store.OverrideExempt, TTL: time.Hour}); err == nil {
		t.Fatal("SetOverride on a limiter without Options.Overrides: got nil error, want one")
	}
	if err := mem.(store.OverrideStore).SetOverride(ctx, "api:192.0.2.1", store.Override{Kind: store.OverrideSuspend, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	h := lim.Handler(okHandler)
	if code := serveReq(h, request("GET", "/", "192.0.2.1:1000")).Code; code != 200 {
		t.Fatalf("first request: got %d, want 200: the override is not read", code)
	}
	if code := serveReq(h, request("GET", "/", "192.0.2.1:1000")).Code; code != 429 {
		t.Fatalf("second request: got %d, want 429", code)
	}
}

// TestOverridesDryRun: in dry-run a suspended client is let through and
// reported as dry-run.
func TestOverridesDryRun(t *testing.T) {
	obs := &recObserver{}
	lim := mustNew(t, mustMem(t), keyfunc.RemoteIP, store.PerMinute(5), Options{
		Name:      "api",
		Overrides: true,
		DryRun:    true,
		Observer:  obs.Observe,
	})
	if err := lim.SetOverride(context.Background(), "", "192.0.2.1", store.Override{Kind: store.OverrideSuspend, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if code := serveReq(lim.Handler(okHandler), request("GET", "/", "192.0.2.1:1000")).Code; code != 200 {
		t.Fatalf("suspended client in dry-run: got %d, want 200", code)
	}
	if got := obs.outcomes(); len(got) != 1 || got[0] != limiter.OutcomeDryRun {
		t.Fatalf("outcomes: got %v, want [dry_run]", got)
	}
}

// TestOverridesNeedStore: Options.Overrides on a store that keeps none is a
// construction error.
func TestOverridesNeedStore(t *testing.T) {
	_, err := New(&funcStore{}, keyfunc.RemoteIP, store.PerMinute(1), Options{Overrides: true})
	if err == nil || !strings.Contains(err.Error(), "store.OverrideStore") {
		t.Fatalf("got %v, want an error naming store.OverrideStore", err)
	}
}

// TestOverridesCostAboveCapacity: AllowN with a cost above the configured
// capacity is refused as such without an override, and decided under the
// client's override otherwise: a raise that holds it, an exemption, a
// suspension.
func TestOverridesCostAboveCapacity(t *testing.T) {
	ctx := context.Background()
	lim := mustNew(t, mustMem(t), keyfunc.RemoteIP, store.PerMinute(3), Options{Name: "api", Overrides: true})
	if _, err := lim.AllowN(ctx, "plain", 5); !errors.Is(err, store.ErrCostExceedsCapacity) {
		t.Fatalf("no override: got %v, want ErrCostExceedsCapacity", err)
	}
	for _, tc := range []struct {
		id      string
		o       store.Override
		allowed bool
	}{
		{"raised", store.Override{Kind: store.OverrideScale, Scale: 2, TTL: time.Hour}, true},
		{"exempt", store.Override{Kind: store.OverrideExempt, TTL: time.Hour}, true},
		{"suspended", store.Override{Kind: store.OverrideSuspend, TTL: time.Hour}, false},
	} {
		if err := lim.SetOverride(ctx, "", tc.id, tc.o); err != nil {
			t.Fatal(err)
		}
		d, err := lim.AllowN(ctx, tc.id, 5)
		if err != nil || d.Allowed != tc.allowed || d.Override != tc.o.Kind {
			t.Errorf("%s: got %+v, %v, want allowed %t under %s", tc.id, d, err, tc.allowed, tc.o.Kind)
		}
	}
}

// downOverrides is a store that keeps overrides but fails every decision,
// as an unreachable Redis does.
type downOverrides struct{ funcStore }

func (*downOverrides) SetOverride(context.Context, string, store.Override) error { return nil }
func (*downOverrides) GetOverride(context.Context, string) (store.Override, error) {
	return store.Override{}, store.ErrNotFound
}
func (*downOverrides) ClearOverride(context.Context, string) error { return nil }

// TestOverridesFallbackKeepsCostError: while the main store fails, the
// local fallback's verdict that a cost exceeds the limit stands (the main
// store checks it only once it knows the override), instead of the main
// store's failure.
func TestOverridesFallbackKeepsCostError(t *testing.T) {
	down := &downOverrides{funcStore{take: func(context.Context, store.Request) (store.Decision, error) {
		return store.Decision{}, &store.BackendError{Op: "take", Kind: "connection", Err: errors.New("refused")}
	}}}
	lim := mustNew(t, down, keyfunc.RemoteIP, store.PerMinute(3), Options{
		Name:      "api",
		Overrides: true,
		Fallback:  mustMem(t),
	})
	if _, err := lim.AllowN(context.Background(), "192.0.2.1", 5); !errors.Is(err, store.ErrCostExceedsCapacity) {
		t.Fatalf("cost 5 of 3 with the store down: got %v, want ErrCostExceedsCapacity", err)
	}
	if d, err := lim.AllowN(context.Background(), "192.0.2.1", 2); err != nil || !d.Allowed {
		t.Fatalf("cost 2 of 3 with the store down: got %+v, %v, want admitted by the fallback", d, err)
	}
}
