// Package middleware rate-limits net/http handlers with a [store.Store]: one
// atomic decision per request, shared by every replica that uses the same
// store. It is a thin adapter over the decision core, package
// [limiter]: it derives each request's identity and tier, asks the core,
// and writes the headers and the answer.
//
// # Use
//
// Build a [Limiter] once per policy with [New] (it validates everything and
// returns an error for bad configuration) and wrap handlers with
// [Limiter.Handler], whose shape is func(http.Handler) http.Handler:
//
//	lim, err := middleware.New(st, keyfunc.RemoteIP, store.PerMinute(10), middleware.Options{Name: "api"})
//	r.With(lim.Handler).Get("/api/ping", ping)       // chi, one route
//	r.Group(func(r chi.Router) { r.Use(lim.Handler) }) // chi, a route group
//	mux.Handle("GET /api/ping", lim.Handler(ping))     // http.ServeMux
//
// [NewTiered] classifies requests into tiers with their own limits; its
// usual [Classifier] is [AuthOptions]: the verified subject when there is
// one, the client address otherwise. [Limiter.WithCost] makes a costly
// route take several units of the same quota.
//
// Everything optional is a field of [Options], whose zero value is the
// default. For the common case, [LimitByIP] is a one-line start:
//
//	r.Use(middleware.LimitByIP(100, time.Minute))
//
// The name ([Options].Name) namespaces a limiter's counters in its store:
// limiters with the same name on one store share one quota, on purpose.
// [New] and [NewTiered] refuse a second limiter without a name on a store
// another limiter without a name uses, so that two policies never end up
// on one quota by accident.
//
// # One request
//
// The key function (or classifier) derives the identity as the
// application knows it, "203.0.113.7" or "alice": a missing identity
// answers 401, a malformed request 400, never a shared or empty key. The
// store takes the request against every limit of the policy at once. The
// rate-limit headers (see package headers) are set before the wrapped
// handler runs, so the ResponseWriter is never wrapped. An admitted
// request goes on, and, with [Options].DecisionInContext, the handler
// finds the [Decision] with [DecisionFrom] (a [limiter.Decision]); a
// refused one gets 429, Retry-After and a JSON body such
// as
//
//	{"error":"rate_limit_exceeded","message":"Too many requests. Try again in 17 seconds.",
//	 "retry_after":17,"limit":100,"remaining":0,"reset":1767225600,"policy":"api"}
//
// A request that passes several limiters of one quota (a route using
// lim.WithCost(10) inside a group that uses lim) is charged once, at the
// largest cost; if the extra units are refused, Retry-After names the time
// when the whole request fits.
//
// # Several policies as one decision
//
// [NewStack] decides a request under several limiters at once, each with
// its own identity (a per-client limit before a route-wide one): the
// request passes only if every policy admits it, a refusal charges none of
// them, and the headers and 429 describe the most restrictive policy.
// Chaining the limiters' Handlers instead charges the first for requests
// the second refuses. The stack's middleware has the same shape as
// [Limiter.Handler].
//
// # Requests in flight
//
// [Options].InFlight caps the requests of one identity that run at once
// (per client, or per route with keyfunc.Route), beside the rate limits
// or alone: a slot is taken before the rate limits are decided and given
// back when the wrapped handler returns, panics or loses its client, and
// a slot whose instance died comes back when its lease ends (live ones
// are renewed in one batch per limiter). A request that finds every slot
// taken gets [Options].InFlightStatus (429 or 503), a Retry-After that
// estimates when a slot frees, and no X-RateLimit-* fields.
//
// # From a handler
//
// [Limiter.Allow] and [Limiter.AllowN] decide for an identity known only
// inside a handler (an e-mail address in the body, an item count), sharing
// the counters of the middleware; [Limiter.Enforce] writes the same
// headers and refusal; [Limiter.Peek] reads without recording.
// [Limiter.Reset] forgets a client, by the same identity.
// [Limiter.ReportCost] tells the limiter the actual cost of the request a
// handler serves (tokens, bytes) once it is known: with
// [Options].DecisionInContext each request's cost is a reservation, and
// the difference is settled when the handler returns, under every
// algorithm (package store, "Costs settled after the response").
//
// # Failures
//
// A decision's time budget lives in the store (the Redis store's
// Options.Timeout; the memory store never blocks): the store gets the
// request's context, and the middleware adds no deadline of its own. When
// the store fails, [limiter.FailOpen] (the default) serves the request
// without rate-limit headers, [limiter.FailClosed] answers 503 with a JSON
// body, and [Options].Fallback decides with a store private to the
// process; the error text goes to the log, never to the client. A circuit
// breaker ([Options].BreakerThreshold) stops calling a store that keeps failing and probes it
// again after a cooldown, so a dead Redis does not cost every request a
// full timeout.
//
// # Observability
//
// An observer ([Options].Observer) is told the [limiter.Outcome] of every
// request, with its latency, but never its identity. Logs
// ([Options].Logger) use the request's context, name the method and route
// pattern, and carry a keyed hash of the identity ([Options].LogSecret).
package middleware
