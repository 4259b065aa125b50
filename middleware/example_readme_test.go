package middleware_test

// The README's snippets, compiled and, where they can run on the memory
// store, checked against their output.

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// The README's net/http quick start: a Redis store shared by every
// replica, one policy of 10 requests per minute per client IP, and a health
// check outside it. It needs Redis and listens on :8080, so it is compiled
// but not run.
func Example_quickStart() {
	// snippet:quickstart-stdlib
	healthz := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }
	ping := func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "pong\n") }

	// ContextTimeoutEnabled: the client cuts socket I/O at each call's budget itself.
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	st, err := redisstore.New(client, redisstore.Options{}) // one instance, or tests: memstore.New(memstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	api, err := middleware.New(st, keyfunc.RemoteIP,
		store.Limit{Rate: 10, Period: time.Minute, Burst: 10}, middleware.Options{Name: "api"})
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)                          // not wrapped: never limited
	mux.Handle("GET /api/ping", api.Handler(http.HandlerFunc(ping))) // 10 per minute per client IP
	log.Fatal(http.ListenAndServe(":8080", mux))
	// end snippet
}

// The README's chi quick start: a group shares the "api" quota, and a
// costly route outside it takes 5 units of the same quota.
func Example_quickStartChi() {
	healthz := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }
	ping := func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "pong\n") }
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		log.Fatal(err)
	}

	// snippet:quickstart-chi
	doSearch := func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "results\n") }

	api, err := middleware.New(st, keyfunc.RemoteIP,
		store.Limit{Rate: 10, Period: time.Minute, Burst: 10}, middleware.Options{Name: "api"})
	if err != nil {
		log.Fatal(err)
	}
	search, err := api.WithCost(5) // the same quota, 5 units per request
	if err != nil {
		log.Fatal(err)
	}

	r := chi.NewRouter()
	r.Get("/healthz", healthz) // not limited
	r.Group(func(r chi.Router) {
		r.Use(api.Handler) // every route of the group shares the "api" quota
		r.Get("/api/ping", ping)
	})
	r.With(search.Handler).Get("/api/search", doSearch)
	// end snippet

	for _, p := range []string{"/api/search", "/api/ping", "/api/search", "/healthz"} {
		res := get(r, p, "203.0.113.7:51000")
		line(p, res.StatusCode, res.Header.Get("X-RateLimit-Remaining"), res.Header.Get("Retry-After"))
	}
	// Output:
	// /api/search 200 5
	// /api/ping 200 4
	// /api/search 429 4 6
	// /healthz 204
}

// Tiers with a verified JWT subject: the Trusted hook receives the subject
// as the token names it, and an invalid token is anonymous.
func Example_tiersJWT() {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		log.Fatal(err)
	}
	pub := &priv.PublicKey
	st, _ := memstore.New(memstore.Options{})

	// snippet:tiers-jwt
	subject, err := keyfunc.JWTSubject(keyfunc.JWTOptions{Algorithms: []string{"RS256"}, Key: pub})
	if err != nil {
		log.Fatal(err)
	}
	classify := middleware.AuthOptions{
		Subject:   subject,
		Anonymous: keyfunc.RemoteIP,
		Trusted:   func(subject string, _ *http.Request) bool { return subject == "ops-bot" },
	}
	lim, err := middleware.NewTiered(st, classify, []limiter.Tier{
		{Name: "anonymous", Limits: []store.Limit{{Rate: 10, Period: time.Minute}}},
		{Name: "authenticated", Limits: []store.Limit{{Rate: 100, Period: time.Minute}}},
		{Name: "trusted", Unlimited: true},
	}, middleware.Options{Name: "api", Headers: headers.Options{Bucket: true}})
	if err != nil {
		log.Fatal(err)
	}
	// end snippet

	token := func(sub string) string {
		t, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
			Subject: sub, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
		}).SignedString(priv)
		if err != nil {
			log.Fatal(err)
		}
		return "Bearer " + t
	}
	h := lim.Handler(http.HandlerFunc(hello))
	for _, auth := range []string{"", token("alice"), token("ops-bot"), token("alice") + "x"} {
		res := get(h, "/api/ping", "192.0.2.10:1234", "Authorization", auth)
		line(res.StatusCode, res.Header.Get("X-RateLimit-Tier"), res.Header.Get("X-RateLimit-Limit"))
	}
	// Output:
	// 200 anonymous 10
	// 200 authenticated 100
	// 200
	// 200 anonymous 10
}

