package keyfunc

import (
	"net/http"
	"reflect"
	"strings"

	"github.com/go-chi/chi/v5"
)

// unmatchedRoute is the one identity shared by requests that match no
// route. Every pattern holds a '/', so it cannot equal a pattern.
const unmatchedRoute = "unmatched"

// Route keys a request by the pattern of the route it matches, never by its
// raw path, so that /users/1 and /users/2 share one bucket. The identity is
// the pattern itself, "/users/{id}". Requests that match no route (404,
// 405, methods the router does not know) share the single identity
// "unmatched" (no pattern can equal it, since every pattern holds a '/'),
// so that scanning random paths cannot create buckets without end.
//
// With chi, the pattern is the one chi matched
// (chi.RouteContext(ctx).RoutePattern()). Middleware added with r.With or
// inside r.Group runs after chi has matched the route and sees the full
// pattern. Middleware added with r.Use on the top-level router runs before
// chi has matched anything, and middleware added with r.Use inside
// r.Route or a mounted sub-router sees only the mount prefix ("/api/*");
// in those two cases Route asks the top-level router which pattern the
// request's method and URL path would match (chi's Mux.Find), which costs
// one more tree lookup per request. Middleware that rewrites chi's
// RoutePath before routing is not taken into account there.
//
// With http.ServeMux (Go 1.22 patterns), the pattern is r.Pattern, which
// the mux sets only after routing, on the request it hands to the matched
// handler: the limiter must wrap the handler registered on the mux,
// mux.Handle("GET /users/{id}", limiter.Handler(h)), and the key then
// includes the method and host if the pattern does ("GET /users/{id}").
// A limiter that wraps the whole mux sees no pattern and
// keys every request "unmatched"; use [MuxRoute] there.
//
// Route trusts the router's configuration only and never fails. Safe for
// concurrent use.
func Route(r *http.Request) (string, error) {
	if rctx := chi.RouteContext(r.Context()); rctx != nil {
		p := rctx.RoutePattern()
		if (p == "" || strings.HasSuffix(p, "*")) && rctx.Routes != nil {
			p = findChiPattern(rctx.Routes, r)
		}
		return routeKey(p), nil
	}
	return routeKey(r.Pattern), nil
}

// findChiPattern asks the top-level chi router which pattern r would
// match, with a fresh routing context so the request's own is not changed.
func findChiPattern(routes chi.Routes, r *http.Request) string {
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	if path == "" {
		path = "/"
	}
	p := routes.Find(chi.NewRouteContext(), r.Method, path)
	if p == "" {
		return ""
	}
	// Normalize as chi's RoutePattern does, so that the key does not
	// depend on where the middleware sits.
	for strings.Contains(p, "/*/") {
		p = strings.ReplaceAll(p, "/*/", "/")
	}
	if p != "/" {
		p = strings.TrimSuffix(p, "//")
		p = strings.TrimSuffix(p, "/")
	}
	return p
}

// MuxRoute returns a KeyFunc like [Route] for a limiter that wraps a whole
// http.ServeMux rather than the handlers registered on it: it asks mux
// which pattern the request matches (mux.Handler). Requests that match no
// pattern share "unmatched"; so do requests that the mux would
// redirect (to a cleaned path or one with a trailing slash), since they do
// not reach a registered handler as they are. MuxRoute trusts the mux
// configuration only and never fails. It panics if mux is nil (at
// construction, never at request time). Safe for concurrent use.
func MuxRoute(mux *http.ServeMux) KeyFunc {
	if mux == nil {
		panic("keyfunc: MuxRoute: mux is nil")
	}
	return func(r *http.Request) (string, error) {
		h, p := mux.Handler(r)
		if p == "" || isRedirect(h) {
			return unmatchedRoute, nil
		}
		return routeKey(p), nil
	}
}

// redirectType is the dynamic type of the handlers that http.ServeMux
// returns for requests it redirects.
var redirectType = reflect.TypeOf(http.RedirectHandler("/", http.StatusTemporaryRedirect))

func isRedirect(h http.Handler) bool {
	return reflect.TypeOf(h) == redirectType
}

func routeKey(pattern string) string {
	if pattern == "" {
		return unmatchedRoute
	}
	return pattern
}
