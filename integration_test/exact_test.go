package integration

import (
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// TestExactUnderConcurrency sends 200 simultaneous requests for one client
// through 4 middleware instances, each with its own Redis client and store,
// against a limit of 50: exactly 50 must pass and 150 get 429, for every
// algorithm, every round.
func TestExactUnderConcurrency(t *testing.T) {
	srv := sharedRedis(t)
	clients := make([]redis.UniversalClient, 4)
	for i := range clients {
		clients[i] = newClient(t, srv)
	}
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			exactRounds(t, clients, alg, 3, "exact")
		})
	}
}

// exactRounds sends, rounds times, 200 simultaneous requests for one client
// key through one middleware instance per client (each with its own store)
// against a limit of 50: exactly 50 must be admitted, each seeing a
// different remaining count, and every refusal must carry Retry-After and
// remaining 0.
func exactRounds(t *testing.T, clients []redis.UniversalClient, alg store.Algorithm, rounds int, name string) {
	t.Helper()
	const (
		requests = 200
		limit    = 50
	)
	// An hour keeps the burst inside one aligned window and far from any
	// refill; awayFromWindowEdge handles the rest.
	lim := store.Limit{Algorithm: alg, Rate: limit, Period: time.Hour}
	for round := range rounds {
		prefix := randomPrefix(t)
		handlers := make([]http.Handler, len(clients))
		for i, c := range clients {
			s := newStore(t, c, prefix)
			checkStore(t, s, lim)
			handlers[i] = newHandler(t, s, "client-1", lim,
				middleware.Options{Name: name, FailureMode: limiter.FailClosed},
			)
		}
		awayFromWindowEdge(t, clients[0], lim.Period, 10*time.Second)
		recs := burst(handlers, requests)

		codes := map[int]int{}
		var left []int64
		for i, rec := range recs {
			codes[rec.Code]++
			n, ok := remaining(t, rec)
			if !ok {
				t.Fatalf("round %d: response %d (status %d, body %q) has no %s header", round, i, rec.Code, rec.Body.String(), "X-RateLimit-Remaining")
			}
			switch rec.Code {
			case http.StatusOK:
				left = append(left, n)
			case http.StatusTooManyRequests:
				if n != 0 {
					t.Errorf("round %d: 429 with remaining %d, want 0", round, n)
				}
				if rec.Header().Get("Retry-After") == "" {
					t.Errorf("round %d: 429 without %s", round, "Retry-After")
				}
			}
		}
		if codes[http.StatusOK] != limit || codes[http.StatusTooManyRequests] != requests-limit {
			t.Fatalf("round %d: got status counts %v, want %d×200 and %d×429", round, codes, limit, requests-limit)
		}
		// Atomic decisions: every admitted request saw a different
		// remaining count, limit-1 down to 0.
		sort.Slice(left, func(i, j int) bool { return left[i] < left[j] })
		for i, n := range left {
			if n != int64(i) {
				t.Fatalf("round %d: remaining values of admitted requests %v, want each of 0..%d once", round, left, limit-1)
			}
		}
	}
}

// TestInstancesShareOneLimit: two limiters on two clients (two application
// instances) count against one limit; a reset through one store is seen by
// the other.
func TestInstancesShareOneLimit(t *testing.T) {
	srv := sharedRedis(t)
	c1, c2 := newClient(t, srv), newClient(t, srv)
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			const rate = 10
			prefix := randomPrefix(t)
			lim := store.Limit{Algorithm: alg, Rate: rate, Period: time.Hour}
			s1, s2 := newStore(t, c1, prefix), newStore(t, c2, prefix)
			checkStore(t, s1, lim)
			o := middleware.Options{Name: "shared", FailureMode: limiter.FailClosed}
			h := []http.Handler{newHandler(t, s1, "client-1", lim, o), newHandler(t, s2, "client-1", lim, o)}
			awayFromWindowEdge(t, c1, lim.Period, 10*time.Second)

			for i := range rate + 2 {
				rec := serve(h[i%2])
				n, ok := remaining(t, rec)
				if !ok {
					t.Fatalf("request %d: status %d without %s", i, rec.Code, "X-RateLimit-Remaining")
				}
				want, wantLeft := http.StatusOK, int64(rate-1-i)
				if i >= rate {
					want, wantLeft = http.StatusTooManyRequests, 0
				}
				if rec.Code != want || n != wantLeft {
					t.Fatalf("request %d via instance %d: got %d remaining %d, want %d remaining %d", i, i%2, rec.Code, n, want, wantLeft)
				}
			}

			// The same through the stores directly: exhaust via the first,
			// the second refuses; reset via the first, the second admits.
			ctx := t.Context()
			req := store.Request{Key: "direct-client", Limits: []store.Limit{lim}}
			for i := range rate {
				if d, err := s1.Take(ctx, req); err != nil || !d.Allowed {
					t.Fatalf("take %d via store 0: got %+v, %v, want allowed", i, d, err)
				}
			}
			if d, err := s2.Take(ctx, req); err != nil || d.Allowed {
				t.Fatalf("take via store 1 after %d: got %+v, %v, want denied", rate, d, err)
			}
			if err := s1.Reset(ctx, req); err != nil {
				t.Fatalf("reset via store 0: %v", err)
			}
			// Store 1 remembers its own refusal until its RetryAfter (a
			// reset through another instance is not seen there); a store
			// without the deny cache sees the reset at once.
			if d, err := s2.Take(ctx, req); err != nil || d.Allowed || !d.Cached {
				t.Fatalf("take via store 1 after reset: got %+v, %v, want its cached refusal", d, err)
			}
			s3 := newStoreWith(t, c2, redisstore.Options{Prefix: prefix, Timeout: 10 * time.Second, DenyCacheSize: -1})
			if d, err := s3.Take(ctx, req); err != nil || !d.Allowed || d.Remaining != rate-1 {
				t.Fatalf("take via a store without deny cache after reset: got %+v, %v, want allowed with remaining %d", d, err, rate-1)
			}
		})
	}
}
