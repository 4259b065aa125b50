package middleware

import (
	"context"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// withClock sets the clock used for reset headers and the breaker (default
// time.Now); the store keeps its own clock.
func withClock(now func() time.Time) Options { return Options{Clock: now} }

// quietly returns the one Options of opts (or none), logging to quiet
// unless it names a logger.
func quietly(opts []Options) Options {
	var o Options
	if len(opts) > 1 {
		panic("more than one Options")
	}
	if len(opts) == 1 {
		o = opts[0]
	}
	if o.Logger == nil {
		o.Logger = quiet
	}
	return o
}

// funcStore is a Store whose Take is a function, for failure injection.
type funcStore struct {
	calls atomic.Int64
	take  func(ctx context.Context, req store.Request) (store.Decision, error)
	reset func(ctx context.Context, req store.Request) error
}

func (s *funcStore) Take(ctx context.Context, req store.Request) (store.Decision, error) {
	s.calls.Add(1)
	return s.take(ctx, req)
}

func (s *funcStore) Peek(ctx context.Context, req store.Request) (store.Decision, error) {
	return s.take(ctx, req)
}

func (s *funcStore) Reset(ctx context.Context, req store.Request) error {
	if s.reset == nil {
		return nil
	}
	return s.reset(ctx, req)
}

// recordingStore records the requests it sees and answers with decide.
type recordingStore struct {
	mu     sync.Mutex
	reqs   []store.Request
	decide func(store.Request) store.Decision
}

func (s *recordingStore) Take(_ context.Context, req store.Request) (store.Decision, error) {
	if err := req.Validate(); err != nil {
		return store.Decision{}, err
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	if s.decide == nil {
		return store.Decision{Allowed: true, Capacity: req.Limits[0].Capacity(), Remaining: 1}, nil
	}
	return s.decide(req), nil
}

func (s *recordingStore) Peek(ctx context.Context, req store.Request) (store.Decision, error) {
	return s.Take(ctx, req)
}

func (s *recordingStore) Reset(context.Context, store.Request) error { return nil }

func (s *recordingStore) last(t *testing.T) store.Request {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatal("store was not called")
	}
	return s.reqs[len(s.reqs)-1]
}

func (s *recordingStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func (s *recordingStore) clear() {
	s.mu.Lock()
	s.reqs = nil
	s.mu.Unlock()
}

type recObserver struct {
	mu     sync.Mutex
	events []limiter.Event
}

func (o *recObserver) Observe(e limiter.Event) {
	o.mu.Lock()
	o.events = append(o.events, e)
	o.mu.Unlock()
}

func (o *recObserver) outcomes() []limiter.Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []limiter.Outcome
	for _, e := range o.events {
		out = append(out, e.Outcome)
	}
	return out
}

func constKey(k string) keyfunc.KeyFunc {
	return func(*http.Request) (string, error) { return k, nil }
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "ok")
})

// mustNew builds a limiter with the options of opts (at most one), logging
// to quiet unless they name a logger.
func mustNew(t testing.TB, s store.Store, k keyfunc.KeyFunc, l store.Limit, opts ...Options) *Limiter {
	t.Helper()
	lim, err := New(s, k, l, quietly(opts))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return lim
}

func mustMem(t testing.TB) store.Store {
	t.Helper()
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func do(h http.Handler) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/ping", nil))
	return rec
}

func request(method, path, remote string, hdr ...string) *http.Request {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	return r
}

func serveReq(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// classifyFunc adapts a function to a Classifier.
type classifyFunc func(r *http.Request) (tier, identity string, err error)

func (f classifyFunc) Classify(r *http.Request) (string, string, error) { return f(r) }