// The 429 of a tiered policy names the policy and its tier.
func Example_refusalBody() {
	st, _ := memstore.New(memstore.Options{})
	anonymous := middleware.AuthOptions{
		Subject:   func(*http.Request) (string, error) { return "", keyfunc.ErrNoIdentity },
		Anonymous: keyfunc.RemoteIP,
	}
	lim, err := middleware.NewTiered(st, anonymous, []limiter.Tier{
		{Name: "anonymous", Limits: []store.Limit{{Rate: 1, Period: 20 * time.Second}}},
		{Name: "authenticated", Limits: []store.Limit{{Rate: 100, Period: time.Minute}}},
	}, middleware.Options{Name: "api"})
	if err != nil {
		log.Fatal(err)
	}
	h := lim.Handler(http.HandlerFunc(hello))
	get(h, "/api/ping", "192.0.2.10:1234")
	res := get(h, "/api/ping", "192.0.2.10:1234")
	var body map[string]any
	_ = json.NewDecoder(res.Body).Decode(&body)
	fmt.Println(res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Retry-After"))
	fmt.Println(body["error"], body["message"], body["retry_after"], body["limit"], body["remaining"], body["policy"])
	// Output:
	// 429 application/json 20
	// rate_limit_exceeded Too many requests. Try again in 20 seconds. 20 1 0 api/anonymous
}

// A costly route inside a group that already uses the quota is charged
// once, at the larger cost: the group's limiter takes its unit, the
// route's limiter the rest. When the rest is refused, the group's unit
// stays spent and Retry-After names the time when a retry of the whole
// request fits.
func Example_costInsideGroup() {
	st, _ := memstore.New(memstore.Options{})
	api, _ := middleware.New(st, keyfunc.RemoteIP, store.Limit{Rate: 10, Period: time.Minute}, middleware.Options{Name: "api"})
	search, err := api.WithCost(5)
	if err != nil {
		log.Fatal(err)
	}
	r := chi.NewRouter()
	r.Group(func(r chi.Router) {
		r.Use(api.Handler)
		r.Get("/api/ping", hello)
		r.With(search.Handler).Get("/api/search", hello)
	})
	for _, p := range []string{"/api/search", "/api/ping", "/api/ping", "/api/ping", "/api/search"} {
		res := get(r, p, "192.0.2.1:1")
		line(p, res.StatusCode, res.Header.Get("X-RateLimit-Remaining"), res.Header.Get("Retry-After"))
	}
	// Output:
	// /api/search 200 5
	// /api/ping 200 4
	// /api/ping 200 3
	// /api/ping 200 2
	// /api/search 429 1 24
}

// A cost known only inside the handler: one unit per item of a bulk
// request.
func ExampleLimiter_AllowN() {
	st, _ := memstore.New(memstore.Options{})
	lim, _ := middleware.New(st, nil, store.Limit{Rate: 100, Period: time.Hour}, middleware.Options{Name: "import"})
	identity := "alice" // as the key function would return it
	for _, n := range []int64{60, 30, 20} {
		d, err := lim.AllowN(context.Background(), identity, n)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(n, d.Allowed, d.Remaining)
	}
	// Output:
	// 60 true 40
	// 30 true 10
	// 20 false 10
}

// Limits chosen per request and tier: exports get a tighter limit than
// the rest of the API; nil keeps the tier's own.
func ExampleOptions_limitsFunc() {
	st, _ := memstore.New(memstore.Options{})
	lim, err := middleware.New(st, keyfunc.RemoteIP, store.Limit{Rate: 100, Period: time.Minute},
		middleware.Options{Name: "api", LimitsFunc: func(r *http.Request, tier string) ([]store.Limit, error) {
			if strings.HasPrefix(r.URL.Path, "/export/") {
				return []store.Limit{{Name: "export", Rate: 2, Period: time.Minute}}, nil
			}
			return nil, nil
		}})
	if err != nil {
		log.Fatal(err)
	}
	h := lim.Handler(http.HandlerFunc(hello))
	for _, p := range []string{"/users", "/export/users", "/export/users", "/export/users"} {
		res := get(h, p, "192.0.2.1:1")
		line(p, res.StatusCode, res.Header.Get("X-RateLimit-Limit"), res.Header.Get("X-RateLimit-Remaining"))
	}
	// Output:
	// /users 200 100 99
	// /export/users 200 2 1
	// /export/users 200 2 0
	// /export/users 429 2 0
}

// Unblocking a client by hand: Reset takes the tier ("" for a limiter
// built with New) and the identity as the key function returns it.
func ExampleLimiter_Reset() {
	st, _ := memstore.New(memstore.Options{})
	lim, _ := middleware.New(st, keyfunc.RemoteIP,
		store.Limit{Algorithm: store.SlidingWindowLog, Rate: 1, Period: time.Minute, Block: 15 * time.Minute},
		middleware.Options{Name: "login"})
	h := lim.Handler(http.HandlerFunc(hello))
	for range 2 {
		get(h, "/login", "198.51.100.23:7000")
	}
	ctx := context.Background()
	d, _ := lim.Peek(ctx, "198.51.100.23")
	fmt.Println("before:", d.Blocked, d.RetryAfter.Round(time.Minute))

	err := lim.Reset(ctx, "", "198.51.100.23")
	fmt.Println("reset:", err)
	d, _ = lim.Peek(ctx, "198.51.100.23")
	fmt.Println("after:", d.Allowed, d.Remaining)

	err = lim.Reset(ctx, "", "198.51.100.99")
	fmt.Println("unknown:", errors.Is(err, store.ErrNotFound))
	// Output:
	// before: true 15m0s
	// reset: <nil>
	// after: true 0
	// unknown: true
}

// An allow-listed network bypasses the limiter; the client address is
// found with the same trusted-proxy rules as identities.
func ExampleExemptCIDRs() {
	st, _ := memstore.New(memstore.Options{})
	clientIP, err := keyfunc.NewClientIP(keyfunc.IPOptions{TrustedProxies: []string{"10.0.0.5", "10.0.0.6"}})
	if err != nil {
		log.Fatal(err)
	}
	inside, err := middleware.ExemptCIDRs(clientIP, "192.0.2.0/24")
	if err != nil {
		log.Fatal(err)
	}
	lim, _ := middleware.New(st, clientIP.Key, store.Limit{Rate: 1, Period: time.Minute}, middleware.Options{Exempt: []func(*http.Request) bool{inside}})
	h := lim.Handler(http.HandlerFunc(hello))
	for _, client := range []string{"192.0.2.44", "192.0.2.44", "203.0.113.7", "203.0.113.7"} {
		res := get(h, "/", "10.0.0.5:41000", "X-Forwarded-For", client)
		line(client, res.StatusCode, res.Header.Get("X-RateLimit-Remaining"))
	}
	// Output:
	// 192.0.2.44 200
	// 192.0.2.44 200
	// 203.0.113.7 200 0
	// 203.0.113.7 429 0
}

// downStore is a store whose backend never answers.
type downStore struct{}

func (downStore) Take(context.Context, store.Request) (store.Decision, error) {
	return store.Decision{}, &store.BackendError{Op: "take", Kind: "connection", Err: errors.New("connection refused")}
}

func (downStore) Peek(context.Context, store.Request) (store.Decision, error) {
	return store.Decision{}, &store.BackendError{Op: "peek", Kind: "connection", Err: errors.New("connection refused")}
}

func (downStore) Reset(context.Context, store.Request) error {
	return &store.BackendError{Op: "reset", Kind: "connection", Err: errors.New("connection refused")}
}

// What a request gets when the store fails: FailOpen passes it without
// rate-limit headers, FailClosed answers 503, and a local fallback store
// decides in its place.
func Example_failureModes() {
	quiet := slog.New(slog.DiscardHandler)
	limit := store.Limit{Rate: 10, Period: time.Minute}
	local, _ := memstore.New(memstore.Options{})

	open, _ := middleware.New(downStore{}, keyfunc.RemoteIP, limit, middleware.Options{Name: "open", Logger: quiet})
	closed, _ := middleware.New(downStore{}, keyfunc.RemoteIP, limit, middleware.Options{Name: "closed", Logger: quiet, FailureMode: limiter.FailClosed})
	fallback, _ := middleware.New(downStore{}, keyfunc.RemoteIP, limit, middleware.Options{Name: "fallback", Logger: quiet, Fallback: local})
	for _, c := range []struct {
		name string
		lim  *middleware.Limiter
	}{{"open", open}, {"closed", closed}, {"fallback", fallback}} {
		res := get(c.lim.Handler(http.HandlerFunc(hello)), "/", "192.0.2.1:1")
		fmt.Printf("%s: %d Retry-After=%q X-RateLimit-Remaining=%q\n",
			c.name, res.StatusCode, res.Header.Get("Retry-After"), res.Header.Get("X-RateLimit-Remaining"))
	}
	// Output:
	// open: 200 Retry-After="" X-RateLimit-Remaining=""
	// closed: 503 Retry-After="1" X-RateLimit-Remaining=""
	// fallback: 200 Retry-After="" X-RateLimit-Remaining="9"
}

// Decision lines at debug level carry the method, the route pattern and a
// keyed hash of the identity, never the identity itself.
func Example_logs() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "latency" {
				return slog.Attr{} // vary from run to run
			}
			return a
		},
	}))
	st, _ := memstore.New(memstore.Options{})
	lim, _ := middleware.New(st, keyfunc.RemoteIP, store.Limit{Rate: 10, Period: time.Minute},
		middleware.Options{
			Name:      "api",
			Logger:    logger,
			LogSecret: []byte("shared by every replica, kept private"),
		})
	mux := http.NewServeMux()
	mux.Handle("GET /api/ping", lim.Handler(http.HandlerFunc(hello)))
	get(mux, "/api/ping", "203.0.113.7:51000")
	// Output:
	// level=DEBUG msg="ratekeeper: decision" policy=api outcome=allowed method=GET route="GET /api/ping" key_hash=ed3e0d59b03383cd remaining=9 retry_after=0s limit=gcra/1m0s
}

