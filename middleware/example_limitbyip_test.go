package middleware_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// The one-line start: a per-IP limit on a memory store of the limiter's
// own, on chi and on http.ServeMux.
func ExampleLimitByIP() {
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	r, mux := chi.NewRouter(), http.NewServeMux()

	// snippet:limitbyip
	r.Use(middleware.LimitByIP(100, time.Minute))                    // chi: 100 requests per minute per client IP
	mux.Handle("/api/", middleware.LimitByIP(100, time.Minute)(api)) // net/http
	// end snippet
	r.Get("/api/ping", api)

	for _, h := range []http.Handler{r, mux} {
		codes := map[int]int{}
		var last *httptest.ResponseRecorder
		for range 101 {
			req := httptest.NewRequest(http.MethodGet, "/api/ping", nil)
			req.RemoteAddr = "203.0.113.7:5000"
			last = httptest.NewRecorder()
			h.ServeHTTP(last, req)
			codes[last.Code]++
		}
		fmt.Println(codes[http.StatusOK], "admitted,", codes[http.StatusTooManyRequests], "refused, Retry-After", last.Header().Get("Retry-After"))
	}
	// Output:
	// 100 admitted, 1 refused, Retry-After 1
	// 100 admitted, 1 refused, Retry-After 1
}

// LimitByIP on Redis: one limit shared by every replica.
func ExampleLimitByIP_store() {
	// ContextTimeoutEnabled: the client cuts socket I/O at each call's budget itself.
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	st, err := redisstore.New(client, redisstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	r := chi.NewRouter()

	// snippet:limitbyip-redis
	r.Use(middleware.LimitByIP(100, time.Minute, middleware.Options{Store: st})) // one limit across every replica
	// end snippet
}
