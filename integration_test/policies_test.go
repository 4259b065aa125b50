package integration

import (
	"encoding/json"
	"fmt"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"net/http/httptest"
	"sync"
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
			obs := func(e limiter.Event) {
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

// TestDedupOnRedis: 50 concurrent requests carrying 5 distinct idempotency
// keys, each replayed 9 times within a bound of 9 replays, count 5 units,
// not 50. Then the bypass of one key: 500 concurrent requests with one
// Idempotency-Key against a limit of 100 (all 500 reached the handler)
// run it 100 + 3 times with the default bound, and the rest get 429.
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
		if got := codes(release(lim.Handler(okHandler), reqs)); got[200] != 103 || got[429] != 397 {
			t.Fatalf("got %v, want 103 admitted (100 counted, 3 replays) and 397 refused", got)
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
	if got := codes(release(h, reqs)); got[200] != 50 {
		t.Fatalf("got %v, want all 50 admitted (5 distinct ids fit the limit of 8)", got)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, fromIP("POST", "/orders", "192.0.2.60", "Idempotency-Key", "order-new"))
	if w.Code != 200 || w.Header().Get("X-Ratelimit-Remaining") != "2" {
		t.Fatalf("a new id: got %d remaining %s, want 200 and 2 (8 - 5 ids - this one)", w.Code, w.Header().Get("X-Ratelimit-Remaining"))
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