// Behind load balancers in 10.0.0.0/8: clients are keyed by the address
// the nearest untrusted hop reported (an entry a client forged on the left
// is never read), health checks and an allow-listed network are exempt
// and get no rate-limit headers.
func Example_behindProxy() {
	st, _ := memstore.New(memstore.Options{})
	// snippet:behind-proxy
	clientIP, err := keyfunc.NewClientIP(keyfunc.IPOptions{TrustedProxies: []string{"10.0.0.5", "10.0.0.6"}})
	if err != nil {
		log.Fatal(err)
	}
	office, err := middleware.ExemptCIDRs(clientIP, "192.0.2.0/24")
	if err != nil {
		log.Fatal(err)
	}
	api, err := middleware.New(st, clientIP.Key, store.Limit{Rate: 10, Period: time.Minute},
		middleware.Options{Name: "api", Exempt: []func(*http.Request) bool{middleware.ExemptPaths("/healthz"), office}})
	if err != nil {
		log.Fatal(err)
	}
	// end snippet
	h := api.Handler(http.HandlerFunc(hello))
	for _, c := range []struct{ path, xff string }{
		{"/api/ping", "6.6.6.6, 203.0.113.7"},
		{"/api/ping", "203.0.113.7"},
		{"/api/ping", "198.51.100.2"},
		{"/api/ping", "192.0.2.44"},
		{"/healthz", "203.0.113.7"},
	} {
		res := get(h, c.path, "10.0.0.5:41000", "X-Forwarded-For", c.xff)
		line(c.path, c.xff+":", res.StatusCode, res.Header.Get("X-RateLimit-Remaining"))
	}
	// Output:
	// /api/ping 6.6.6.6, 203.0.113.7: 200 9
	// /api/ping 203.0.113.7: 200 8
	// /api/ping 198.51.100.2: 200 9
	// /api/ping 192.0.2.44: 200
	// /healthz 203.0.113.7: 200
}

