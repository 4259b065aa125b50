// Package grpclimit rate-limits gRPC servers with the decision core of
// ratekeeper (package middleware/limiter): one policy, one store and one
// quota for a client's HTTP requests and gRPC calls alike. It is its own
// module (github.com/ratekeeper/ratekeeper/middleware/grpc), so that users
// of the HTTP middleware never get gRPC in their module graph, and it does
// not import the HTTP middleware.
//
// # Use
//
// Build a [limiter.Limiter] (or take the one an HTTP middleware.Limiter
// embeds), then an [Interceptor] with [New], and install its unary and
// stream interceptors:
//
//	lim, err := middleware.New(st, keyfunc.RemoteIP, store.PerMinute(100), middleware.Options{Name: "api"})
//	ic, err := grpclimit.New(lim.Limiter, keyfunc.RemoteIP, grpclimit.Options{})
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(ic.Unary()), grpc.ChainStreamInterceptor(ic.Stream()))
//
// A unary call is charged one unit before its handler runs; a stream when
// it opens and, with [Options.PerMessage], for every message the client
// sends. [Options.Exempt] lets methods such as health checks through. The
// limiter's observer, refusal hook and log see every call with the call's
// context, as they see HTTP requests; the limiter's lines about a call
// carry its full method name as grpc_method ([limiter.WithLogAttrs]).
//
// # Identities
//
// A gRPC call travels as an HTTP/2 request, and the interceptor hands it
// to an ordinary key function of package keyfunc in that form: the peer's
// address as RemoteAddr, the request metadata as headers under their
// canonical names, the ":authority" as Host, the full method name
// ("/pkg.Service/Method") as the path and pattern, and the call's context.
// So each key function applies the rules it applies to HTTP:
//
//   - keyfunc.RemoteIP keys by the peer address; a ClientIP built with
//     trusted proxies reads "x-forwarded-for" (or the header it names)
//     only when the peer is one of them, exactly as it reads
//     X-Forwarded-For.
//   - keyfunc.JWTSubject reads the Bearer token of the "authorization"
//     metadata and keys by its verified subject.
//   - keyfunc.Header keys by a hash of a metadata entry, an API key.
//   - keyfunc.Route keys by the full method name.
//   - keyfunc.Join combines them; keyfunc.FromContextFunc reads an
//     identity an authentication interceptor earlier in the chain put in
//     the context.
//
// A peer that is not an IP:port pair (a Unix socket, an in-memory
// listener) has no address for keyfunc's address functions, which refuse
// it.
//
// # Tiers
//
// A limiter with tiers needs each call's tier as well as its identity:
// give [Options.Classify] instead of a key function. The Classify method
// of middleware.AuthOptions puts a call with a verified subject in the
// tier "authenticated" (or "trusted", "suspended") and other calls in
// "anonymous" by address, exactly as for HTTP requests:
//
//	auth := middleware.AuthOptions{Subject: jwtKey, Anonymous: keyfunc.RemoteIP}
//	ic, err := grpclimit.New(lim, nil, grpclimit.Options{Classify: auth.Classify})
//
// A call of an unlimited tier goes on without rate-limit metadata; a call
// of a suspended tier is refused with PermissionDenied.
//
// # Sharing a quota with HTTP
//
// The store key of a decision is formed from the limiter's name, the tier
// and the identity alone ("api:203.0.113.7"; [limiter.StoreKey]), never
// from the protocol. One limiter serving both protocols (an HTTP
// middleware.Limiter and an Interceptor built on its embedded
// limiter.Limiter), or two limiters with the same name and limits on one
// store (in one process or in two, on a shared Redis), with key functions
// that give a client the same identity (keyfunc.JWTSubject with the same
// options, say), therefore charge one quota: a client limited to 10 calls
// per minute gets 10 across both protocols.
//
// # Refusals and metadata
//
// Every decided call gets its limit state in the response header metadata
// (read on the client with grpc.Header), in the style of the IETF
// RateLimit header fields draft before its structured form, with delta
// seconds, whatever header fields the limiter's Options.Headers choose
// for HTTP:
//
//	ratelimit-limit       the deciding limit's capacity
//	ratelimit-remaining   units left after this call
//	ratelimit-reset       seconds until the limit is full again (for a refusal: until a retry)
//	retry-after           on refusals: seconds to wait, rounded up, at least 1
//
// A refused call ends with codes.ResourceExhausted, a message that names
// the wait in seconds and a google.rpc.RetryInfo detail holding the exact
// wait; a call whose cost exceeds a limit's capacity gets no RetryInfo, as
// no wait can admit it. A message refused on a stream with
// [Options.PerMessage] ends the stream the same way, its metadata in the
// trailer. Other answers:
//
//	Unauthenticated    the key function found no identity of its kind (keyfunc.ErrNoIdentity)
//	InvalidArgument    no identity can be derived from the call (a malformed forwarding chain)
//	PermissionDenied   the client is suspended (a suspended tier or override)
//	Unavailable        the store failed and the limiter fails closed (limiter.FailClosed),
//	                   with a RetryInfo detail holding the circuit breaker's cooldown
//	Canceled, DeadlineExceeded   the caller went away or ran out of time while the store decided
//	Internal           the limiter cannot decide the call (a tier it does not know,
//	                   invalid limits from its limits function, a key function
//	                   that panicked: grpc-go recovers no panic, so the
//	                   interceptor does, and reports a rejection)
//
// A limiter with an in-flight cap (limiter.Options.InFlight) holds a slot
// of its client's cap for each call, unary or stream, from before its rate
// decision until the handler returns. A call over the cap ends with
// codes.ResourceExhausted and a RetryInfo holding the cap's estimate of
// when a slot frees (at least a second), and retry-after alone in its
// metadata: no rate limit describes it.
//
// When the store fails and the limiter fails open (the default), the call
// goes on without rate-limit metadata. Dry-run limiters let refused calls
// through with their metadata. Status messages never carry the text of a
// key function's or a store's error.
package grpclimit
