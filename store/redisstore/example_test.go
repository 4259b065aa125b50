package redisstore_test

import (
	"net/http"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// A per-client concurrency cap, a policy no built-in algorithm expresses,
// written as a user script (lua/examples/concurrency.lua) and used through
// the middleware: the limiter takes a slot before the handler runs, and a
// small wrapper gives it back when the handler returns. (It needs a Redis
// on localhost:6379, so it has no output to check.)
func ExampleWithScript() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	rs, err := redisstore.New(rdb, redisstore.Options{})
	if err != nil {
		panic(err)
	}
	src, err := os.ReadFile("lua/examples/concurrency.lua")
	if err != nil {
		panic(err)
	}
	inflight, err := redisstore.WithScript(rs, "inflight", string(src))
	if err != nil {
		panic(err)
	}
	// At most 4 requests per client at once; a slot a crashed process
	// never gave back is freed after a minute.
	slots := store.Limit{Rate: 4, Period: time.Minute}
	lim, err := middleware.New(inflight, keyfunc.RemoteIP, slots, middleware.Options{Name: "inflight"})
	if err != nil {
		panic(err)
	}
	release := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			if id, err := keyfunc.RemoteIP(r); err == nil {
				req := store.Request{Key: "inflight:" + id, Limits: []store.Limit{slots}}
				_, _, _ = redisstore.Call(r.Context(), inflight, "release", req)
			}
		})
	}
	export := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("done")) })
	http.Handle("GET /export", lim.Handler(release(export)))
}
