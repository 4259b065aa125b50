package metrics_test

import (
	"bufio"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/metrics"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// A limiter reports every decision to a Collector registered on a
// registry of the caller's choosing, served on /metrics.
func ExampleNew() {
	st, _ := memstore.New(memstore.Options{})
	ping := func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pong") }
	// snippet:metrics
	reg := prometheus.NewRegistry() // or prometheus.DefaultRegisterer, if you mean it
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		log.Fatal(err)
	}
	api, err := middleware.New(st, keyfunc.RemoteIP, store.Limit{Rate: 2, Period: time.Minute},
		middleware.Options{Name: "api", Observer: m.Observe})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /api/ping", api.Handler(http.HandlerFunc(ping)))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// end snippet

	for range 3 {
		r := httptest.NewRequest(http.MethodGet, "/api/ping", nil)
		r.RemoteAddr = "203.0.113.7:51000"
		mux.ServeHTTP(httptest.NewRecorder(), r)
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	lines := bufio.NewScanner(w.Body)
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "ratekeeper_decisions_total") {
			fmt.Println(lines.Text())
		}
	}
	// Output:
	// ratekeeper_decisions_total{outcome="allowed",policy="api"} 2
	// ratekeeper_decisions_total{outcome="limited",policy="api"} 1
}
