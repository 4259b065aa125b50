package headers_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// The IETF fields, one item per limit, next to the X-RateLimit-* set.
func ExampleOptions() {
	st, _ := memstore.New(memstore.Options{})
	lim, err := middleware.New(st, keyfunc.RemoteIP,
		store.Limit{Name: "minute", Algorithm: store.FixedWindow, Rate: 10, Period: time.Minute},
		middleware.Options{
			Name:    "api",
			Headers: headers.Options{IETF: true, Bucket: true},
			Limits:  []store.Limit{store.Limit{Name: "hour", Algorithm: store.FixedWindow, Rate: 100, Period: time.Hour}},
		})
	if err != nil {
		panic(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	w := httptest.NewRecorder()
	lim.Handler(http.NotFoundHandler()).ServeHTTP(w, r)
	for _, k := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "RateLimit-Policy", "X-RateLimit-Bucket"} {
		fmt.Printf("%s: %s\n", k, w.Header().Get(k))
	}
	// Output:
	// X-RateLimit-Limit: 10
	// X-RateLimit-Remaining: 9
	// RateLimit-Policy: "minute";q=10;w=60, "hour";q=100;w=3600
	// X-RateLimit-Bucket: api
}
