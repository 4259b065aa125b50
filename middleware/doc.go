// Package middleware rate-limits net/http handlers with a [store.Store]: one
// atomic decision per request, shared by every replica that uses the same
// store.
//
// # Use
//
// Build a [Limiter] once per policy with [New] (it validates everything and
// returns an error for bad configuration) and wrap handlers with
// [Limiter.Handler], whose shape is func(http.Handler) http.Handler:
//
//	lim, err := middleware.New(st, keyfunc.RemoteIP, store.PerMinute(10), middleware.WithName("api"))
//	r.With(lim.Handler).Get("/api/ping", ping)       // chi, one route
//	r.Group(func(r chi.Router) { r.Use(lim.Handler) }) // chi, a route group
//	mux.Handle("GET /api/ping", lim.Handler(ping))     // http.ServeMux
//
// # One request
//
// The key function derives the identity ([keyfunc.ErrNoIdentity] falls back
// to [WithFallbackKey] or answers 401; other key errors answer 400, never a
// shared or empty key). The store takes the request against every limit of
// the policy at once. The rate-limit headers ([headers.Writer]) are set
// before the wrapped handler runs, so the ResponseWriter is never wrapped.
// An admitted request goes on; a refused one gets 429, Retry-After and a
// JSON body such as
//
//	{"error":"rate_limit_exceeded","message":"Too many requests. Try again in 17 seconds.",
//	 "retry_after":17,"limit":100,"remaining":0,"reset":1767225600,"policy":"api"}
//
// # Failures
//
// Every store call is bounded by the decision budget ([WithTimeout], default
// [DefaultTimeout]) and by the request's own context. When the store fails
// or runs out of budget, [FailOpen] (the default) serves the request without
// rate-limit headers and [FailClosed] answers 503 with a JSON body; the
// error text goes to the log, never to the client. A circuit breaker
// ([WithBreaker]) stops calling a store that keeps failing and probes it
// again after a cooldown, so a dead Redis does not cost every request a
// full timeout.
//
// # Observability
//
// An [Observer] ([WithObserver]) is told the [Outcome] of every request,
// with its latency, but never its key.
package middleware
