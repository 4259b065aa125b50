// Package limiter is the decision core of ratekeeper: it decides whether a
// client may spend some units of a quota, without HTTP. The HTTP
// middleware (package middleware) is a thin adapter over it; a gRPC
// interceptor or a queue consumer uses it the same way, without importing
// net/http.
//
// # Use
//
// Build a [Limiter] once per policy with [New] on a [store.Store]; it
// validates everything and returns an error naming the field. Then ask
// [Limiter.Decide] for each request, with the client's tier (one of
// [Options].Tiers, or "" without tiers), identity and cost:
//
//	lim, err := limiter.New(st, limiter.Options{Name: "jobs", Limits: []store.Limit{store.PerMinute(100)}})
//	d, err := lim.Decide(ctx, limiter.Request{Identity: tenant, Cost: int64(len(batch))})
//	if !d.Allowed && d.Outcome != limiter.OutcomeDryRun {
//		// refused: retry after d.RetryAfter
//	}
//
// The [Decision] carries the store's answer for the deciding limit
// (Allowed, Capacity, Remaining, ResetAfter, RetryAfter, LimitID,
// Blocked), the instant it resets, the [Outcome], the limits that applied
// and their header values ([headers.Policy]), ready to write as HTTP
// headers or gRPC metadata. [Stack] decides under several limiters at once.
// [Limiter.Wait] waits for the request's turn instead of refusing it, up
// to [Options].MaxWait, with its place reserved at once: a client that
// throttles its own outgoing calls calls it before each.
// [Limiter.Reset], [Limiter.SetOverride] and [Limiter.ClearOverride]
// change a client's state by the same identity; [StoreKey] is the one
// place that builds a client's store key.
//
// # What the core owns
//
// Limits and tiers (static per tier; unlimited and suspended tiers; a
// limits function), the store call through the circuit breaker of the
// store's node, the fallback store, the failure modes ([FailOpen],
// [FailClosed]), per-client overrides, dry run, counting refused
// attempts, de-duplication bounds, nested charging ([Request].Charged),
// in-flight caps ([Options].InFlight, [Limiter.Acquire], with the renewal
// of their leases),
// costs settled after the decision ([Request].Reserve, [Limiter.Settle]),
// logging (log/slog, identities hashed with a keyed hash), the observer's
// [Event] and the refusal hook. It never sees an HTTP request: whatever
// derives the identity (package keyfunc for HTTP) stays with the adapter.
//
// # Failures
//
// A decision's time budget lives in the store (the Redis store's
// Options.Timeout; the memory store never blocks): the store gets the
// caller's context, and the limiter adds no deadline of its own. When the
// store fails, [FailOpen] (the default) admits the request, [FailClosed]
// refuses it, and a fallback store ([Options].Fallback) decides in its
// place; the error text goes to the log and the error, never into a
// refusal. A circuit breaker stops calling a store that keeps failing and
// probes it again after a cooldown, so a dead Redis does not cost every
// request a full timeout.
package limiter
