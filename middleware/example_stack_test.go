package middleware_test

import (
	"encoding/json"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// A per-client limit of 2 per minute and a route-wide limit of 3 per
// minute, stacked on a chi route: decided as one, so a request the route
// refuses costs the client nothing, and the headers and the 429 name the
// most restrictive policy: the client's while it has fewer units left, the
// route's once that has; for a refusal the refusing policy with the longest
// wait (the last request is refused by both, and the client's 30 s, until
// its first unit is back, is the longer).
func ExampleNewStack() {
	st, _ := memstore.New(memstore.Options{})
	perClient, err := middleware.New(st, keyfunc.RemoteIP, store.Limit{Rate: 2, Period: time.Minute}, middleware.Options{Name: "client"})
	if err != nil {
		panic(err)
	}
	perRoute, err := middleware.New(st, keyfunc.Constant("search"), store.Limit{Rate: 3, Period: time.Minute}, middleware.Options{Name: "search"})
	if err != nil {
		panic(err)
	}
	stack, err := middleware.NewStack(perClient, perRoute)
	if err != nil {
		panic(err)
	}
	r := chi.NewRouter()
	r.With(stack).Get("/search", hello)

	for _, client := range []string{"203.0.113.7:1", "203.0.113.7:1", "198.51.100.2:1", "198.51.100.2:1", "203.0.113.7:1"} {
		res := get(r, "/search", client)
		var body struct {
			Policy string `json:"policy"`
		}
		_ = json.NewDecoder(res.Body).Decode(&body)
		line(res.StatusCode, res.Header.Get("X-RateLimit-Limit"), res.Header.Get("X-RateLimit-Remaining"), res.Header.Get("Retry-After"), body.Policy)
	}
	// Output:
	// 200 2 1
	// 200 2 0
	// 200 3 0
	// 429 3 0 20 search
	// 429 2 0 30 client
}
