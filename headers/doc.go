// Package headers writes rate-limit response headers from a
// [store.Decision] and nothing else: it never touches the body or the status.
//
// # Fields
//
// [Writer.Write] sets, on every limited route's response:
//
//   - X-RateLimit-Limit: the deciding limit's capacity.
//   - X-RateLimit-Remaining: units still available.
//   - X-RateLimit-Reset: when the limit is back to full capacity, as Unix
//     epoch seconds (default) or, with [ResetDelta], as seconds from now.
//     On a denied request it is the moment the request may be retried, so
//     it never points earlier than Retry-After.
//   - Retry-After: on denied requests only, whole seconds rounded up and at
//     least 1 ([RetryAfterSeconds]).
//
// With [Writer.IETF], [Writer.Compile] also writes the fields of
// draft-ietf-httpapi-ratelimit-headers-10, one list item per limit of the
// policy:
//
//	RateLimit-Policy: "burst";q=10;w=60, "api-1";q=100;w=3600
//	RateLimit: "burst";r=3;t=50, "api-1";r=88;t=3501
//
// q is the limit's capacity, w its period in seconds, r the units remaining
// and t the seconds until the limit is full again (on a refusal, for the
// deciding limit, the wait before a retry, equal to Retry-After).
// [Writer.NoLegacy] drops the X-RateLimit-* set; [Writer.Omit] drops all.
//
// All numbers are formatted with strconv into preallocated canonical header
// keys; writing headers does not allocate beyond the values themselves.
//
// [store.Decision]: https://pkg.go.dev/github.com/ratekeeper/ratekeeper/store#Decision
package headers
