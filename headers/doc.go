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
// All numbers are formatted with strconv into preallocated canonical header
// keys; writing headers does not allocate beyond the values themselves.
//
// [store.Decision]: https://pkg.go.dev/github.com/ratekeeper/ratekeeper/store#Decision
package headers
