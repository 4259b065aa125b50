package integration

import (
	"context"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
)

// TestEveryKeyHasTTL drives traffic (admitted and refused, costs 1 and 2,
// single, sub-second and multi-limit policies, through the store and the
// middleware) for every algorithm and checks that every key the Redis store
// wrote expires: PTTL > 0, and no longer than its state can matter. The
// bound is twice the longest period (the sliding window counter's horizon)
// or twice the longest block (escalation memory), whichever is longest.
//
// Blocks, de-duplication ids and counted refusals write keys of their own
// and have cases of their own.
func TestEveryKeyHasTTL(t *testing.T) {
	srv := sharedRedis(t)
	c := newClient(t, srv)
	cases := []struct {
		name        string
		limits      []store.Limit
		dedup       bool // some requests carry a DedupID
		countDenied bool // some requests count refusals (window algorithms)
		wantBlock   bool // the traffic must trip a block
	}{
		{name: "single", limits: []store.Limit{{Rate: 5, Period: 2 * time.Second}}},
		{name: "subsecond", limits: []store.Limit{{Rate: 3, Period: 700 * time.Millisecond}}},
		{name: "multi", limits: []store.Limit{
			{Name: "short", Rate: 3, Period: 1500 * time.Millisecond},
			{Name: "long", Rate: 20, Period: time.Hour},
		}},
		{name: "block", wantBlock: true, limits: []store.Limit{
			{Name: "burst", Rate: 2, Period: time.Second, Block: 2 * time.Second, BlockMax: 8 * time.Second},
			{Name: "steady", Rate: 30, Period: time.Minute},
		}},
		{name: "dedup", dedup: true, limits: []store.Limit{{Rate: 5, Period: 2 * time.Second}}},
		{name: "count-denied", countDenied: true, limits: []store.Limit{{Rate: 5, Period: 2 * time.Second}}},
	}
	for _, alg := range store.Algorithms {
		window := alg == store.SlidingWindowLog || alg == store.SlidingWindowCounter || alg == store.FixedWindow
		for _, tc := range cases {
			if tc.countDenied && !window {
				continue // CountDenied is defined for window algorithms only
			}
			t.Run(alg.String()+"/"+tc.name, func(t *testing.T) {
				limits := make([]store.Limit, len(tc.limits))
				horizon := time.Duration(0)
				for i, l := range tc.limits {
					l.Algorithm = alg
					limits[i] = l
					horizon = max(horizon, 2*l.Period, 2*l.Block, 2*l.BlockMax)
				}
				prefix := randomPrefix(t)
				s := newStore(t, c, prefix)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()

				// 24 takes put 12 units on each of three keys, over
				// every limit above even when a fixed window's boundary
				// falls inside the loop and splits a key's units in two.
				refused, blocked := 0, 0
				for i := range 24 {
					req := store.Request{
						Key:         "client-" + strconv.Itoa(i%3),
						Limits:      limits,
						Cost:        int64(1 + i%2),
						CountDenied: tc.countDenied && i%2 == 1,
					}
					if tc.dedup && i%4 == 0 {
						req.DedupID = "op-" + strconv.Itoa(i)
					}
					d, err := s.Take(ctx, req)
					if err != nil {
						t.Fatalf("take %d: %v", i, err)
					}
					if !d.Allowed {
						refused++
					}
					if d.Blocked || d.BlockStarted {
						blocked++
					}
				}
				if refused == 0 {
					t.Fatalf("no request was refused; the traffic does not reach the limit")
				}
				if tc.wantBlock && blocked == 0 {
					t.Fatalf("no request started or met a block; the traffic does not trip it")
				}
				h := newHandler(t, s, "client-http", limits[0],
					middleware.Options{
						Name:        "ttl",
						FailureMode: limiter.FailClosed,
						Limits:      limits[1:],
					})
				for i := range 5 {
					if rec := serve(h); rec.Code != http.StatusOK && rec.Code != http.StatusTooManyRequests {
						t.Fatalf("request %d: got status %d, want 200 or 429", i, rec.Code)
					}
				}

				ttls := keyTTLs(ctx, t, c, prefix)
				if len(ttls) == 0 {
					t.Fatalf("no keys under prefix %q after traffic; the store writes elsewhere", prefix)
				}
				for k, d := range ttls {
					// PTTL 0 is a key with less than a millisecond left
					// (a fixed window ending as it is read); a key
					// without a TTL reads negative.
					if d < 0 || d > horizon {
						t.Errorf("key %q: got PTTL %v, want in [0, %v]", k, d, horizon)
					}
				}
			})
		}
	}
}
