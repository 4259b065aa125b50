package policy_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/metrics"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/middleware/policy"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// The example services' policy file, loaded with the key function and the
// classifier it names, and served on chi and on a ServeMux.
func Example_loadFile() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, _ := memstore.New(memstore.Options{})
	collector, _ := metrics.New(prometheus.NewRegistry(), metrics.Options{})
	jwtSubject, _ := keyfunc.JWTSubject(keyfunc.JWTOptions{Algorithms: []string{"HS256"}, Key: []byte("a demo secret of at least 32 bytes")})
	ping := func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pong") }
	login := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "welcome") })
	mux := http.NewServeMux()
	path := "../../examples/internal/demo/policies.yaml"

	// snippet:load
	set, err := policy.Load(path, st, policy.Options{
		Keys:        map[string]keyfunc.KeyFunc{"ip": keyfunc.RemoteIP},
		Classifiers: map[string]middleware.Classifier{"auth": middleware.AuthOptions{Subject: jwtSubject, Anonymous: keyfunc.RemoteIP}},
		Middleware:  middleware.Options{Observer: collector.Observe},
	})
	if err != nil {
		log.Fatal(err) // every problem with its file, line and field
	}
	r := chi.NewRouter()
	r.With(set.Handler("api")).Get("/api/ping", ping)      // chi
	mux.Handle("POST /login", set.Handler("login")(login)) // http.ServeMux
	go set.Watch(ctx, 2*time.Second)                       // or set.Reload() on SIGHUP
	// end snippet

	send := func(h http.Handler, method, path string) {
		req := httptest.NewRequest(method, path, nil)
		req.RemoteAddr = "203.0.113.7:5000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		fmt.Println(method, path, w.Code, w.Header().Get("X-RateLimit-Limit"), w.Header().Get("RateLimit-Policy"))
	}
	send(r, http.MethodGet, "/api/ping")
	send(mux, http.MethodPost, "/login")
	// Output:
	// GET /api/ping 200 10 "api/anonymous";q=10;w=60
	// POST /login 200
}
