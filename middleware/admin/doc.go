// Package admin is an HTTP API for operating the rate-limiting policies of
// a [policy.Set] while the service runs: list the policies and their
// modes, show what a client has left, reset a client, raise, cut, exempt
// or suspend one client for a while, switch a policy to enforce, dry_run
// or off, list the clients blocked now and the clients refused most over
// the last minutes.
//
//	h, err := admin.New(set, st, admin.Options{
//		Authorize: func(r *http.Request) (string, error) { ... },
//		Top:       top,
//	})
//	mux.Handle("/admin/ratelimit/", http.StripPrefix("/admin/ratelimit", h))
//
// # Security
//
// The API fails closed. Without [Options.Authorize] every request is
// refused with 403; with it, every request is authorized before it is
// routed, so that an unauthorized caller learns nothing, not even which
// paths exist. Authorize returns who is calling, or an error wrapping
// [ErrUnauthenticated] (401) or any other error (403); it sees the method,
// so it can allow reads (GET) to more people than changes (POST). Serve
// the API on an internal listener or behind the same authentication as
// the rest of the application's administration; it can switch limits off.
//
// Mutating endpoints take an application/json body (anything else is
// refused with 415), which a cross-site form cannot send without a CORS
// preflight; bodies are limited to 4 KiB (413 beyond), hold one JSON
// object and nothing after it, and unknown fields are refused (field
// names match regardless of case, as encoding/json matches them, and of
// a field given twice the last counts).
// Every change is logged at info level ("ratekeeper: admin: change") with
// who made it, the policy, and what changed; the identity of a reset
// client is logged as the operator typed it. Refused calls are logged at
// warn level with the authorization error, at most one line a second
// (with not_logged, the refusals held back since the last line) and with
// the path cut to 256 bytes, so that a caller without credentials cannot
// fill the log. A refused caller sees a short JSON error, never the
// authorization error's text; a 400 to an authorized caller says what in
// its request is wrong, and GET /policies shows the last reload's error
// as is. Answers carry Cache-Control: no-store.
//
// An identity is the one the policy's key function gives: for a policy
// keyed by client address, "203.0.113.7", or the prefix a key function
// groups the client in ("2001:db8:1:2::/64" for an IPv6 client, by
// default). An address written in a form no IP key function of package
// keyfunc gives ("::ffff:203.0.113.7", "2001:DB8::1", "fe80::1%eth0",
// "203.0.113.07", an unmasked prefix, "0.0.0.0/0") is refused with 400
// naming the form they give, if any, since an override or reset of it
// would never reach the client.
//
// # Endpoints
//
// Paths are relative to where the handler is mounted. Errors are
// {"error": code, "message": text}.
//
//   - GET /policies: the running configuration: source, checksum,
//     loaded_at, reloads, failures, last_error, and each policy's name,
//     mode, configured_mode, overridden and config (the policy in the
//     file's schema).
//   - GET /policies/{policy}: one policy, as listed.
//   - GET /policies/{policy}/client?identity=I&tier=T: a client's state,
//     read without recording anything and as it is (nothing used: the
//     full capacity remaining and a reset of now, not the state after a
//     hypothetical request): the deciding limit, its capacity, remaining,
//     reset, blocked, blocked_until and retry_after (seconds);
//     or unlimited or suspended for such tiers; and, for a policy with
//     overrides, the client's active override (kind, scale, expires,
//     ttl_seconds), under which the state is read. tier is required for a
//     policy with tiers and refused for one without. A policy that shares
//     another's quota shows the shared counters.
//   - POST /policies/{policy}/reset {"identity": I, "tier": T}: forget the
//     client's counters, block and strikes (middleware.Limiter.Reset);
//     "found" says whether anything was stored.
//   - POST /policies/{policy}/override {"identity": I, "tier": T, "kind":
//     K, "scale": S, "ttl": D}: give the client an override for D (a Go
//     duration, 1ms to 366 days; store.Override): K is raise (S > 1), cut
//     (0 < S < 1) or scale (any S from 2⁻²⁰ to 2²⁰) to multiply every
//     limit's rate and capacity by S, exempt (admitted, not counted), or
//     suspend (403 until it ends). Replaces the client's override; answers
//     it with its expiry. The store must keep overrides (501 otherwise),
//     the identity is required and the tier is read as for the client's
//     state (400 otherwise), a tier unlimited or suspended as a whole
//     takes none (400), and the policy whose quota the client's is must
//     have overrides: true (409 otherwise); the answer names the first
//     of these that fails, in this order.
//   - POST /policies/{policy}/override/clear {"identity": I, "tier": T}:
//     remove the client's override; "found" says whether it had one.
//   - POST /policies/{policy}/mode {"mode": M}: M is enforce, dry_run or
//     off (policy.Set.SetMode, kept across reloads), or clear to return
//     to the file's mode (SetMode with the empty Mode). Answers the
//     policy.
//   - GET /policies/{policy}/blocked?count=N&cursor=C: clients blocked now,
//     with their tier, identity, scope (the limit that blocked them),
//     until and retry_after, and the cursor of the next page ("" at the
//     end). N is 1 to 1000 (default 100). The store lists its blocks
//     ([store.BlockLister]: the memory and Redis stores do; see theirs for
//     how they page); with a store that does not, the endpoint answers 501.
//   - GET /policies/{policy}/top?minutes=M&n=N: the clients the policy
//     refused most over the last M minutes (default and most: the [Top]'s
//     span), with their tier, identity, count and error; a policy that
//     shares another's quota shows the shared policy's. Needs
//     [Options.Top]; 501 otherwise. The counts are this instance's
//     refusals only, and the answer says so ("scope": "instance"): each
//     replica keeps its own list, so ask every replica for the whole
//     picture.
//
// Other paths and methods get http.ServeMux's 404 and 405, once the
// request is authorized.
// A store that fails answers 503 and is logged.
//
// # The most limited clients
//
// A [Top] keeps a bounded summary per policy (Space-Saving over minute
// buckets). The middleware's observers never see identities, so the
// application records refusals itself with [Top.Record] where it knows
// the identity.
package admin