// A login policy: 5 attempts per minute and 20 per day per client
// address, every attempt counted; the 6th attempt in a minute blocks the
// client for 15 minutes, and each repeat offence doubles the block.
func Example_loginBlock() {
	st, _ := memstore.New(memstore.Options{})
	// snippet:login-block
	minute := store.Limit{Name: "minute", Algorithm: store.SlidingWindowLog, Rate: 5, Period: time.Minute,
		Block: 15 * time.Minute, BlockMax: 24 * time.Hour} // repeat offences: 30m, 1h, ... up to 24h
	day := store.Limit{Name: "day", Algorithm: store.SlidingWindowLog, Rate: 20, Period: 24 * time.Hour, Block: 24 * time.Hour}
	login, err := middleware.New(st, keyfunc.RemoteIP, minute,
		middleware.Options{
			Name:        "login",
			CountDenied: true,
			Headers:     headers.Options{Omit: true},
			FailureMode: limiter.FailClosed,
			Limits:      []store.Limit{day},
		}) // the store down: 503, not an open door
	if err != nil {
		log.Fatal(err)
	}
	// end snippet
	h := login.Handler(http.HandlerFunc(hello))
	for range 7 {
		res := get(h, "/login", "198.51.100.23:7000")
		var body struct {
			Error string `json:"error"`
			Scope string `json:"scope"`
		}
		_ = json.NewDecoder(res.Body).Decode(&body)
		line(res.StatusCode, res.Header.Get("Retry-After"), body.Error, body.Scope)
	}
	// Output:
	// 200
	// 200
	// 200
	// 200
	// 200
	// 429 900 blocked minute
	// 429 900 blocked minute
}

