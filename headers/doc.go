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
//     It follows no draft: it keeps the meaning of the X-RateLimit-Reset
//     fields most services send (the moment the window, or the bucket, is
//     back to full), which is not the IETF field's t (below).
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
//	RateLimit: "burst";r=3;t=4, "api-1";r=88;t=1702
//
// An item is named after the policy when there is one limit, else after
// the limit's Name, or "<policy>-<index>" when it has none. Each value
// follows a sentence of the draft (section names of -10):
//
//   - q, "Quota Parameter": "the quota allocated for client activity": the
//     limit's capacity ([store.Limit.Capacity]). Under a scale override
//     ([store.OverrideScale]) the field has the deciding limit's item
//     alone, with the decision's capacity: the other limits' quotas
//     changed too, and the decision does not carry them.
//   - w, "Window Parameter": "a time window applicable to the quota ...
//     an interval in seconds ... Sub-second precision is not supported":
//     the whole seconds, at least one, in which a full limit surely
//     empties ([store.Limit.Window] rounded up): the period for the
//     sliding window log and the fixed window, twice the period for the
//     sliding window counter (whose estimate still weighs the previous
//     window), and Burst·Period/Rate, the time a full bucket takes to
//     drain, for GCRA and the token bucket. So the policy is one the limit
//     keeps: a client that never sends more than q units within any w
//     seconds, for every item, is never refused by these limits. 10 per
//     minute with a burst of 20 is q=20;w=120 (20 at once, and 10 per
//     minute over time); 100 per minute with a burst of 10 is q=10;w=6.
//     Where the limit cannot be said exactly in whole seconds the item is
//     such a promise, below what is enforced: 7 per minute with a burst of
//     10 is q=10;w=86 (the drain time, 85.7 s, rounded up), a sub-second
//     period with a capacity of 5 is q=5;w=1 (5 at once is all a client
//     can be sure of in any second), a sliding window counter of 10 per
//     minute is q=10;w=120. One item per limit says all a client may
//     rely on: the draft's items all apply at once, so a second item for
//     the same limit could only narrow it. The promise is the store's
//     algorithm's: over a store of package store/suppressed, q is the hard
//     limit, and a client above the soft limit meets random refusals
//     (X-RateLimit-Suppression says so).
//   - r, "Remaining Parameter" (4.1.1): "the remaining quota units for the
//     identified policy": the units the limit would still admit now
//     ([store.Decision.Remaining]).
//   - t, "Reset Parameter" (4.1.2): "the number of seconds until
//     additional quota associated with the quota policy is made
//     available", and in the list of 4.1, "the time until additional
//     quota is made available": the seconds, rounded up, until the limit
//     admits one unit more than r ([store.Decision.NextAfter]; package
//     store, "Next quota", says it per algorithm). Not the time until the
//     limit is full, which the draft does not ask for and which may be far
//     later: a client that waits t when r=0 finds a unit, and a second
//     earlier it would not (the draft's "Client Behavior": "A client SHOULD
//     NOT exceed the quota units conveyed by the remaining parameter before
//     the time window expressed in the reset parameter").
//   - No t for a full limit: no additional quota will come, and t is
//     OPTIONAL (4.1); the draft's example in 4.2 of a limit "that has no
//     time window reset" is an item with r alone. t=0 would tell a client
//     that quota beyond r is available now, which is false.
//   - A refusal: the refusing limit's t is when its next unit comes, which
//     for a request of several units may be before Retry-After (the
//     draft's example "Use in throttled responses" makes the two the same
//     moment, "but this is not a requirement"). Every limit of a blocked
//     key reports r=0 and t equal to Retry-After: nothing is made
//     available before the block ends.
//   - Retry-After against t, "Server Behavior" (6): "If a response
//     contains both the Retry-After and the RateLimit header fields, the
//     Retry-After field value SHOULD NOT reference a point in time earlier
//     than the reset parameter": on a refusal, an item whose t would be
//     later than Retry-After (a long limit with units left, next to the
//     short limit that refused) is sent without t (OPTIONAL, 4.1). Every t
//     sent with Retry-After is at most its value, and Retry-After is the
//     wait after which this request, at its cost, is admitted
//     ([store.Decision.RetryAfter]).
//
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
