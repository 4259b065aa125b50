package headers

// Writer chooses the rate-limit headers the middleware writes on every
// response of a limited route (see the package documentation for each
// field's meaning). The zero value writes the X-RateLimit-* set with
// epoch-second resets, and Retry-After on refusals. A Writer is a plain
// value: the middleware copies it at construction.
type Writer struct {
	// ResetDelta writes X-RateLimit-Reset as seconds from now instead of
	// Unix epoch seconds.
	ResetDelta bool
	// Omit suppresses every rate-limit header except Retry-After, which a
	// refusal (429) always carries: useful on login routes, where the
	// remaining count helps attackers pace themselves, while a locked-out
	// user still learns when to come back.
	Omit bool
	// IETF adds the RateLimit-Policy and RateLimit fields of
	// draft-ietf-httpapi-ratelimit-headers-10, one item per limit.
	IETF bool
	// NoLegacy drops the X-RateLimit-Limit, -Remaining and -Reset fields;
	// use it with IETF to send the standard fields only. Retry-After is
	// still sent on refusals.
	NoLegacy bool
	// Bucket adds X-RateLimit-Bucket, the limiter's name, and, for a
	// limiter with tiers, X-RateLimit-Tier, the request's tier.
	Bucket bool
}
