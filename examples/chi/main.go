// Command chi is the ratekeeper example service on a chi router, with the
// same behaviour as examples/stdlib.
//
//	go run ./examples/chi                   # in-memory store, :8080
//	REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/chi
//	go run ./examples/chi token alice       # print a demo JWT for "alice"
package main

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/ratekeeper/ratekeeper/examples/internal/demo"
)

func routes(p *demo.Policies) http.Handler {
	r := chi.NewRouter()
	r.Get("/healthz", demo.Healthz)
	r.Method(http.MethodGet, "/metrics", p.Metrics)
	r.Route("/api", func(r chi.Router) {
		r.With(p.API.Handler).Get("/ping", demo.Ping)
		r.With(p.Search.Handler).Get("/search", demo.Search)
	})
	r.Group(func(r chi.Router) {
		r.Use(p.Login.Handler)
		r.Post("/login", demo.Login)
	})
	return r
}

func main() { demo.Main("chi", routes) }
