package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
)

// release serves one request per goroutine, all released together, and
// returns the recorders in no particular order.
func release(h http.Handler, reqs []*http.Request) []*httptest.ResponseRecorder {
	out := make([]*httptest.ResponseRecorder, len(reqs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			<-start
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			out[i] = w
		})
	}
	close(start)
	wg.Wait()
	return out
}

func fromIP(method, path, ip string, hdr ...string) *http.Request {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = ip + ":50000"
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	return r
}

func codes(recs []*httptest.ResponseRecorder) map[int]int {
	m := map[int]int{}
	for _, r := range recs {
		m[r.Code]++
	}
	return m
}

// TestTiersOnRedis: an authenticated client and an anonymous client behind
// the same IP are limited separately, each by its own tier's limit, with
// 60 concurrent requests from each.
func TestTiersOnRedis(t *testing.T) {
	t.Parallel()
	srv := sharedRedis(t)
	st := newStore(t, newClient(t, srv), randomPrefix(t))
	secret := []byte("integration-secret-0123456789abcdef")
	sub, err := keyfunc.JWTSubject(keyfunc.JWTOptions{Algorithms: []string{"HS256"}, Key: secret})
	if err != nil {
		t.Fatal(err)
	}
	classify := middleware.AuthOptions{Subject: sub, Anonymous: keyfunc.RemoteIP}
	lim, err := middleware.NewTiered(st, classify, []limiter.Tier{
		{Name: "anonymous", Limits: []store.Limit{{Rate: 10, Period: time.Minute}}},
		{Name: "authenticated", Limits: []store.Limit{{Rate: 30, Period: time.Minute}}},
	}, middleware.Options{Name: "api", FailureMode: limiter.FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject: "alice", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
	}).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []*http.Request
	for range 60 {
		reqs = append(reqs, fromIP("GET", "/api/ping", "203.0.113.50"))
		reqs = append(reqs, fromIP("GET", "/api/ping", "203.0.113.50", "Authorization", "Bearer "+tok))
	}
	recs := release(lim.Handler(okHandler), reqs)
	anon, auth := map[int]int{}, map[int]int{}
	for i, r := range recs {
		if i%2 == 0 {
			anon[r.Code]++
		} else {
			auth[r.Code]++
		}
	}
	if anon[200] != 10 || anon[429] != 50 {
		t.Errorf("anonymous: got %v, want 10 × 200 and 50 × 429", anon)
	}
	if auth[200] != 30 || auth[429] != 30 {
		t.Errorf("authenticated: got %v, want 30 × 200 and 30 × 429", auth)
	}
}

