package middleware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

// holdingHandler answers 200 once release is closed, telling entered when
// it starts.
func holdingHandler(entered chan<- struct{}, release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	})
}

// inFlightLimiter builds a limiter keyed by a constant with a cap of max
// and the given rate limit (the zero Limit for none).
func inFlightLimiter(t *testing.T, limit store.Limit, max int64, o Options) *Limiter {
	t.Helper()
	o.Name = "api"
	o.InFlight = limiter.InFlight{Max: max}
	o.Logger = quiet
	l, err := New(mustMem(t), keyfunc.Constant("everyone"), limit, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

func get(h http.Handler) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	return w
}

// TestInFlightRefusal: with one request running under a cap of 1, the
// next is refused with 429, Retry-After: 1, the JSON body and no
// X-RateLimit-* field; once the first returns, a request is served with
// its rate-limit headers.
func TestInFlightRefusal(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
	}{{"default 429", 0}, {"configured 503", http.StatusServiceUnavailable}} {
		t.Run(c.name, func(t *testing.T) {
			l := inFlightLimiter(t, store.Limit{Rate: 100, Period: time.Minute}, 1, Options{InFlightStatus: c.status})
			entered, release := make(chan struct{}), make(chan struct{})
			h := l.Handler(holdingHandler(entered, release))
			done := make(chan *httptest.ResponseRecorder)
			go func() { done <- get(h) }()
			<-entered
			w := get(h)
			want := cmpOr0(c.status, http.StatusTooManyRequests)
			if w.Code != want {
				t.Fatalf("second request: got status %d, want %d", w.Code, want)
			}
			if got := w.Header().Get("Retry-After"); got != "1" {
				t.Errorf("Retry-After: got %q, want \"1\"", got)
			}
			if got := w.Header().Get("X-RateLimit-Remaining"); got != "" {
				t.Errorf("X-RateLimit-Remaining on an in-flight refusal: got %q, want none", got)
			}
			body := `{"error":"too_many_in_flight","message":"Too many requests in progress. Try again in 1 second.","retry_after":1,"in_flight_limit":1,"policy":"api"}` + "\n"
			if w.Body.String() != body || w.Header().Get("Content-Type") != "application/json" {
				t.Errorf("body: got %q (%s), want %q", w.Body.String(), w.Header().Get("Content-Type"), body)
			}
			close(release)
			if first := <-done; first.Code != http.StatusOK {
				t.Fatalf("first request: got %d, want 200", first.Code)
			}
			go func() { <-entered }()
			w = get(h)
			if w.Code != http.StatusOK || w.Header().Get("X-RateLimit-Remaining") != "98" {
				t.Fatalf("after the first returned: got %d with remaining %q, want 200 and 98", w.Code, w.Header().Get("X-RateLimit-Remaining"))
			}
		})
	}
}

func cmpOr0(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// TestInFlightPanicReleases: a handler that panics gives its slot back.
func TestInFlightPanicReleases(t *testing.T) {
	l := inFlightLimiter(t, store.Limit{}, 1, Options{})
	panicking := true
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if panicking {
			panic("handler bug")
		}
	}))
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the handler's panic did not propagate")
			}
		}()
		get(h)
	}()
	panicking = false
	if w := get(h); w.Code != http.StatusOK {
		t.Fatalf("after a panic: got %d, want 200 (the slot given back)", w.Code)
	}
}

// TestInFlightClientGoneReleases: a request whose client went away gives
// its slot back when its handler returns.
func TestInFlightClientGoneReleases(t *testing.T) {
	l := inFlightLimiter(t, store.Limit{}, 1, Options{})
	entered := make(chan struct{}, 1)
	h := l.Handler(holdingHandler(entered, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
		close(done)
	}()
	<-entered
	if w := get(h); w.Code != http.StatusTooManyRequests {
		t.Fatalf("while the first runs: got %d, want 429", w.Code)
	}
	cancel()
	<-done
	go func() { <-entered }()
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2() // the handler returns at once
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx2))
	if w.Code != http.StatusOK {
		t.Fatalf("after the client went away: got %d, want 200", w.Code)
	}
}

// TestInFlightAloneSetsNoRateHeaders: a cap without rate limits serves
// without X-RateLimit-* fields and never refuses by rate.
func TestInFlightAloneSetsNoRateHeaders(t *testing.T) {
	l := inFlightLimiter(t, store.Limit{}, 2, Options{})
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := range 50 {
		w := get(h)
		if w.Code != http.StatusOK || len(w.Header()) != 0 {
			t.Fatalf("request %d: got %d with headers %v, want 200 and none", i, w.Code, w.Header())
		}
	}
}

// TestInFlightRateRefusalReleases: a request the rate limit refuses gives
// its slot back, so the next refusal is the rate limit's again.
func TestInFlightRateRefusalReleases(t *testing.T) {
	l := inFlightLimiter(t, store.Limit{Rate: 1, Period: time.Hour}, 1, Options{})
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	if w := get(h); w.Code != http.StatusOK {
		t.Fatalf("first: got %d, want 200", w.Code)
	}
	for i := range 3 {
		w := get(h)
		if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"rate_limit_exceeded"`) {
			t.Fatalf("refusal %d: got %d %s, want the rate limit's 429", i, w.Code, w.Body.String())
		}
	}
}

func TestInFlightOptionsErrors(t *testing.T) {
	lim := store.Limit{Rate: 1, Period: time.Second}
	for _, c := range []struct {
		name  string
		limit store.Limit
		o     Options
		want  string
	}{
		{"status 500", lim, Options{InFlight: limiter.InFlight{Max: 1}, InFlightStatus: 500}, "Options.InFlightStatus must be 429 or 503"},
		{"status without a cap", lim, Options{InFlightStatus: 503}, "Options.InFlightStatus is set but Options.InFlight.Max is not"},
		{"zero limit without a cap", store.Limit{}, Options{}, "rate"},
		{"short lease", lim, Options{InFlight: limiter.InFlight{Max: 1, Lease: time.Millisecond}}, "Options.InFlight.Lease"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.o.Logger = quiet
			_, err := New(mustMem(t), keyfunc.Constant("x"), c.limit, c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
