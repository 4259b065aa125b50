package metrics_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/metrics"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// A limiter reports every decision to a Collector registered on a
// registry of the caller's choosing.
func ExampleNew() {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		log.Fatal(err)
	}
	st, _ := memstore.New(memstore.Options{})
	lim, err := middleware.New(st, keyfunc.RemoteIP, store.Limit{Rate: 2, Period: time.Minute},
		middleware.WithName("api"), middleware.WithObserver(m.Observe))
	if err != nil {
		log.Fatal(err)
	}
	h := lim.Handler(http.NotFoundHandler())
	for range 3 {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "203.0.113.7:51000"
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "ratekeeper_decisions_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := make([]string, 0, 2)
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			fmt.Println(f.GetName(), strings.Join(labels, " "), s.GetCounter().GetValue())
		}
	}
	// Output:
	// ratekeeper_decisions_total outcome=allowed policy=api 2
	// ratekeeper_decisions_total outcome=limited policy=api 1
}
