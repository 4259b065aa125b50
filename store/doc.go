// Package store defines the rate-limiting domain shared by every backend:
// [Limit], [Algorithm], [Request], [Decision] and the [Store] interface.
//
// Backends live in sub-packages: [github.com/ratekeeper/ratekeeper/store/redisstore]
// runs one atomic Lua script per decision on Redis (single node, Sentinel or
// Cluster), and [github.com/ratekeeper/ratekeeper/store/memstore] keeps state
// in process memory. Both implement the semantics below exactly, and both pass
// the conformance suite in [github.com/ratekeeper/ratekeeper/store/storetest].
//
// # Requests and decisions
//
// A [Request] names a key, one or more limits and a cost. Every limit must
// admit the request; if any refuses, nothing is recorded anywhere
// (all-or-nothing). Being limited is a [Decision] with Allowed false, never an
// error: errors mean an invalid request or a failing backend, and backend
// failures wrap [ErrStoreUnavailable].
//
// # Semantics
//
// All stores compute in integer microseconds of their own clock (Redis: the
// server's TIME; memory: an injectable clock), with float64 arithmetic where a
// rate divides time. Below, now is the current time, P the period, R the rate,
// B the capacity ([Limit.Capacity]) and c the cost. Durations reported in a
// [Decision] are rounded up to the microsecond.
//
//   - GCRA: emission interval T = P/R, tolerance τ = B·T, state TAT
//     (theoretical arrival time, absent = now). With t = max(TAT, now) and
//     n = t + c·T, the request is admitted iff n − now ≤ τ; then TAT = n.
//     Remaining = ⌊(τ − (n − now))/T⌋ (admitted) or ⌊(τ − (t − now))/T⌋
//     (denied); ResetAfter = n − now or t − now; RetryAfter = n − τ − now.
//   - TokenBucket: refill r = R/P per µs, state {tokens, ts} (absent = B
//     tokens). tokens = min(B, tokens + (now − ts)·r); admitted iff
//     tokens ≥ c, then tokens −= c and ts = now. Remaining = ⌊tokens⌋,
//     ResetAfter = (B − tokens)/r, RetryAfter = (c − tokens)/r.
//   - SlidingWindowLog: one sorted log per key holding a timestamp per
//     admitted unit. Units in the window are those with timestamp > now − P.
//     Admitted iff count + c ≤ R for every limit (checked before adding),
//     then c entries are added at now. A denied request's RetryAfter is
//     s_k + P − now where s_k is the k-th oldest entry in the window and
//     k = count + c − R. ResetAfter = newest + P − now.
//   - SlidingWindowCounter: windows aligned at multiples of P; cur and prev
//     are the counts of the current and previous window, e the time elapsed
//     in the current one. est = prev·(P − e)/P + cur; admitted iff
//     est + c ≤ R. RetryAfter is the earliest time at which est + c ≤ R,
//     ResetAfter the time until est reaches 0.
//   - FixedWindow: windows aligned at multiples of P; admitted iff
//     cur + c ≤ R. ResetAfter (and a denied request's RetryAfter) is the
//     time to the end of the window.
//
// With several limits, the deciding limit ([Decision.Policy]) of a denied
// request is the denying limit with the longest RetryAfter, so waiting
// RetryAfter is enough for every limit; for an admitted request it is the
// limit with the fewest units remaining. A client that waits exactly
// RetryAfter and sends the same request is admitted, unless other requests
// were recorded meanwhile.
//
// # Concurrency
//
// A Store is safe for concurrent use. Each Take is atomic: concurrent Takes
// for one key admit exactly as many requests as a serial run would.
package store
