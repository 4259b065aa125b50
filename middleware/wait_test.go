package middleware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// waitStores returns, by name, a function that builds n stores sharing
// their state: one memory store n times, or n Redis stores on one Redis
// (skipped when no redis-server can start, unless it is required).
func waitStores() map[string]func(t *testing.T, n int) []store.Store {
	return map[string]func(t *testing.T, n int) []store.Store{
		"memory": func(t *testing.T, n int) []store.Store {
			st := mustMem(t)
			out := make([]store.Store, n)
			for i := range out {
				out[i] = st
			}
			return out
		},
		"redis": func(t *testing.T, n int) []store.Store {
			srv := redistest.Require(t)
			out := make([]store.Store, n)
			for i := range out {
				c := redis.NewClient(&redis.Options{Addr: srv.Addr})
				t.Cleanup(func() { _ = c.Close() })
				s, err := redisstore.New(c, redisstore.Options{Prefix: "wait-" + t.Name()})
				if err != nil {
					t.Fatal(err)
				}
				out[i] = s
			}
			return out
		},
	}
}

// waitRoutes returns one route per store, each behind its own limiter of
// the policy "api": alice may make one request per 100ms and wait up to
// 250ms for her turn. The handler notes when it runs.
func waitRoutes(t *testing.T, stores []store.Store, ran func(time.Time)) []http.Handler {
	t.Helper()
	var out []http.Handler
	for _, s := range stores {
		l := mustNew(t, s, constKey("alice"), store.Limit{Rate: 1, Period: 100 * time.Millisecond}, Options{Name: "api", MaxWait: 250 * time.Millisecond})
		out = append(out, l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ran(time.Now())
			w.WriteHeader(http.StatusOK)
		})))
	}
	return out
}

// TestMaxWaitDelaysInsteadOfRefusing: four requests at once through two
// instances of a route (one memory store, or two Redis stores on one
// Redis): three are served in turn, about 100ms apart, with headers that
// describe the limit as it stood when they ran, and the fourth, whose turn
// is beyond MaxWait, is refused at once.
func TestMaxWaitDelaysInsteadOfRefusing(t *testing.T) {
	for name, stores := range waitStores() {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var ran []time.Time
			routes := waitRoutes(t, stores(t, 2), func(at time.Time) { mu.Lock(); ran = append(ran, at); mu.Unlock() })
			recs := make([]*httptest.ResponseRecorder, 4)
			start := time.Now()
			var wg sync.WaitGroup
			for i := range recs {
				wg.Go(func() { recs[i] = do(routes[i%2]) })
			}
			wg.Wait()
			refused := 0
			for i, rec := range recs {
				switch rec.Code {
				case http.StatusTooManyRequests:
					refused++
				case http.StatusOK:
					if got := rec.Header().Get("X-RateLimit-Remaining"); got != "0" {
						t.Errorf("request %d: X-RateLimit-Remaining %q, want 0", i, got)
					}
				default:
					t.Errorf("request %d: status %d, want 200 or 429", i, rec.Code)
				}
			}
			slices.SortFunc(ran, func(a, b time.Time) int { return a.Compare(b) })
			if refused != 1 || len(ran) != 3 {
				t.Fatalf("got %d refused and %d served, want 1 and 3", refused, len(ran))
			}
			// Turns are 100ms apart from the first: a served request may
			// run late on a loaded machine, never early.
			for i := 1; i < len(ran); i++ {
				if at := ran[i].Sub(start); at < time.Duration(i)*100*time.Millisecond-10*time.Millisecond {
					t.Errorf("served request %d ran %s after the start, want at least %dms", i, at, i*100)
				}
			}
		})
	}
}

// TestMaxWaitClientGone: a client that goes away while waiting gives its
// place back and its handler never runs: the next request's turn is the
// one it had.
func TestMaxWaitClientGone(t *testing.T) {
	for name, stores := range waitStores() {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var ran []time.Time
			routes := waitRoutes(t, stores(t, 2), func(at time.Time) { mu.Lock(); ran = append(ran, at); mu.Unlock() })
			if rec := do(routes[0]); rec.Code != http.StatusOK {
				t.Fatalf("first: status %d, want 200", rec.Code)
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			rec := serveReq(routes[1], httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
			mu.Lock()
			served := len(ran)
			mu.Unlock()
			if served != 1 || rec.Body.Len() != 0 {
				t.Fatalf("the client that went away: handler runs %d, body %q, want 1 (the first's) and empty", served, rec.Body.String())
			}
			if rec := do(routes[0]); rec.Code != http.StatusOK {
				t.Fatalf("next: status %d, want 200", rec.Code)
			}
			// The place given back is the turn 100ms after the first's;
			// had it been kept, the next turn would be 200ms after it, and
			// a turn may run late on a loaded machine, never early.
			mu.Lock()
			defer mu.Unlock()
			if len(ran) != 2 {
				t.Fatalf("handler runs %d, want 2", len(ran))
			}
			if at := ran[1].Sub(ran[0]); at >= 190*time.Millisecond {
				t.Errorf("next ran %s after the first, want about 100ms (the place given back), not 200ms", at)
			}
		})
	}
}
