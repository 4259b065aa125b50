package middleware_test

import (
	"encoding/json"
	"fmt"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
	"github.com/ratekeeper/ratekeeper/store/suppressed"
)

// line prints its arguments separated by spaces, without trailing blanks.
func line(a ...any) { fmt.Println(strings.TrimSpace(fmt.Sprintln(a...))) }

func hello(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello") }

// get sends a GET from a client address and returns the response.
func get(h http.Handler, path, client string, hdr ...string) *http.Response {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = client
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

// A limiter on a plain http.ServeMux: 3 requests per minute per client IP.
func Example_serveMux() {
	st, _ := memstore.New(memstore.Options{})
	lim, err := middleware.New(st, keyfunc.RemoteIP, store.Limit{Rate: 3, Period: time.Minute}, middleware.Options{Name: "api"})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /api/ping", lim.Handler(http.HandlerFunc(hello)))

	for range 4 {
		res := get(mux, "/api/ping", "203.0.113.7:51000")
		line(res.StatusCode, res.Header.Get("X-RateLimit-Remaining"), res.Header.Get("Retry-After"))
	}
	// Output:
	// 200 2
	// 200 1
	// 200 0
	// 429 0 20
}

// A route group on chi shares one policy; other routes are not limited.
func Example_chiGroup() {
	st, _ := memstore.New(memstore.Options{})
	lim, _ := middleware.New(st, keyfunc.RemoteIP, store.Limit{Rate: 1, Period: time.Hour}, middleware.Options{Name: "reports"})
	r := chi.NewRouter()
	r.Get("/healthz", hello)
	r.Group(func(r chi.Router) {
		r.Use(lim.Handler)
		r.Get("/reports/daily", hello)
		r.Get("/reports/weekly", hello)
	})
	for _, p := range []string{"/reports/daily", "/reports/weekly", "/healthz"} {
		res := get(r, p, "198.51.100.4:4000")
		line(p, res.StatusCode, res.Header.Get("Retry-After"))
	}
	// Output:
	// /reports/daily 200
	// /reports/weekly 429 3600
	// /healthz 200
}

// Anonymous clients are keyed by IP, authenticated ones by their verified
// subject, each tier with its own limits.
func Example_tiers() {
	st, _ := memstore.New(memstore.Options{})
	subject := func(r *http.Request) (string, error) { // stands in for keyfunc.JWTSubject
		if r.Header.Get("Authorization") == "Bearer alice-token" {
			return "alice", nil
		}
		return "", keyfunc.ErrNoIdentity
	}
	classify := middleware.AuthOptions{Subject: subject, Anonymous: keyfunc.RemoteIP}
	lim, err := middleware.NewTiered(st, classify, []limiter.Tier{
		{Name: "anonymous", Limits: []store.Limit{{Rate: 10, Period: time.Minute}}},
		{Name: "authenticated", Limits: []store.Limit{{Rate: 100, Period: time.Minute}}},
	}, middleware.Options{Name: "api"})
	if err != nil {
		panic(err)
	}
	h := lim.Handler(http.HandlerFunc(hello))
	anon := get(h, "/", "192.0.2.10:1234")
	auth := get(h, "/", "192.0.2.10:1234", "Authorization", "Bearer alice-token")
	fmt.Println("anonymous:", anon.Header.Get("X-RateLimit-Limit"), anon.Header.Get("X-RateLimit-Remaining"))
	fmt.Println("alice:", auth.Header.Get("X-RateLimit-Limit"), auth.Header.Get("X-RateLimit-Remaining"))
	// Output:
	// anonymous: 10 9
	// alice: 100 99
}

// A costly route takes several units of the same quota.
func ExampleLimiter_WithCost() {
	st, _ := memstore.New(memstore.Options{})
	ping, _ := middleware.New(st, keyfunc.RemoteIP, store.Limit{Rate: 10, Period: time.Minute}, middleware.Options{Name: "api"})
	search, err := ping.WithCost(5)
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/ping", ping.Handler(http.HandlerFunc(hello)))
	mux.Handle("/api/search", search.Handler(http.HandlerFunc(hello)))
	for _, p := range []string{"/api/search", "/api/ping", "/api/search"} {
		res := get(mux, p, "192.0.2.1:1")
		fmt.Println(p, res.StatusCode, res.Header.Get("X-RateLimit-Remaining"))
	}
	// Output:
	// /api/search 200 5
	// /api/ping 200 4
	// /api/search 429 4
}

// Health checks and CORS preflights bypass the limiter and get no headers.
func ExampleOptions_exempt() {
	st, _ := memstore.New(memstore.Options{})
	lim, _ := middleware.New(st, keyfunc.RemoteIP, store.Limit{Rate: 1, Period: time.Minute},
		middleware.Options{Exempt: []func(*http.Request) bool{middleware.ExemptPaths("/healthz"), func(r *http.Request) bool { return r.Method == http.MethodOptions }}})
	h := lim.Handler(http.HandlerFunc(hello))
	for range 2 {
		res := get(h, "/healthz", "192.0.2.1:1")
		fmt.Println(res.StatusCode, res.Header.Get("X-RateLimit-Limit") == "")
	}
	// Output:
	// 200 true
	// 200 true
}

// A new limit rolls out in dry-run: it counts and sets the X-RateLimit-*
// headers but never refuses, and sends no Retry-After.
func ExampleOptions_dryRun() {
	st, _ := memstore.New(memstore.Options{})
	lim, _ := middleware.New(st, keyfunc.RemoteIP, store.Limit{Rate: 1, Period: time.Minute}, middleware.Options{DryRun: true})
	h := lim.Handler(http.HandlerFunc(hello))
	for range 2 {
		res := get(h, "/", "192.0.2.1:1")
		line(res.StatusCode, res.Header.Get("X-RateLimit-Remaining"), res.Header.Get("Retry-After"))
	}
	// Output:
	// 200 0
	// 200 0
}

// The IETF RateLimit fields, one item per limit.
func ExampleOptions_headers() {
	st, _ := memstore.New(memstore.Options{})
	lim, _ := middleware.New(st, keyfunc.RemoteIP,
		store.Limit{Name: "minute", Algorithm: store.FixedWindow, Rate: 10, Period: time.Minute},
		middleware.Options{Headers: headers.Options{IETF: true, NoLegacy: true}, Limits: []store.Limit{store.Limit{Name: "hour", Algorithm: store.FixedWindow, Rate: 100, Period: time.Hour}}})
	res := get(lim.Handler(http.HandlerFunc(hello)), "/", "192.0.2.1:1")
	fmt.Println(res.Header.Get("RateLimit-Policy"))
	// Output:
	// "minute";q=10;w=60, "hour";q=100;w=3600
}

// Login brute-force protection: 3 attempts per minute; the 4th blocks the
// client for 15 minutes, and every attempt counts. No X-RateLimit-* state
// is sent, but a refusal carries Retry-After and the body states the wait.
func Example_loginAbuse() {
	st, _ := memstore.New(memstore.Options{})
	lim, err := middleware.New(st, keyfunc.RemoteIP,
		store.Limit{Name: "minute", Algorithm: store.SlidingWindowLog, Rate: 3, Period: time.Minute, Block: 15 * time.Minute},
		middleware.Options{
			Name:        "login",
			CountDenied: true,
			Headers:     headers.Options{Omit: true},
			FailureMode: limiter.FailClosed,
			Limits:      []store.Limit{store.Limit{Name: "day", Algorithm: store.SlidingWindowLog, Rate: 20, Period: 24 * time.Hour, Block: 24 * time.Hour}},
		})
	if err != nil {
		panic(err)
	}
	h := lim.Handler(http.HandlerFunc(hello))
	for range 5 {
		res := get(h, "/login", "198.51.100.23:7000")
		body, _ := io.ReadAll(res.Body)
		var b struct {
			Error string `json:"error"`
			Scope string `json:"scope"`
			Retry int64  `json:"retry_after"`
		}
		if res.StatusCode != http.StatusOK {
			_ = json.Unmarshal(body, &b)
			line(res.StatusCode, res.Header.Get("Retry-After"), b.Error, b.Scope, b.Retry)
			continue
		}
		line(res.StatusCode, string(body))
	}
	// Output:
	// 200 hello
	// 200 hello
	// 200 hello
	// 429 900 blocked minute 900
	// 429 900 blocked minute 900
}

// De-duplication: a retried request carrying the same idempotency key is
// admitted again without using more quota.
func ExampleOptions_dedup() {
	st, _ := memstore.New(memstore.Options{})
	lim, _ := middleware.New(st, keyfunc.RemoteIP, store.Limit{Algorithm: store.SlidingWindowLog, Rate: 2, Period: time.Minute},
		middleware.Options{
			Dedup:        func(r *http.Request) string { return r.Header.Get("Idempotency-Key") },
			DedupReplays: 3,
			DedupWindow:  time.Minute,
		})
	h := lim.Handler(http.HandlerFunc(hello))
	for _, id := range []string{"a", "a", "a", "b", "c"} {
		res := get(h, "/orders", "192.0.2.8:1", "Idempotency-Key", id)
		line(id, res.StatusCode, res.Header.Get("X-RateLimit-Remaining"))
	}
	// Output:
	// a 200 1
	// a 200 1
	// a 200 1
	// b 200 0
	// c 429 0
}

// A limit on an identity known only inside the handler: the e-mail
// address of a verification request, 2 per hour. Enforce writes the same
// headers and 429 the middleware would.
func ExampleLimiter_Allow() {
	st, _ := memstore.New(memstore.Options{})
	verify, err := middleware.New(st, nil, store.Limit{Rate: 2, Period: time.Hour}, middleware.Options{Name: "verify"})
	if err != nil {
		panic(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := verify.Allow(r.Context(), r.FormValue("email"))
		if err != nil {
			http.Error(w, "try again later", http.StatusServiceUnavailable)
			return
		}
		if !verify.Enforce(w, r, d) {
			return // refused: the 429 is written
		}
		fmt.Fprint(w, "sent")
	})
	for range 3 {
		res := get(h, "/verify?email=ann@example.com", "192.0.2.1:1")
		line(res.StatusCode, res.Header.Get("X-RateLimit-Remaining"), res.Header.Get("Retry-After"))
	}
	// Output:
	// 200 1
	// 200 0
	// 429 0 1800
}

// The wrapped handler reads the decision from the request's context.
func ExampleDecisionFrom() {
	st, _ := memstore.New(memstore.Options{})
	lim, _ := middleware.New(st, keyfunc.RemoteIP, store.Limit{Rate: 5, Period: time.Minute}, middleware.Options{Name: "api"})
	h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, ok := middleware.DecisionFrom(r.Context()); ok {
			fmt.Fprintf(w, "%s: %d of %d left", d.Policy, d.Remaining, d.Capacity)
		}
	}))
	res := get(h, "/", "192.0.2.1:1")
	body, _ := io.ReadAll(res.Body)
	fmt.Println(string(body))
	// Output:
	// api: 4 of 5 left
}

