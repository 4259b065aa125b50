package integration

import (
	"context"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
)

// TestPoisonedKeyDoesNotSwitchLimitingOff pins the bug where one state key
// of the wrong type failed its client's decisions as store errors, the
// circuit breaker opened, and another client then got 30 of 30 requests
// through a limit of 10. Now the store repairs the key, the poisoned
// client is decided again, and the breaker stays closed. Default
// middleware options: the breaker opens after 5 failures.
func TestPoisonedKeyDoesNotSwitchLimitingOff(t *testing.T) {
	srv := sharedRedis(t)
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			ctx := context.Background()
			c := newClient(t, srv)
			prefix := randomPrefix(t)
			s := newStore(t, c, prefix)
			var mu sync.Mutex
			events := map[string][]limiter.Event{}
			lim, err := middleware.New(s,
				func(r *http.Request) (string, error) { return r.Header.Get("X-Client"), nil },
				store.Limit{Algorithm: alg, Rate: 10, Period: time.Hour},
				middleware.Options{Observer: func(_ context.Context, e limiter.Event) {
					mu.Lock()
					defer mu.Unlock()
					events[string(e.Outcome)] = append(events[string(e.Outcome)], e)
				}})
			if err != nil {
				t.Fatal(err)
			}
			h := lim.Handler(okHandler)
			// The counts below hold within one hour's fixed window.
			awayFromWindowEdge(t, c, time.Hour, 10*time.Second)
			send := func(client string) int {
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.Header.Set("X-Client", client)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				return rec.Code
			}
			// The poisoned client's first request writes its state key;
			// it is then replaced by a list.
			if code := send("mallory"); code != http.StatusOK {
				t.Fatalf("first request: got %d, want 200", code)
			}
			keys, err := c.Keys(ctx, prefix+":*").Result()
			if err != nil || len(keys) != 1 {
				t.Fatalf("got keys %v, %v; want mallory's one state key", keys, err)
			}
			if err := c.Del(ctx, keys[0]).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.LPush(ctx, keys[0], "poison").Err(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			clear(events)
			mu.Unlock()

			malloryAdmitted := 0
			for range 12 {
				if send("mallory") == http.StatusOK {
					malloryAdmitted++
				}
			}
			admitted := 0
			for range 30 {
				if send("alice") == http.StatusOK {
					admitted++
				}
			}
			if admitted != 10 {
				t.Fatalf("another client: got %d of 30 admitted, want exactly 10", admitted)
			}
			// Repaired, mallory's state starts afresh: 10 of 12 admitted,
			// every request decided by the store.
			if malloryAdmitted != 10 {
				t.Fatalf("poisoned client: got %d of 12 admitted, want 10 (decided as a fresh key)", malloryAdmitted)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, o := range []limiter.Outcome{limiter.OutcomeFailedOpen, limiter.OutcomeFailedClosed} {
				if n := len(events[string(o)]); n != 0 {
					t.Fatalf("got %d requests %s (first error: %v), want none", n, o, events[string(o)][0].Err)
				}
			}
			allowed := events[string(limiter.OutcomeAllowed)]
			if len(allowed) == 0 || !allowed[0].Repaired {
				t.Fatal("the first decision after the poisoning does not report the repair")
			}
			repairs := 0
			for _, es := range events {
				for _, e := range es {
					if e.Repaired {
						repairs++
					}
				}
			}
			if repairs != 1 {
				t.Fatalf("got %d repaired decisions, want 1", repairs)
			}
			if typ := c.Type(ctx, keys[0]).Val(); typ == "list" || c.PTTL(ctx, keys[0]).Val() <= 0 {
				t.Fatalf("state key: type %s, PTTL %s; want valid state with a TTL", typ, c.PTTL(ctx, keys[0]).Val())
			}
		})
	}
}
