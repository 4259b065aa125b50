package main

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	chimw "github.com/go-chi/chi/v5/middleware"

	"github.com/ratekeeper/ratekeeper/examples/internal/demo"
)

func routes(p *demo.Policies) http.Handler {
	r := chi.NewRouter()
	// HEAD of a GET route runs the GET handler, limits included, as on
	// http.ServeMux.
	r.Use(chimw.GetHead)
	r.Get("/healthz", demo.Healthz)
	r.Method(http.MethodGet, "/metrics", p.Metrics)
	r.Route("/api", func(r chi.Router) {
		r.With(p.Set.Handler("api")).Get("/ping", demo.Ping)
		r.With(p.Set.Handler("search")).Get("/search", demo.Search)
		r.With(p.Set.Handler("export")).Get("/export", demo.Export)
	})
	r.Group(func(r chi.Router) {
		r.Use(p.Set.Handler("login"))
		r.Post("/login", demo.Login)
	})
	if p.Admin != nil {
		r.Handle("/admin/*", p.Admin)
	}
	return r
}

func main() { demo.Main("chi", routes) }
