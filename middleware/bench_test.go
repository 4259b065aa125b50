package middleware

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// nopWriter is a ResponseWriter that keeps one header map and discards the
// body, so benchmarks measure the limiter rather than the recorder.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(int)             {}

var nopHandler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

// clients returns n requests from n distinct client addresses.
func clients(n int) []*http.Request {
	reqs := make([]*http.Request, n)
	for i := range reqs {
		r := httptest.NewRequest(http.MethodGet, "/api/ping", nil)
		r.RemoteAddr = "10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255) + ":40000"
		reqs[i] = r
	}
	return reqs
}

func benchLimiter(b *testing.B, alg store.Algorithm, opts ...Options) http.Handler {
	b.Helper()
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	l, err := New(st, keyfunc.RemoteIP, store.Limit{Algorithm: alg, Rate: 1 << 20, Period: time.Minute}, quietly(opts))
	if err != nil {
		b.Fatal(err)
	}
	return l.Handler(nopHandler)
}

// BenchmarkMiddleware measures the whole hot path on the memory store:
// key from RemoteAddr, one decision, headers, next. 10,000 client
// addresses are spread over the parallel callers.
func BenchmarkMiddleware(b *testing.B) {
	for _, alg := range store.Algorithms {
		b.Run(alg.String(), func(b *testing.B) {
			serveParallel(b, benchLimiter(b, alg), clients(10000))
		})
	}
}

// serveParallel serves reqs through h from the parallel callers, each
// with its own writer, starting at spread-out requests.
func serveParallel(b *testing.B, h http.Handler, reqs []*http.Request) {
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := &nopWriter{h: http.Header{}}
		i := int(next.Add(7919))
		for pb.Next() {
			i++
			h.ServeHTTP(w, reqs[i%len(reqs)])
		}
	})
}

// BenchmarkBaseline is the handler without the limiter, for ratios.
func BenchmarkBaseline(b *testing.B) {
	reqs := clients(10000)
	var next atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := &nopWriter{h: http.Header{}}
		i := int(next.Add(7919))
		for pb.Next() {
			i++
			nopHandler.ServeHTTP(w, reqs[i%len(reqs)])
		}
	})
}

// TestHotPathAllocations pins the allocation count of an admitted request
// on the memory store, so a regression shows up in CI rather than in a
// profile.
func TestHotPathAllocations(t *testing.T) {
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(st, keyfunc.RemoteIP, store.Limit{Rate: 1 << 30, Period: time.Hour}, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	h := l.Handler(nopHandler)
	r := httptest.NewRequest(http.MethodGet, "/api/ping", nil)
	r.RemoteAddr = "192.0.2.1:5000"
	w := &nopWriter{h: http.Header{}}
	h.ServeHTTP(w, r) // create the key
	allocs := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, r) })
	t.Logf("allocations per admitted request: %.1f", allocs)
	// One, for the request's light state: the decision's context, the
	// header values and the memory of the store key (the policy's name
	// and the identity), which the memory store copies only for a new
	// key; the request goes on unchanged.
	const budget = 1
	if allocs > budget {
		t.Fatalf("got %.1f allocations per request, want <= %d", allocs, budget)
	}
}

// BenchmarkStack measures a stack on the memory store, the shape of a
// route group's limit over a per-client one: the client's own limit and a
// route-wide limit, decided as one, 10,000 client addresses spread over
// the parallel callers.
func BenchmarkStack(b *testing.B) {
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	perClient, err := New(st, keyfunc.RemoteIP, store.Limit{Rate: 1 << 20, Period: time.Minute}, Options{Name: "client", Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	perRoute, err := New(st, keyfunc.Constant("api"), store.Limit{Rate: 1 << 30, Period: time.Minute}, Options{Name: "route", Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	stack, err := NewStack(perClient, perRoute)
	if err != nil {
		b.Fatal(err)
	}
	serveParallel(b, stack(nopHandler), clients(10000))
}

// TestStackAllocations pins the allocations of an admitted request through
// a stack of two limiters on the memory store, each of which attaches its
// decision to the request (a stack always does): the two states, the
// decisions the core returns, the store requests and the stacked
// decision's parts, the two store keys, and the requests the core is
// handed.
func TestStackAllocations(t *testing.T) {
	st := mustMem(t)
	perClient := mustNew(t, st, keyfunc.RemoteIP, store.Limit{Rate: 1 << 30, Period: time.Hour}, Options{Name: "client", Logger: quiet})
	perRoute := mustNew(t, st, keyfunc.Constant("api"), store.Limit{Rate: 1 << 30, Period: time.Hour}, Options{Name: "route", Logger: quiet})
	stack, err := NewStack(perClient, perRoute)
	if err != nil {
		t.Fatal(err)
	}
	var seen bool
	h := stack(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, seen = DecisionFrom(r.Context())
	}))
	r := httptest.NewRequest(http.MethodGet, "/api/ping", nil)
	r.RemoteAddr = "192.0.2.1:5000"
	w := &nopWriter{h: http.Header{}}
	h.ServeHTTP(w, r) // create the keys
	if !seen {
		t.Fatal("no decision reached the handler")
	}
	allocs := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, r) })
	t.Logf("allocations per admitted stacked request: %.1f", allocs)
	const budget = 10
	if allocs > budget {
		t.Fatalf("got %.1f allocations per request, want <= %d", allocs, budget)
	}
}
