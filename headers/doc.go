// Package headers owns the rate-limit response header fields: it is the
// one place that says what each field means and that formats them. Choose
// the fields with [Options] (the middleware's Options.Headers field takes
// one); an adapter that writes them itself (an HTTP middleware, an RPC
// interceptor writing metadata) formats a policy's values once with
// [NewPolicy] and writes a decision's with [Policy.Write].
//
// # Fields
//
// On every response of a limited route (unless [Options.Omit]):
//
//   - X-RateLimit-Limit: the capacity of the deciding limit (its burst, or
//     its rate for window algorithms).
//   - X-RateLimit-Remaining: the units the deciding limit would still
//     admit now.
//   - X-RateLimit-Reset: when the deciding limit is back to full capacity,
//     as Unix epoch seconds rounded up (default) or, with
//     [Options.ResetDelta], as seconds from now. On a refusal it is the
//     moment the request may be retried, the instant Retry-After names.
//
// With [Options.Suppression], for a route whose store sheds load above a
// soft limit (package store/suppressed), on every response unless
// [Options.Omit]:
//
//   - X-RateLimit-Suppression: the suppression factor the request met, a
//     decimal from 0 to 1 (at most six decimals, such as 0.090909): the
//     share of requests between the soft and the hard limit that are
//     refused. 0 below the soft limit, 1 at or over the hard limit. A
//     client that sees it above 0 is over the configured rate and should
//     slow down; X-RateLimit-Limit is then the hard limit.
//
// On every refusal (429), whatever the Options say:
//
//   - Retry-After: whole seconds, rounded up and at least 1, after which
//     the same request would be admitted if nothing else is recorded
//     meanwhile.
//
// The one 429 without Retry-After is a request whose cost exceeds a
// limit's capacity: no wait can admit it. It still carries the
// X-RateLimit-* fields, and its JSON body says "cost_exceeds_limit".
//
// With several limits, the deciding limit is the one that refused (the
// longest wait) or, for an admitted request, the one with the fewest units
// left.
//
// # IETF fields
//
// With [Options.IETF] the fields of draft-ietf-httpapi-ratelimit-headers-10
// are added, one list item per limit of the policy:
//
//	RateLimit-Policy: "burst";q=10;w=60, "api-1";q=100;w=3600
//	RateLimit: "burst";r=3;t=50, "api-1";r=88;t=3501
//
// An item is named after the policy when there is one limit, else after
// the limit's Name, or "<policy>-<index>" when it has none. q is the
// limit's capacity, w its period in seconds, r the units remaining and t
// the seconds until the limit is full again (on a refusal, for the
// deciding limit, the wait before a retry, equal to Retry-After).
// [Options.NoLegacy] drops the X-RateLimit-* set.
//
// # Names
//
// With [Options.Bucket], X-RateLimit-Bucket names the limiter (its
// Options.Name) and X-RateLimit-Tier the request's tier, for limiters with
// tiers.
//
// Dry-run limiters write the same fields on the responses they let
// through, but never Retry-After, so that polite clients do not back off
// from a limit that is not enforced yet.
package headers
