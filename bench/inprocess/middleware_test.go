package inprocess

import (
	"context"
	"github.com/ratekeeper/ratekeeper/bench/internal/peers"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/httprate"
	golimiter "github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	ulule "github.com/ulule/limiter/v3"
	ululestdlib "github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ululememory "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// recorder is a ResponseWriter reused for every request of one caller:
// it keeps the status and one header map, cleared before each request as
// a fresh response's would be empty, and drops the body.
type recorder struct {
	h    http.Header
	code int
}

func (r *recorder) Header() http.Header { return r.h }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return len(b), nil
}

// okHandler is the application behind every middleware.
var okHandler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

// The limits of the groups: admit never refuses; deny allows a few
// requests per hour per client, and every client is past them before the
// measurement starts.
const (
	admitRate  = 1 << 30
	denyRate   = 10
	ratePeriod = time.Hour
)

// group is one cell of the matrix: how many client addresses, and whether
// every request is refused.
type group struct {
	keys int
	deny bool
}

func (g group) String() string {
	s := "admit"
	if g.deny {
		s = "deny"
	}
	return s + "/keys=" + strconv.Itoa(g.keys)
}

func (g group) rate() int64 {
	if g.deny {
		return denyRate
	}
	return admitRate
}

var groups = []group{{1, false}, {10000, false}, {1, true}, {10000, true}}

// clients returns one GET per client address.
func clients(n int) []*http.Request {
	reqs := make([]*http.Request, n)
	for i := range reqs {
		r := httptest.NewRequest(http.MethodGet, "/api/items", nil)
		r.RemoteAddr = "10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255) + ":40000"
		reqs[i] = r
	}
	return reqs
}

// A middleware case builds the handler for a group; done, when not nil,
// releases what the middleware runs in the background.
type mwCase struct {
	name string
	make func(b *testing.B, g group) (h http.Handler, done func())
}

var cases = []mwCase{
	{"ratekeeper", func(b *testing.B, g group) (http.Handler, func()) {
		s, err := memstore.New(memstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		l, err := middleware.New(s, keyfunc.RemoteIP, store.Limit{Rate: g.rate(), Period: ratePeriod},
			middleware.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		return l.Handler(okHandler), nil
	}},
	{"go-limiter-httplimit", func(b *testing.B, g group) (http.Handler, func()) {
		s, err := memorystore.New(&memorystore.Config{Tokens: uint64(g.rate()), Interval: ratePeriod, SweepInterval: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		m, err := golimiter.NewMiddleware(s, peers.RemoteHost)
		if err != nil {
			b.Fatal(err)
		}
		return m.Handle(okHandler), func() { _ = s.Close(context.Background()) }
	}},
	{"httprate", func(_ *testing.B, g group) (http.Handler, func()) {
		mw := httprate.LimitBy(int(g.rate()), ratePeriod, func(r *http.Request) (string, error) {
			host, err := peers.RemoteHost(r)
			return httprate.CanonicalizeIP(host), err
		})
		return mw(okHandler), nil
	}},
	{"ulule", func(_ *testing.B, g group) (http.Handler, func()) {
		l := ulule.New(ululememory.NewStore(), ulule.Rate{Period: ratePeriod, Limit: g.rate()})
		return ululestdlib.NewMiddleware(l).Handler(okHandler), nil
	}},
	{"x-time-rate", func(_ *testing.B, g group) (http.Handler, func()) {
		return peers.NewXRate(rate.Limit(float64(g.rate())/ratePeriod.Seconds()), int(g.rate()), okHandler), nil
	}},
}

// BenchmarkMiddleware runs every middleware in every group: one request
// per iteration, spread over the group's client addresses, each caller
// with its own recorder. For the deny groups every address is over its
// limit before the timer starts, and a request that is not refused fails
// the benchmark (as an admitted one does in the admit groups).
func BenchmarkMiddleware(b *testing.B) {
	runMiddlewares(b, func(b *testing.B, h http.Handler, reqs []*http.Request, want int) int64 {
		var next atomic.Uint64
		var bad atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			w := &recorder{h: make(http.Header, 8)}
			i := int(next.Add(7919))
			for pb.Next() {
				i++
				if !w.serve(h, reqs[i%len(reqs)], want) {
					bad.Add(1)
				}
			}
		})
		return bad.Load()
	})
}

// BenchmarkMiddlewareOneCaller is BenchmarkMiddleware with one caller
// whatever -cpu says: at -cpu 2 it is the "1 caller" groups of the
// compare command, where the one goroutine has the second core for the
// garbage collector (and the runtime's other work) to itself, so that a
// middleware's allocations cost it less than at -cpu 1.
func BenchmarkMiddlewareOneCaller(b *testing.B) {
	runMiddlewares(b, func(b *testing.B, h http.Handler, reqs []*http.Request, want int) int64 {
		w := &recorder{h: make(http.Header, 8)}
		var bad int64
		i := 0
		for b.Loop() {
			if i++; i == len(reqs) {
				i = 0
			}
			if !w.serve(h, reqs[i], want) {
				bad++
			}
		}
		return bad
	})
}

// serve sends r through h on w, emptied first as a fresh response would
// be, and reports whether the answer had status want.
func (w *recorder) serve(h http.Handler, r *http.Request, want int) bool {
	clear(w.h)
	w.code = 0
	h.ServeHTTP(w, r)
	return max(w.code, http.StatusOK) == want // no status written: 200
}

// runMiddlewares runs loop for every middleware in every group, after
// one unmeasured pass over the group's clients (enough passes, in the
// deny groups, that every client is over its limit). loop makes b.N
// requests, each expecting status want, and returns how many got
// another status, which fails the benchmark.
func runMiddlewares(b *testing.B, loop func(b *testing.B, h http.Handler, reqs []*http.Request, want int) int64) {
	for _, g := range groups {
		reqs := clients(g.keys)
		want := http.StatusOK
		if g.deny {
			want = http.StatusTooManyRequests
		}
		for _, c := range cases {
			b.Run(g.String()+"/"+c.name, func(b *testing.B) {
				h, done := c.make(b, g)
				if done != nil {
					defer done()
				}
				warm := &recorder{h: http.Header{}}
				rounds := 1
				if g.deny {
					rounds = denyRate + 1
				}
				for range rounds {
					for _, r := range reqs {
						warm.serve(h, r, want)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				bad := loop(b, h, reqs, want)
				b.StopTimer()
				if bad != 0 {
					b.Fatalf("%d requests did not get %d", bad, want)
				}
			})
		}
	}
}
