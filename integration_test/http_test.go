package integration

import (
	"context"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// constKey keys every request as k.
func constKey(k string) keyfunc.KeyFunc {
	return func(*http.Request) (string, error) { return k, nil }
}

// okHandler is the wrapped application: it answers 200 "ok".
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("ok"))
})

// redisStore is the Redis store with every capability it implements and
// the state-key listing the cluster tests use to find a decision's slot.
type redisStore interface {
	store.MultiStore
	store.OverrideStore
	store.BlockLister
	store.EvictionPolicyReporter
	store.Refunder
	store.NodeLocator
	StateKeys(req store.Request) ([]string, error)
}

// newStore returns a Redis store over c under prefix with a per-call
// timeout generous enough for a loaded machine under the race detector;
// the fault tests use newStoreWith and the default timeout instead.
func newStore(t testing.TB, c redis.UniversalClient, prefix string) redisStore {
	t.Helper()
	return newStoreWith(t, c, redisstore.Options{Prefix: prefix, Timeout: 10 * time.Second})
}

// newStoreWith returns a Redis store over c with opts.
func newStoreWith(t testing.TB, c redis.UniversalClient, opts redisstore.Options) redisStore {
	t.Helper()
	s, err := redisstore.New(c, opts)
	if err != nil {
		t.Fatalf("redisstore.New: %v", err)
	}
	return s.(redisStore)
}

// checkStore fails the test with the store's own error when a read-only
// decision for lim fails, so that a broken store reads as such rather than
// as a wrong status code.
func checkStore(t testing.TB, s store.Store, lim store.Limit) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Peek(ctx, store.Request{Key: "check-store", Limits: []store.Limit{lim}}); err != nil {
		t.Fatalf("peek %s: %v", lim.Algorithm, err)
	}
}

// newHandler builds a limiter over s and returns it wrapped around okHandler.
func newHandler(t testing.TB, s store.Store, key string, limit store.Limit, opts ...middleware.Options) http.Handler {
	t.Helper()
	if len(opts) > 1 {
		t.Fatalf("newHandler: got %d Options, want at most one", len(opts))
	}
	var o middleware.Options
	if len(opts) == 1 {
		o = opts[0]
	}
	l, err := middleware.New(s, constKey(key), limit, o)
	if err != nil {
		t.Fatalf("middleware.New: %v", err)
	}
	return l.Handler(okHandler)
}

// serve sends one GET through h and returns the recorded response.
func serve(h http.Handler) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	return rec
}

// remaining parses X-RateLimit-Remaining; ok is false when it is absent.
func remaining(t testing.TB, rec *httptest.ResponseRecorder) (n int64, ok bool) {
	t.Helper()
	v := rec.Header().Get("X-Ratelimit-Remaining")
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("X-RateLimit-Remaining %q: %v", v, err)
	}
	return n, true
}

// burst sends n requests at once, request i through handlers[i%len], all
// goroutines released together, and returns the responses in order.
func burst(handlers []http.Handler, n int) []*httptest.ResponseRecorder {
	recs := make([]*httptest.ResponseRecorder, n)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			rec := httptest.NewRecorder()
			ready.Done()
			<-start
			handlers[i%len(handlers)].ServeHTTP(rec, req)
			recs[i] = rec
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	return recs
}

// redisNow returns the Redis server's clock.
func redisNow(t testing.TB, c redis.UniversalClient) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now
}

// awayFromWindowEdge waits, when needed, until the next multiple of period
// on the Redis clock is at least margin away, so that a burst cannot
// straddle the boundary of an aligned window.
func awayFromWindowEdge(t testing.TB, c redis.UniversalClient, period, margin time.Duration) {
	t.Helper()
	now := redisNow(t, c)
	left := period - time.Duration(now.UnixNano())%period
	if left < margin {
		time.Sleep(left + 10*time.Millisecond)
	}
}

// eventLog is a middleware observer that counts outcomes.
type eventLog struct {
	mu       sync.Mutex
	outcomes map[limiter.Outcome]int
	failed   int // store calls made that failed (not skipped by the breaker)
	skipped  int // requests for which the breaker skipped the store
}

func (l *eventLog) Observe(e limiter.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.outcomes == nil {
		l.outcomes = make(map[limiter.Outcome]int)
	}
	l.outcomes[e.Outcome]++
	switch {
	case e.Skipped:
		l.skipped++
	case e.Err != nil:
		l.failed++
	}
}

// counts returns the number of store decisions (allowed + limited), of
// store calls that failed, and of requests the breaker kept from the store.
func (l *eventLog) counts() (decided, failed, skipped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.outcomes[limiter.OutcomeAllowed] + l.outcomes[limiter.OutcomeLimited], l.failed, l.skipped
}
