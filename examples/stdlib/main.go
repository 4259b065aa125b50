package main

import (
	"net/http"

	"github.com/ratekeeper/ratekeeper/examples/internal/demo"
)

func routes(p *demo.Policies) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", demo.Healthz)
	mux.Handle("GET /metrics", p.Metrics)
	mux.Handle("GET /api/ping", p.Set.Handler("api")(http.HandlerFunc(demo.Ping)))
	mux.Handle("GET /api/search", p.Set.Handler("search")(http.HandlerFunc(demo.Search)))
	mux.Handle("POST /login", p.Set.Handler("login")(http.HandlerFunc(demo.Login)))
	if p.Admin != nil {
		mux.Handle("/admin/", p.Admin)
	}
	return mux
}

func main() { demo.Main("stdlib", routes) }
