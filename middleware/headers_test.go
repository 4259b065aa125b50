package middleware

import (
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
	"github.com/ratekeeper/ratekeeper/store/suppressed"
)

// Regression: with headers.Options{Omit: true} (the login route), a refusal
// got a 429 whose body said "retry_after":900 but no Retry-After header.
func TestOmitStillSendsRetryAfterOn429(t *testing.T) {
	lim := mustNew(t, mustMem(t), keyfunc.RemoteIP,
		store.Limit{Name: "minute", Algorithm: store.SlidingWindowLog, Rate: 1, Period: time.Minute, Block: 15 * time.Minute},
		Options{
			Name:        "login",
			CountDenied: true,
			Headers:     headers.Options{Omit: true},
		})
	h := lim.Handler(okHandler)
	send := func() *http.Response {
		return serveReq(h, request("POST", "/login", "198.51.100.23:7000")).Result()
	}
	if res := send(); res.StatusCode != 200 || res.Header.Get("X-Ratelimit-Remaining") != "" || res.Header.Get("Retry-After") != "" {
		t.Fatalf("admitted: got %d with headers %v, want 200 and no rate-limit headers", res.StatusCode, res.Header)
	}
	res := send()
	if res.StatusCode != 429 {
		t.Fatalf("status: got %d, want 429", res.StatusCode)
	}
	if got := res.Header.Get("Retry-After"); got != "900" {
		t.Errorf("Retry-After: got %q, want 900", got)
	}
	for _, k := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"} {
		if v := res.Header.Get(k); v != "" {
			t.Errorf("%s: got %q, want none (Omit)", k, v)
		}
	}
}

// X-RateLimit-Bucket names the limiter and X-RateLimit-Tier the tier.
func TestBucketAndTierHeaders(t *testing.T) {
	lim, err := NewTiered(mustMem(t), AuthOptions{Subject: fakeSubject, Anonymous: keyfunc.RemoteIP}, fourTiers[:2],
		Options{
			Name:    "read",
			Headers: headers.Options{Bucket: true},
			Logger:  quiet,
		})
	if err != nil {
		t.Fatal(err)
	}
	rec := serveReq(lim.Handler(okHandler), request("GET", "/", "192.0.2.1:1", "Authorization", "Bearer amy-token"))
	if b, tier := rec.Header().Get("X-RateLimit-Bucket"), rec.Header().Get("X-RateLimit-Tier"); b != "read" || tier != "authenticated" {
		t.Errorf("got bucket %q tier %q, want read and authenticated", b, tier)
	}
	plain := mustNew(t, mustMem(t), keyfunc.RemoteIP, store.PerMinute(5), Options{Name: "write", Headers: headers.Options{Bucket: true}})
	rec = serveReq(plain.Handler(okHandler), request("GET", "/", "192.0.2.1:1"))
	if b, tier := rec.Header().Get("X-RateLimit-Bucket"), rec.Header().Values("X-RateLimit-Tier"); b != "write" || tier != nil {
		t.Errorf("without tiers: got bucket %q tier %v, want write and no tier", b, tier)
	}
}

// TestSuppressedPolicyEndToEnd runs a limiter on the suppressed store
// over the memory store (soft limit 2, hard limit 3) with every draw
// refusing: the soft limit's requests pass,
// the next one is refused as suppressed (429, the factor in its header,
// the refusal counted as such by the observer), and the hard limit holds.
func TestSuppressedPolicyEndToEnd(t *testing.T) {
	st, err := memstore.New(memstore.Options{Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	sup, err := suppressed.New(st, suppressed.Options{Soft: func(store.Limit) int64 { return 2 }})
	if err != nil {
		t.Fatal(err)
	}
	obs := &recObserver{}
	l := mustNew(t, sup, constKey("k"), store.Limit{Algorithm: store.SlidingWindowCounter, Rate: 3, Period: time.Hour}, Options{Observer: obs.Observe, Headers: headers.Options{Suppression: true}})
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	var codes, factors []string
	for range 3 {
		rec := do(h)
		codes = append(codes, strconv.Itoa(rec.Code))
		factors = append(factors, rec.Header().Get("X-RateLimit-Suppression"))
	}
	if got, want := strings.Join(codes, " "), "200 200 429"; got != want {
		t.Fatalf("status codes: got %s, want %s", got, want)
	}
	if got, want := strings.Join(factors, " "), "0 0 0.333333"; got != want {
		t.Fatalf("suppression factors: got %s, want %s", got, want)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if e := obs.events[2]; e.Outcome != limiter.OutcomeLimited || !e.Suppressed || e.Suppression != 0.333333 {
		t.Fatalf("third event: got outcome %s, suppressed %t, suppression %v; want limited, true, 0.333333", e.Outcome, e.Suppressed, e.Suppression)
	}
}