// The suppressed strategy sheds load above a soft limit instead of
// refusing everything at once: 4 requests per minute are admitted
// outright; past that each request is refused with a probability, the
// suppression factor, that grows with the excess (a request is admitted
// when its random draw is at least the factor), and from the hard limit
// of 8 every request is refused. Responses carry the factor. The store's
// clock and random draws are fixed here so that the output is stable; by
// default they are the system clock and math/rand/v2.
func Example_suppressed() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	draws := []float64{0.5, 0.5, 0.5, 0.5, 0.1, 0.6, 0.3, 0.9, 0.8, 0.95, 0.4, 0.99}
	mem, _ := memstore.New(memstore.Options{
		Clock: func() time.Time { return now },
		Rand: func() float64 {
			u := draws[0]
			draws = draws[1:]
			return u
		},
	})
	// The counting limit is the hard limit; the soft one is half of it.
	st, err := suppressed.New(mem, suppressed.Options{})
	if err != nil {
		panic(err)
	}
	lim, err := middleware.New(st, keyfunc.RemoteIP,
		store.Limit{Algorithm: store.SlidingWindowCounter, Rate: 8, Period: time.Minute},
		middleware.Options{Name: "search", Headers: headers.Options{Suppression: true}})
	if err != nil {
		panic(err)
	}
	h := lim.Handler(http.HandlerFunc(hello))
	for range 12 {
		res := get(h, "/search", "203.0.113.9:4000")
		line(res.StatusCode, res.Header.Get("X-RateLimit-Limit"), res.Header.Get("X-RateLimit-Remaining"), res.Header.Get("X-RateLimit-Suppression"))
		now = now.Add(time.Second)
	}
	// Output:
	// 200 8 7 0
	// 200 8 6 0
	// 200 8 5 0
	// 200 8 4 0
	// 429 8 4 0.2
	// 200 8 3 0.333333
	// 429 8 3 0.571429
	// 200 8 2 0.625
	// 200 8 1 0.777778
	// 200 8 0 0.9
	// 429 8 0 1
	// 429 8 0 1
}
