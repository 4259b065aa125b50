package middleware_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// A completion route under a request budget (a fixed window) and a token
// budget (a token bucket; every algorithm settles): each request reserves
// an estimate of 500 tokens, and the handler reports the tokens it used;
// the difference is settled once it returns (also when it panics or the
// client went away).
func ExampleLimiter_ReportCost() {
	st, _ := memstore.New(memstore.Options{})
	requests, _ := middleware.New(st, keyfunc.RemoteIP,
		store.Limit{Name: "requests", Algorithm: store.FixedWindow, Rate: 60, Period: time.Minute}, middleware.Options{Name: "requests", DecisionInContext: true})
	budget, _ := middleware.New(st, keyfunc.RemoteIP,
		store.Limit{Name: "tokens", Algorithm: store.TokenBucket, Rate: 100_000, Period: 24 * time.Hour}, middleware.Options{Name: "tokens", DecisionInContext: true})
	// snippet:report-cost
	tokens, err := budget.WithCost(500) // the estimate, reserved before the handler runs
	if err != nil {
		log.Fatal(err)
	}
	complete := func(w http.ResponseWriter, r *http.Request) {
		used := int64(1200) // known once the completion is done
		if err := tokens.ReportCost(r.Context(), used); err != nil {
			log.Print(err)
		}
		fmt.Fprintln(w, "done")
	}
	h := requests.Handler(tokens.Handler(http.HandlerFunc(complete)))
	// end snippet
	for range 2 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/complete", nil))
	}
	d, _ := budget.Peek(context.Background(), "192.0.2.1")
	fmt.Println("tokens left:", d.Remaining+d.Cost)
	// Output:
	// tokens left: 97600
}

// A batch takes as many items as the quota has room for now.
func ExampleLimiter_AllowAtMost() {
	st, _ := memstore.New(memstore.Options{})
	lim, _ := middleware.New(st, nil, store.Limit{Algorithm: store.FixedWindow, Rate: 100, Period: time.Hour}, middleware.Options{Name: "import"})
	for _, n := range []int64{60, 60, 60} {
		// snippet:allow-at-most
		d, err := lim.AllowAtMost(context.Background(), "alice", n)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(n, d.Allowed, d.Granted) // import d.Granted items; refused: retry after d.RetryAfter
		// end snippet
	}
	// Output:
	// 60 true 60
	// 60 true 40
	// 60 false 0
}
