package integration

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

// tokenBudget builds one instance of a route under a token budget of
// 1000 per hour of algorithm alg on its own store over c: each request
// reserves an estimate of 10 tokens and its handler reports the tokens
// it used, from the "used" query parameter, then calls after (when not
// nil).
func tokenBudget(t *testing.T, c redis.UniversalClient, prefix string, alg store.Algorithm, after func()) (http.Handler, *middleware.Limiter) {
	t.Helper()
	s := newStore(t, c, prefix)
	lim := store.Limit{Name: "tokens", Algorithm: alg, Rate: 1000, Period: time.Hour}
	checkStore(t, s, lim)
	base, err := middleware.New(s, constKey("client-1"), lim, middleware.Options{Name: "tokens", DecisionInContext: true, FailureMode: limiter.FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := base.WithCost(10)
	if err != nil {
		t.Fatal(err)
	}
	h := tokens.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		used, _ := strconv.ParseInt(r.URL.Query().Get("used"), 10, 64)
		if err := tokens.ReportCost(r.Context(), used); err != nil {
			t.Errorf("ReportCost: %v", err)
		}
		if after != nil {
			after()
		}
	}))
	return h, tokens
}

// TestSettleAcrossInstances, for every algorithm: 4 instances of a route,
// each with its own Redis client and store on one Redis, serve 40
// concurrent requests that each reserve 10 tokens and report 0 to 19;
// then a fifth instance reserves 10 and its handler reports 0, but its
// connection to Redis dies before it settles. The budget is charged exactly what the handlers
// reported plus the lost reservation's estimate, which stays charged, and
// every key the route wrote carries a TTL.
func TestSettleAcrossInstances(t *testing.T) {
	srv := sharedRedis(t)
	clients := make([]redis.UniversalClient, 4)
	for i := range clients {
		clients[i] = newClient(t, srv)
	}
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			prefix := randomPrefix(t)
			handlers := make([]http.Handler, len(clients))
			var tokens *middleware.Limiter
			for i, c := range clients {
				handlers[i], tokens = tokenBudget(t, c, prefix, alg, nil)
			}
			awayFromWindowEdge(t, clients[0], time.Hour, 10*time.Second)
			var wg sync.WaitGroup
			var want int64
			for i := range 40 {
				want += int64(i % 20)
				wg.Add(1)
				go func() {
					defer wg.Done()
					rec := httptest.NewRecorder()
					handlers[i%len(handlers)].ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?used="+strconv.Itoa(i%20), nil))
					if rec.Code != http.StatusOK {
						t.Errorf("request %d: status %d, want 200", i, rec.Code)
					}
				}()
			}
			wg.Wait()
			// The crashing instance's handler reports 0 tokens, then its
			// connection to Redis dies before the settlement is sent.
			crashed := newClient(t, srv)
			lost, _ := tokenBudget(t, crashed, prefix, alg, func() { _ = crashed.Close() })
			rec := httptest.NewRecorder()
			lost.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?used=0", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("the crashing instance's request: status %d, want 200", rec.Code)
			}
			want += 10
			p, err := tokens.Peek(context.Background(), "client-1")
			if err != nil {
				t.Fatal(err)
			}
			// Peek reports what is left after its own cost of 10. GCRA and
			// the token bucket drain a little while the test runs.
			got := p.Remaining + 10
			if got != 1000-want && !(alg == store.GCRA || alg == store.TokenBucket) || got < 1000-want || got > 1000-want+1 {
				t.Errorf("after 40 settled requests and a lost reservation: %d tokens left, want %d", got, 1000-want)
			}
			ttls := keyTTLs(context.Background(), t, clients[0], prefix)
			if len(ttls) == 0 {
				t.Fatal("no keys written")
			}
			for k, ttl := range ttls {
				if ttl <= 0 || ttl > 2*time.Hour {
					t.Errorf("key %s: TTL %s, want one within the budget's period", k, ttl)
				}
			}
		})
	}
}
