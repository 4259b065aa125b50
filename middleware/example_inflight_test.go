package middleware_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// At most two exports run at once per route, whoever asks, and no rate
// limit: a third export is answered 503 with Retry-After while two run.
// Key by client instead (keyfunc.ClientIP) for a per-client cap, and
// give a rate limit as well to have both.
func ExampleOptions_inFlight() {
	st, _ := memstore.New(memstore.Options{})
	lim, err := middleware.New(st, keyfunc.Route, store.Limit{}, middleware.Options{
		Name:           "exports",
		InFlight:       limiter.InFlight{Max: 2},
		InFlightStatus: http.StatusServiceUnavailable,
	})
	if err != nil {
		panic(err)
	}
	running, finish := make(chan bool), make(chan bool)
	export := func(w http.ResponseWriter, _ *http.Request) {
		running <- true
		<-finish // the export's work
	}
	mux := http.NewServeMux()
	mux.Handle("GET /export", lim.Handler(http.HandlerFunc(export)))

	done := make(chan bool, 2)
	for range 2 { // two exports start and keep running
		go func() {
			mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/export", nil))
			done <- true
		}()
		<-running
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/export", nil))
	fmt.Println(w.Code, w.Header().Get("Retry-After"))
	fmt.Print(w.Body.String())

	finish <- true // one export ends and gives its slot back
	<-done
	go func() { <-running; close(finish) }() // the third export runs and all end
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/export", nil))
	fmt.Println(w.Code)
	// Output:
	// 503 1
	// {"error":"too_many_in_flight","message":"Too many requests in progress. Try again in 1 second.","retry_after":1,"in_flight_limit":2,"policy":"exports"}
	// 200
}
