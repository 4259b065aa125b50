package middleware

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// TestCountedRefusalRetryAfterHolds: with CountDenied a refused attempt is
// recorded, in every limit. A client that stops after a 429 and retries
// once Retry-After has passed is admitted: the wait counts the attempt
// (which may have filled a daily limit beside the per-minute one that
// refused it, or stays in a sliding window). The body's retry_after and
// reset agree with the headers. Every window algorithm, one and two
// limits, costs 1 and 3, with and without blocks, at random gaps.
func TestCountedRefusalRetryAfterHolds(t *testing.T) {
	for _, alg := range []store.Algorithm{store.FixedWindow, store.SlidingWindowCounter, store.SlidingWindowLog} {
		for _, two := range []bool{false, true} {
			for _, cost := range []int64{1, 3} {
				for _, blk := range []time.Duration{0, 11 * time.Second} {
					t.Run(fmt.Sprintf("%s/two=%t/cost=%d/block=%s", alg, two, cost, blk), func(t *testing.T) {
						countedRetries(t, alg, two, cost, blk)
					})
				}
			}
		}
	}
}

func countedRetries(t *testing.T, alg store.Algorithm, two bool, cost int64, blk time.Duration) {
	clk := &fakeClock{now: time.Unix(1_700_000_000, 123_456_789)}
	st, err := memstore.New(memstore.Options{Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	first := store.Limit{Name: "a", Algorithm: alg, Rate: 5, Period: 7 * time.Second, Block: blk}
	opts := Options{Name: "p", CountDenied: true, Clock: clk.Now}
	if two {
		opts.Limits = []store.Limit{{Name: "b", Algorithm: alg, Rate: 8, Period: 31 * time.Second}}
	}
	lim, err := New(st, keyfunc.Constant("k"), first, opts)
	if err != nil {
		t.Fatal(err)
	}
	if cost > 1 {
		if lim, err = lim.WithCost(cost); err != nil {
			t.Fatal(err)
		}
	}
	h := lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	serve := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		return w
	}
	rng := rand.New(rand.NewPCG(1, uint64(alg)))
	refusals := 0
	for i := 0; i < 300; i++ {
		w := serve()
		if w.Code != http.StatusTooManyRequests {
			clk.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
			continue
		}
		refusals++
		ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
		if err != nil || ra < 1 {
			t.Fatalf("attempt %d: Retry-After %q", i, w.Header().Get("Retry-After"))
		}
		var body struct {
			RetryAfter int64 `json:"retry_after"`
			Reset      int64 `json:"reset"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		reset, _ := strconv.ParseInt(w.Header().Get("X-Ratelimit-Reset"), 10, 64)
		if body.RetryAfter != int64(ra) || body.Reset != reset {
			t.Fatalf("attempt %d: body retry_after %d, reset %d; headers Retry-After %d, X-RateLimit-Reset %d", i, body.RetryAfter, body.Reset, ra, reset)
		}
		clk.Add(time.Duration(ra) * time.Second)
		if w2 := serve(); w2.Code != http.StatusOK {
			t.Fatalf("attempt %d: refused with Retry-After %d, retried %ds later: %d, Retry-After %s", i, ra, ra, w2.Code, w2.Header().Get("Retry-After"))
		}
	}
	if refusals < 10 {
		t.Fatalf("%d refusals in 300 attempts: the case tests too little", refusals)
	}
}

// TestCountedRefusalNamesTheLimitItFilled: a login's third attempt in a
// minute, refused by the per-minute limit (2), fills the daily one (3):
// the refusal names the daily limit and its wait.
func TestCountedRefusalNamesTheLimitItFilled(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	st, err := memstore.New(memstore.Options{Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	minute := store.Limit{Name: "minute", Algorithm: store.SlidingWindowLog, Rate: 2, Period: 10 * time.Second}
	day := store.Limit{Name: "day", Algorithm: store.SlidingWindowLog, Rate: 3, Period: 24 * time.Hour}
	lim, err := New(st, keyfunc.Constant("k"), minute, Options{Name: "login", CountDenied: true, Limits: []store.Limit{day}, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	h := lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var w *httptest.ResponseRecorder
	for range 3 {
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/login", nil))
	}
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "86400" || w.Header().Get("X-Ratelimit-Limit") != "3" {
		t.Fatalf("third attempt: %d, Retry-After %s, X-RateLimit-Limit %s; want 429, 86400 and the daily limit's 3", w.Code, w.Header().Get("Retry-After"), w.Header().Get("X-Ratelimit-Limit"))
	}
}