// TestLoginAbuseBlockOnRedis: 100 simultaneous login attempts against a
// threshold of 5 start exactly one block and admit exactly as many attempts
// as the limit says: 5 for a limit of 5 (">"), 4 for a limit of 4 (the
// ">=" form of 5). While blocked, even after the counting window has
// emptied, attempts are refused as blocked, with Retry-After the first
// moment a retry is admitted: here not the block's end but the hour limit's
// wait, which the 100 counted attempts filled.
func TestLoginAbuseBlockOnRedis(t *testing.T) {
	t.Parallel()
	srv := sharedRedis(t)
	c := newClient(t, srv)
	for _, tc := range []struct {
		name  string
		admit int
	}{{"exceed (>)", 5}, {"reach (>=)", 4}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := newStore(t, c, randomPrefix(t))
			var mu sync.Mutex
			blocksStarted := 0
			obs := func(_ context.Context, e limiter.Event) {
				if e.BlockStarted {
					mu.Lock()
					blocksStarted++
					mu.Unlock()
				}
			}
			lim, err := middleware.New(st, keyfunc.RemoteIP,
				store.Limit{Name: "short", Algorithm: store.SlidingWindowLog, Rate: int64(tc.admit), Period: 2 * time.Second, Block: 5 * time.Second},
				middleware.Options{
					Name:        "login",
					CountDenied: true,
					Observer:    obs,
					FailureMode: limiter.FailClosed,
					Limits:      []store.Limit{store.Limit{Name: "long", Algorithm: store.SlidingWindowLog, Rate: 20, Period: time.Hour, Block: time.Hour}},
				})
			if err != nil {
				t.Fatal(err)
			}
			h := lim.Handler(okHandler)
			var reqs []*http.Request
			for range 100 {
				reqs = append(reqs, fromIP("POST", "/login", "192.0.2.99"))
			}
			got := codes(release(h, reqs))
			if got[200] != tc.admit || got[429] != 100-tc.admit {
				t.Fatalf("got %v, want %d × 200 and %d × 429", got, tc.admit, 100-tc.admit)
			}
			if blocksStarted != 1 {
				t.Fatalf("blocks started: got %d, want exactly 1", blocksStarted)
			}
			// The counting window (2 s) empties; the block (5 s) holds.
			time.Sleep(2500 * time.Millisecond)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, fromIP("POST", "/login", "192.0.2.99"))
			var b struct {
				Error      string `json:"error"`
				RetryAfter int64  `json:"retry_after"`
				Scope      string `json:"scope"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
				t.Fatal(err)
			}
			// The block has 2-3 s left, but "long" (20 per hour) refuses
			// until the attempts leave its window, an hour after them.
			if w.Code != 429 || b.Error != "blocked" || b.Scope != "short" || b.RetryAfter < 3590 || b.RetryAfter > 3600 {
				t.Fatalf("after the window emptied: got %d %+v, want 429 blocked by short with Retry-After the hour limit's wait, 3590-3600 s", w.Code, b)
			}
			if ra := w.Header().Get("Retry-After"); ra != fmt.Sprint(b.RetryAfter) {
				t.Errorf("Retry-After %q disagrees with the body's %d", ra, b.RetryAfter)
			}
		})
	}
}

// TestDedupOnRedis: 500 concurrent requests with one Idempotency-Key
// against a limit of 100 (all 500 reached the handler once, then 100 + 3
// replays) run it exactly 100 times, and the rest get 429. 50 concurrent
// requests carrying 5 distinct keys, each replayed 9 times within a bound
// of 9 replays, against a limit of 8 (all 50 reached the handler): exactly
// 8, replays counted like any request.
func TestDedupOnRedis(t *testing.T) {
	t.Parallel()
	srv := sharedRedis(t)
	st := newStore(t, newClient(t, srv), randomPrefix(t))
	t.Run("one key does not bypass the limit", func(t *testing.T) {
		lim, err := middleware.New(st, keyfunc.RemoteIP, store.Limit{Algorithm: store.SlidingWindowLog, Rate: 100, Period: time.Hour},
			middleware.Options{
				Dedup:       func(r *http.Request) string { return r.Header.Get("Idempotency-Key") },
				Name:        "bypass",
				FailureMode: limiter.FailClosed,
			})
		if err != nil {
			t.Fatal(err)
		}
		var reqs []*http.Request
		for range 500 {
			reqs = append(reqs, fromIP("POST", "/orders", "192.0.2.61", "Idempotency-Key", "same"))
		}
		if got := codes(release(lim.Handler(okHandler), reqs)); got[200] != 100 || got[429] != 400 {
			t.Fatalf("got %v, want 100 admitted (the limit) and 400 refused", got)
		}
	})
	lim, err := middleware.New(st, keyfunc.RemoteIP, store.Limit{Algorithm: store.SlidingWindowLog, Rate: 8, Period: time.Minute},
		middleware.Options{
			Dedup:        func(r *http.Request) string { return r.Header.Get("Idempotency-Key") },
			DedupReplays: 9,
			DedupWindow:  0,
			FailureMode:  limiter.FailClosed,
		})
	if err != nil {
		t.Fatal(err)
	}
	h := lim.Handler(okHandler)
	var reqs []*http.Request
	for i := range 50 {
		reqs = append(reqs, fromIP("POST", "/orders", "192.0.2.60", "Idempotency-Key", fmt.Sprintf("order-%d", i%5)))
	}
	if got := codes(release(h, reqs)); got[200] != 8 || got[429] != 42 {
		t.Fatalf("got %v, want 8 admitted (the limit) and 42 refused", got)
	}
}

// TestDedupFreshIDsOnRedisAcrossInstances pins the bypass by fresh ids on
// real Redis: a client that sends each new Idempotency-Key once and then
// replays it 3 times (the default bound), spread over two instances with
// their own clients and stores, ran the handler 4 times its limit (80 of
// 200 requests against 20 per hour). Replays are counted like any
// request, so exactly 20 run, whatever ids it sends, and some of them are
// replays reported as duplicates.
func TestDedupFreshIDsOnRedisAcrossInstances(t *testing.T) {
	t.Parallel()
	srv := sharedRedis(t)
	prefix := randomPrefix(t)
	var runs, replays atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if d, ok := middleware.DecisionFrom(r.Context()); ok && d.Duplicate {
			replays.Add(1)
		}
	})
	var hs []http.Handler
	for range 2 {
		lim, err := middleware.New(newStore(t, newClient(t, srv), prefix), keyfunc.RemoteIP,
			store.Limit{Algorithm: store.GCRA, Rate: 20, Period: time.Hour},
			middleware.Options{
				Name:              "orders",
				Dedup:             func(r *http.Request) string { return r.Header.Get("Idempotency-Key") },
				FailureMode:       limiter.FailClosed,
				DecisionInContext: true,
			})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, lim.Handler(handler))
	}
	refused := 0
	for i := range 200 {
		w := httptest.NewRecorder()
		hs[i%2].ServeHTTP(w, fromIP("POST", "/orders", "192.0.2.62", "Idempotency-Key", fmt.Sprintf("fresh-%d", i/4)))
		if w.Code == http.StatusTooManyRequests {
			refused++
		}
	}
	if got := runs.Load(); got != 20 || refused != 180 {
		t.Fatalf("handler runs: got %d (%d refused), want 20, the limit (180 refused)", got, refused)
	}
	if got := replays.Load(); got != 15 {
		t.Fatalf("replays served: got %d, want 15 (three of each of the first five ids)", got)
	}
}

// TestMultiWindowOnRedis: 10 per second AND 15 per minute, 40 concurrent
// requests: exactly 10 admitted (the per-second limit decides), none
// recorded twice; after a second the per-minute limit admits only 5 more.
func TestMultiWindowOnRedis(t *testing.T) {
	t.Parallel()
	srv := sharedRedis(t)
	st := newStore(t, newClient(t, srv), randomPrefix(t))
	lim, err := middleware.New(st, keyfunc.RemoteIP, store.Limit{Name: "second", Algorithm: store.SlidingWindowLog, Rate: 10, Period: time.Second},
		middleware.Options{FailureMode: limiter.FailClosed, Limits: []store.Limit{store.Limit{Name: "minute", Algorithm: store.SlidingWindowLog, Rate: 15, Period: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	h := lim.Handler(okHandler)
	mk := func(n int) []*http.Request {
		var reqs []*http.Request
		for range n {
			reqs = append(reqs, fromIP("GET", "/", "192.0.2.61"))
		}
		return reqs
	}
	if got := codes(release(h, mk(40))); got[200] != 10 {
		t.Fatalf("first burst: got %v, want exactly 10 admitted", got)
	}
	time.Sleep(1100 * time.Millisecond)
	if got := codes(release(h, mk(40))); got[200] != 5 {
		t.Fatalf("second burst: got %v, want exactly 5 admitted (15 per minute, 10 used)", got)
	}
}

// TestCountedRefusalWaitOnRedis: with CountDenied a refusal's Retry-After
// counts the attempt it recorded. The third login attempt within ten
// seconds, refused by the short limit (2), fills the hour one (3): it is
// refused for the hour limit's wait, which that limit's headers give. A
// client that waits a sliding window counter's Retry-After after a
// counted refusal, sending nothing, is admitted.
func TestCountedRefusalWaitOnRedis(t *testing.T) {
	t.Parallel()
	srv := sharedRedis(t)
	c := newClient(t, srv)
	t.Run("a limit the attempt filled", func(t *testing.T) {
		t.Parallel()
		lim, err := middleware.New(newStore(t, c, randomPrefix(t)), keyfunc.RemoteIP,
			store.Limit{Name: "short", Algorithm: store.SlidingWindowLog, Rate: 2, Period: 10 * time.Second},
			middleware.Options{Name: "login", CountDenied: true, FailureMode: limiter.FailClosed,
				Limits: []store.Limit{{Name: "hour", Algorithm: store.SlidingWindowLog, Rate: 3, Period: time.Hour}}})
		if err != nil {
			t.Fatal(err)
		}
		h := lim.Handler(okHandler)
		var w *httptest.ResponseRecorder
		for range 3 {
			w = httptest.NewRecorder()
			h.ServeHTTP(w, fromIP("POST", "/login", "192.0.2.98"))
		}
		ra, _ := strconv.Atoi(w.Header().Get("Retry-After"))
		if w.Code != 429 || ra < 3590 || ra > 3600 || w.Header().Get("X-Ratelimit-Limit") != "3" {
			t.Fatalf("third attempt: %d, Retry-After %d, X-RateLimit-Limit %s; want 429, 3590-3600 and the hour limit's 3", w.Code, ra, w.Header().Get("X-Ratelimit-Limit"))
		}
	})
	t.Run("a sliding window that holds the attempt", func(t *testing.T) {
		t.Parallel()
		lim, err := middleware.New(newStore(t, c, randomPrefix(t)), keyfunc.RemoteIP,
			store.Limit{Algorithm: store.SlidingWindowCounter, Rate: 2, Period: 2 * time.Second},
			middleware.Options{Name: "counter", CountDenied: true, FailureMode: limiter.FailClosed})
		if err != nil {
			t.Fatal(err)
		}
		h := lim.Handler(okHandler)
		serve := func() *httptest.ResponseRecorder {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, fromIP("POST", "/login", "192.0.2.97"))
			return w
		}
		for round := range 2 {
			w := serve()
			for i := 0; w.Code == 200; i++ {
				if i == 10 {
					t.Fatal("10 attempts admitted by a limit of 2")
				}
				w = serve()
			}
			ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
			if w.Code != 429 || err != nil || ra < 1 || ra > 4 {
				t.Fatalf("round %d: %d, Retry-After %q; want 429 and 1-4 s", round, w.Code, w.Header().Get("Retry-After"))
			}
			time.Sleep(time.Duration(ra) * time.Second)
			if w := serve(); w.Code != 200 {
				t.Fatalf("round %d: waited Retry-After %d s, sending nothing: %d, Retry-After %s", round, ra, w.Code, w.Header().Get("Retry-After"))
			}
		}
	})
}