// An operator raises one client's limit tenfold for a day, then suspends
// it for an hour; a policy applies overrides only when built
// Options.Overrides.
func ExampleLimiter_SetOverride() {
	st, _ := memstore.New(memstore.Options{})
	ctx := context.Background()
	// snippet:overrides
	api, err := middleware.New(st, keyfunc.RemoteIP, store.Limit{Rate: 10, Period: time.Minute},
		middleware.Options{Name: "api", Overrides: true})
	if err != nil {
		log.Fatal(err)
	}
	raise := store.Override{Kind: store.OverrideScale, Scale: 10, TTL: 24 * time.Hour}
	if err := api.SetOverride(ctx, "", "203.0.113.7", raise); err != nil { // tier "" for a limiter built with New
		log.Fatal(err)
	}
	// end snippet
	h := api.Handler(http.HandlerFunc(hello))
	res := get(h, "/api/ping", "203.0.113.7:5000")
	line(res.StatusCode, res.Header.Get("X-RateLimit-Limit"))

	_ = api.SetOverride(ctx, "", "203.0.113.7", store.Override{Kind: store.OverrideSuspend, TTL: time.Hour})
	res = get(h, "/api/ping", "203.0.113.7:5000")
	line(res.StatusCode)

	_ = api.ClearOverride(ctx, "", "203.0.113.7")
	res = get(h, "/api/ping", "203.0.113.7:5000")
	line(res.StatusCode, res.Header.Get("X-RateLimit-Limit"))
	// Output:
	// 200 100
	// 403
	// 200 10
}
