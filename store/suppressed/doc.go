// Package suppressed sheds load above a soft limit instead of refusing at
// a cliff: a layer over a counting limit that admits a share of the
// requests above the soft limit, so that the admitted rate comes back to
// the configured one while clients over it still see some requests
// through. It is the one place where the strategy is stated; the memory
// and Redis stores decide it in one atomic step each (the Redis one in
// the lua package's suppressed script), and the conformance suite
// (package store/storetest, "suppressed/..." subtests) checks both
// against this statement.
//
// [New] wraps a store: every request through it is decided with this
// strategy. Each of its limits is a [store.SlidingWindowCounter], the
// counting limit: its Rate per Period is the hard limit H (X-RateLimit-Limit
// and [store.Decision.Capacity] report it), and [Options.Soft] gives the
// soft limit S, half of H by default:
//
//	st, _ := suppressed.New(mem, suppressed.Options{})
//	// Shed from 10 per minute, refuse everything over 20.
//	lim := store.Limit{Algorithm: store.SlidingWindowCounter, Rate: 20, Period: time.Minute}
//
// A request of cost c with the random value u ∈ [0, 1) is decided as
// follows.
//
// State per limit: the sliding window counter's {w, cur, prev} (package
// store, "Semantics")
// for the accepted units, the same two windows' counts of offered units
// (every request a Take decides, admitted or refused), and a cached
// factor f with the time it was computed. acc and off are the weighted
// estimates prev·(P − e)/P + cur of the accepted and the offered units.
//
//   - acc + c ≤ S (below the soft limit): admitted; the factor met is 0.
//   - acc + c > H (over the hard limit): refused, whatever u; the factor
//     met is 1. RetryAfter is the earliest time at which acc + c ≤ H, as
//     for the sliding window counter of capacity H.
//   - otherwise (between the limits, the hard limit included): the factor
//     computed now is f' = 1 − S·(H − acc)/((H − S)·(off + c)) in parts
//     per million (rounded to the nearest, within 0 to 10⁶). The factor
//     met, f, is the cached one when it was computed less than
//     100ms ago (or P/10, when shorter) and is not
//     below f'; else f = f', which a Take caches with the time. So
//     suppression rises at once and eases off at most once per cache
//     period. The request is admitted iff u·10⁶ ≥ f, that is with
//     probability 1 − f; refused, it reports
//     [store.Decision.Suppressed] and a RetryAfter after which it would pass the
//     soft limit whatever the draw (acc + c ≤ max(S, c); 1µs when that
//     already holds, for a cost above S on an empty window).
//
// A Take records the request as offered in every limit whatever the
// verdict, and as accepted in every limit when admitted (all-or-nothing,
// as for every algorithm); with several limits one u serves them all, the
// factor reported ([store.Decision.Suppression]) is the largest met, and a
// refusal is Suppressed when every limit that refused it refused by the
// draw. Remaining, ResetAfter and RetryAfter describe the accepted units
// against H; NextAfter is ResetAfter (0 when the limit is full), the
// moment more quota has surely come, not the exact next unit: a request
// between S and H meets a random draw anyway. A Peek draws its own u and writes nothing, neither the
// request nor a factor it computed.
//
// Why it converges: the factor aims at admitting, over the next period,
// S·(H − acc)/(H − S) units out of the off + c offered: S when the window
// holds S, falling linearly to none at H. Under an offered load of λ·S per
// period (λ > 1), off settles at λ·S and acc near S, where f = 1 − 1/λ:
// the requests are admitted at λ·S·(1 − f) = S per period. A window over S
// raises the factor and one under S lowers it, so deviations are
// corrected within about a period (the closer H is to S, the harder);
// dips below S are refilled at once, which keeps the admitted rate a
// little above S (with H = 2·S, 1.9% at λ = 2 and 2.9% at λ = 5 in the
// memory store's test). While off is still rising (the first period of a burst)
// the factor lags, and the hard limit bounds the overshoot.
//
// What is exact and what is not: the hard limit is exact in the sliding
// window counter's sense (the weighted estimate of accepted units never
// exceeds H, so no aligned window ever accepts more than H), under any
// concurrency, on every store; the rate between S and H is statistical.
// Randomness comes from the Go side (the Rand option of the memory and
// Redis stores, math/rand/v2 by default): the Redis script gets u as an
// argument and stays deterministic, so replicas replay it. Blocks and
// counted refusals do not apply to it; de-duplication and overrides do
// (an [store.OverrideScale] override scales both limits).
package suppressed
