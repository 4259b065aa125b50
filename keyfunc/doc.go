// Package keyfunc derives the identity a request is rate-limited under: a
// [KeyFunc] turns a request into an identity, or into an error.
//
// An identity is the value as the application knows it: the client
// address "203.0.113.7", the verified subject "alice", the route pattern
// "/users/{id}". The middleware hands it unchanged to tier hooks, and its
// Reset and Allow methods take it back in the same form; it namespaces
// identities by policy and tier itself, and the stores escape or hash
// whatever bytes reach them.
//
// Every key function states what it trusts and how it fails. A key
// function never returns an empty identity, and none of them turns a
// failure into a shared identity: when a request carries no identity of
// the kind a function looks for, it returns an error wrapping
// [ErrNoIdentity], and the middleware puts the request in another tier or
// refuses it as configured; any other error means the request is
// malformed for that key function (the middleware answers 400).
//
// # Client IP
//
// [RemoteIP] keys by the peer address of the connection (RemoteAddr) and
// reads no header: a client cannot change its key by sending
// X-Forwarded-For, Forwarded or X-Real-IP. [NewClientIP] builds a
// [ClientIP] whose [ClientIP.Key] reads a forwarding header only from
// peers named in [IPOptions.TrustedProxies]
// (CIDR prefixes) or, with [IPOptions.TrustedHops], from a fixed number of
// proxies that every request passes through.
//
// With trusted proxies, X-Forwarded-For and Forwarded (RFC 7239) are read
// over all their lines, in order, and walked from the right: trusted
// addresses are skipped and the first untrusted one is the client, so the
// entries a client outside the trusted prefixes adds on the left never
// matter, and are never read. If every address is trusted, the leftmost
// one is the client. A client whose own address is trusted is taken for a
// proxy: the entries it sent on the left are read as a proxy's, so it can
// name any identity, another client's included. List only the proxies'
// own addresses, never a network that also holds clients (all of
// 10.0.0.0/8 when internal hosts call the service through the proxy). The walk reads
// at most [IPOptions.MaxHops] entries (16 by default) of at most 512 bytes
// each, so a header of any size costs no more than that; a client further
// left is refused. A single-address header such as X-Real-IP,
// CF-Connecting-IP or True-Client-IP is read only when the peer is
// trusted.
//
// Addresses are canonical: IPv4-mapped IPv6 addresses become IPv4 and zones
// are dropped. IPv6 clients are grouped by /64 by default, so that one
// subscriber rotating through its block stays one client; IPv4 clients are
// keyed alone unless [IPOptions.IPv4Prefix] groups them. The identity is
// the address or masked prefix in its one textual form: "203.0.113.7",
// "198.51.100.0/24", "2001:db8:1:2::/64".
//
// A RemoteAddr that is not "IP:port" (empty, garbage, "[::1]", a Unix
// socket's "@") fails with [ErrMalformedAddress]. So does a trusted
// proxy's header that cannot name the client (garbage, an "unknown" or
// obfuscated node such as "_hidden" where the walk needs an address, a
// Forwarded element without "for", a chain shorter than TrustedHops, a
// client beyond MaxHops entries), unless [IPOptions.UsePeerOnMalformed]
// keys such a request by the peer. ErrMalformedAddress does not wrap
// ErrNoIdentity. Untrusted peers' headers are never parsed, so they cannot
// cause it.
//
// # JWT subject
//
// [JWTSubject] keys by the "sub" claim of a JSON Web Token verified with
// github.com/golang-jwt/jwt/v5; the identity is the subject. The token
// comes from "Authorization: Bearer", another header or a cookie, bounded in
// length before it is parsed. Only algorithms in an explicit allow-list are
// accepted ("none" never), and the verification key must match the
// algorithm's family (an HMAC secret for HS*, an RSA key for RS*/PS*, an
// ECDSA key on the right curve for ES*, an Ed25519 key for EdDSA), so an RSA
// public key can never be used as an HMAC secret. exp (required unless
// [JWTOptions.ExpirationOptional]) and nbf are checked with a leeway of 30
// seconds by default; issuer and audience when configured. A missing token
// fails with an error wrapping ErrNoIdentity, any other problem with
// [ErrInvalidToken], which wraps ErrNoIdentity too.
//
// [FromContextFunc] instead reads an identity that the application's own
// authentication middleware stored in the request context, and trusts that
// middleware entirely.
//
// # Route
//
// [Route] keys by the matched route pattern, never the raw path: chi's
// matched pattern, or the pattern http.ServeMux stored in Request.Pattern.
// Requests that match no route share "unmatched". See [Route] for
// where the limiter must sit for each router, and [MuxRoute] for a limiter
// that wraps a whole ServeMux.
//
// # Header, constant and composition
//
// [Header] keys by a header value such as an API key, hashed (SHA-256, or
// HMAC-SHA256 with a secret) so that the value never reaches the store,
// the logs or the hooks in clear; it trusts the client and fails with
// ErrNoIdentity when the header is missing. [Constant] gives every request
// one identity, for a global limit. [Join] combines identities injectively
// (a per-route, per-client limit).
//
// To key by the verified subject when there is one and by the client
// address otherwise, give the middleware both: its AuthOptions classifier
// puts the two kinds of client in separate tiers, with separate counters
// and limits, so that a subject can never share a bucket with an address.
//
// Subjects, context identities and header values are compared as exact
// bytes, without Unicode normalization: two spellings of one name are two
// identities, as they are to the token issuer.
package keyfunc
