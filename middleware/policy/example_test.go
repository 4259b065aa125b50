package policy_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware/policy"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// get sends a GET from a client address and returns the status and the
// X-RateLimit-Remaining header, if any.
func get(h http.Handler, path, client string) string {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = client
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return strings.TrimSpace(fmt.Sprint(w.Code, " ", w.Header().Get("X-RateLimit-Remaining")))
}

func pong(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "pong") }

// Load a policy file (testdata/example.yaml: 3 requests per minute per
// client address), serve a route through its "api" policy, then switch the
// policy off and on again.
func Example() {
	st, _ := memstore.New(memstore.Options{})
	set, err := policy.Load("testdata/example.yaml", st, policy.Options{
		Keys:   map[string]keyfunc.KeyFunc{"ip": keyfunc.RemoteIP},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("GET /api/ping", set.Handler("api")(http.HandlerFunc(pong)))

	for range 4 {
		fmt.Println(get(mux, "/api/ping", "203.0.113.7:5000"))
	}
	_ = set.SetMode("api", "off") // an emergency bypass
	fmt.Println(get(mux, "/api/ping", "203.0.113.7:5000"))
	_ = set.SetMode("api", "") // back to the file's mode, enforce
	fmt.Println(get(mux, "/api/ping", "203.0.113.7:5000"))
	// Output:
	// 200 2
	// 200 1
	// 200 0
	// 429 0
	// 200
	// 429 0
}

// Parse validates a file without the application, for CI; each problem
// names the line and the field.
func ExampleParse() {
	_, err := policy.Parse("policies.yaml", []byte(`policies:
  api:
    key: ip
    limits:
      - {rate: 10, period: -1m}
      - {rate: 100, period: 1h, algorithm: leaky_bucket}
`))
	fmt.Println(err)
	// Output:
	// policies.yaml:5: policies.api.limits[0].period: must be positive, got -1m
	// policies.yaml:6: policies.api.limits[1].algorithm: unknown algorithm "leaky_bucket" (want gcra, token_bucket, sliding_window_log, sliding_window_counter, fixed_window, suppressed)
}
