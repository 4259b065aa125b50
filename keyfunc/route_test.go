package keyfunc

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
)

// recorder is a middleware that stores the key a KeyFunc gives for each
// request, and what chi had matched when it ran.
type recorder struct {
	kf         KeyFunc
	key        string
	err        error
	chiPattern string
	calls      int
}

func (rec *recorder) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.calls++
		rec.key, rec.err = rec.kf(r)
		rec.chiPattern = chi.RouteContext(r.Context()).RoutePattern()
		next.ServeHTTP(w, r)
	})
}

func (rec *recorder) stdMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.calls++
		rec.key, rec.err = rec.kf(r)
		next.ServeHTTP(w, r)
	})
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })

type routeCase struct {
	method, path string
	want         string
}

func runRouteCases(t *testing.T, h http.Handler, rec *recorder, cases []routeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			rec.key, rec.err, rec.calls = "", nil, 0
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tc.method, tc.path, nil))
			if rec.calls != 1 {
				t.Fatalf("got %d calls of the key function, want 1", rec.calls)
			}
			if rec.err != nil || rec.key != tc.want {
				t.Errorf("got %q, %v; want %q", rec.key, rec.err, tc.want)
			}
		})
	}
}

func TestRouteChiWith(t *testing.T) {
	rec := &recorder{kf: Route}
	r := chi.NewRouter()
	r.With(rec.middleware).Get("/users/{id}", ok)
	r.With(rec.middleware).Get("/files/*", ok)
	r.Route("/api", func(r chi.Router) {
		r.With(rec.middleware).Post("/orders/{order}/items/{item}", ok)
	})
	r.Group(func(r chi.Router) {
		r.Use(rec.middleware)
		r.Get("/groups/{g}", ok)
	})
	runRouteCases(t, r, rec, []routeCase{
		{"GET", "/users/1", "/users/{id}"},
		{"GET", "/users/2", "/users/{id}"},
		{"GET", "/users/%7B%7D", "/users/{id}"},
		{"GET", "/files/a/b/c", "/files/*"},
		{"POST", "/api/orders/9/items/3", "/api/orders/{order}/items/{item}"},
		{"GET", "/groups/x", "/groups/{g}"},
	})
	// With r.With the pattern is chi's own, with nothing looked up again.
	if rec.chiPattern != "/groups/{g}" {
		t.Errorf("chi pattern inside a group: got %q, want /groups/{g}", rec.chiPattern)
	}
}

func TestRouteChiTopLevelUse(t *testing.T) {
	rec := &recorder{kf: Route}
	r := chi.NewRouter()
	r.Use(rec.middleware)
	r.Get("/users/{id}", ok)
	r.Handle("/static/*", ok)
	r.Route("/api", func(r chi.Router) {
		r.Get("/items/{id}", ok)
		r.Route("/v2", func(r chi.Router) {
			r.Delete("/items/{id}", ok)
		})
	})
	runRouteCases(t, r, rec, []routeCase{
		{"GET", "/users/7", "/users/{id}"},
		{"GET", "/static/css/site.css", "/static/*"},
		{"GET", "/api/items/3", "/api/items/{id}"},
		{"DELETE", "/api/v2/items/3", "/api/v2/items/{id}"},
		{"GET", "/nope", "unmatched"},
		{"GET", "/api/nope", "unmatched"},
		{"POST", "/users/7", "unmatched"},
		{"BREW", "/users/7", "unmatched"},
	})
	// The documented chi behaviour: top-level Use middleware runs before
	// routing, so chi itself has no pattern yet.
	if rec.chiPattern != "" {
		t.Errorf("chi pattern in top-level Use: got %q, want empty", rec.chiPattern)
	}
}

func TestRouteChiSubRouterUse(t *testing.T) {
	rec := &recorder{kf: Route}
	r := chi.NewRouter()
	r.Route("/api", func(r chi.Router) {
		r.Use(rec.middleware)
		r.Get("/items/{id}", ok)
		r.Get("/", ok)
	})
	sub := chi.NewRouter()
	sub.Use(rec.middleware)
	sub.Put("/{name}", ok)
	r.Mount("/blobs", sub)
	runRouteCases(t, r, rec, []routeCase{
		{"GET", "/api/items/1", "/api/items/{id}"},
		{"GET", "/api/", "/api"},
		{"GET", "/api/missing/x", "unmatched"},
		{"PUT", "/blobs/photo", "/blobs/{name}"},
	})
	// The documented chi behaviour: a sub-router's Use sees the mount
	// prefix only.
	if rec.chiPattern != "/blobs/*" {
		t.Errorf("chi pattern in sub-router Use: got %q, want /blobs/*", rec.chiPattern)
	}
}

func TestRouteServeMux(t *testing.T) {
	rec := &recorder{kf: Route}
	mux := http.NewServeMux()
	mux.Handle("GET /users/{id}", rec.stdMiddleware(ok))
	mux.Handle("/files/", rec.stdMiddleware(ok))
	mux.Handle("api.example/v1/{$}", rec.stdMiddleware(ok))
	runRouteCases(t, mux, rec, []routeCase{
		{"GET", "/users/1", "GET /users/{id}"},
		{"GET", "/users/2", "GET /users/{id}"},
		{"GET", "/files/a/b", "/files/"},
		{"GET", "http://api.example/v1/", "api.example/v1/{$}"},
	})
}

func TestRouteOutsideMux(t *testing.T) {
	// A limiter that wraps the whole mux runs before routing: Route sees no
	// pattern and every request is "unmatched"; MuxRoute asks the mux.
	mux := http.NewServeMux()
	mux.Handle("GET /users/{id}", ok)
	mux.Handle("/dir/", ok)

	t.Run("Route", func(t *testing.T) {
		rec := &recorder{kf: Route}
		runRouteCases(t, rec.stdMiddleware(mux), rec, []routeCase{
			{"GET", "/users/1", "unmatched"},
		})
	})
	t.Run("MuxRoute", func(t *testing.T) {
		rec := &recorder{kf: MuxRoute(mux)}
		runRouteCases(t, rec.stdMiddleware(mux), rec, []routeCase{
			{"GET", "/users/1", "GET /users/{id}"},
			{"HEAD", "/users/1", "GET /users/{id}"},
			{"GET", "/dir/x", "/dir/"},
			{"GET", "/nope", "unmatched"},
			{"POST", "/users/1", "unmatched"},
			{"GET", "/dir", "unmatched"},            // redirect to /dir/
			{"GET", "/dir/../users/1", "unmatched"}, // redirect to the clean path
		})
	})
	t.Run("no router", func(t *testing.T) {
		got, err := Route(httptest.NewRequest("GET", "/anything", nil))
		if err != nil || got != "unmatched" {
			t.Errorf("got %q, %v; want unmatched", got, err)
		}
	})
}

func TestMuxRouteNilPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MuxRoute(nil) did not panic")
		}
	}()
	MuxRoute(nil)
}
