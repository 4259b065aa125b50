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
// A [Request] names a key, one or more limits and a cost, and optionally
// counts its refusals or carries a de-duplication id. Every limit must
// admit the request; if any refuses, nothing is recorded anywhere
// (all-or-nothing), unless the request counts refusals, which records it in
// every limit. Being limited is a [Decision] with Allowed false, never an
// error: errors mean an invalid request or a failing backend, and backend
// failures wrap [ErrStoreUnavailable].
//
// # Semantics
//
// All stores compute in integer microseconds of their own clock (Redis: the
// server's TIME; memory: an injectable clock), with float64 arithmetic where a
// rate divides time. Below, now is the current time, P the period, R the rate,
// B the capacity ([Limit.Capacity]) and c the cost. Durations reported in a
// [Decision] are rounded up to the microsecond (a block's remaining time to
// the millisecond, see below). A RetryAfter computed in floating point is
// corrected by whole microseconds against the admission test itself, so it
// is the smallest wait after which the same request is admitted.
//
//   - GCRA and TokenBucket are one algorithm (two names for the same
//     arithmetic; users coming from either model find theirs). State per
//     limit is {ts, used}: the units used at time ts, draining at R/P per
//     µs (absent = nothing used). At now, used = max(0, used − (now − ts)·R/P).
//     The request is admitted iff used + c ≤ B; then used += c and
//     ts = now. In GCRA terms, with emission interval T = P/R and tolerance
//     τ = B·T, TAT = ts + used·T and "admitted iff max(TAT, now) + c·T − now
//     ≤ τ" is the same test; storing units rather than an absolute TAT keeps
//     it exact (a float64 TAT in µs at today's epoch has 0.25µs resolution)
//     and independent of the limit's parameters (see "Changing a limit").
//     Remaining = ⌊B − used⌋ (within [0, B]), ResetAfter = used·P/R, and a
//     denied request's RetryAfter = (used + c − B)·P/R. The state expires
//     when used has drained to zero.
//   - The window algorithms count up to their capacity B = R.
//   - SlidingWindowLog: one sorted log per key and set of limits, holding a
//     timestamp per recorded unit. Units in the window are those with
//     timestamp > now − P. Admitted iff count + c ≤ B for every limit
//     (checked before adding), then c entries are added at now. A denied
//     request's RetryAfter is s_k + P − now where s_k is the k-th oldest
//     entry in the window and k = count + c − B. ResetAfter =
//     newest + P − now.
//   - SlidingWindowCounter: windows aligned at multiples of P; cur and prev
//     are the counts of the current and previous window, e the time elapsed
//     in the current one. est = prev·(P − e)/P + cur; admitted iff
//     est + c ≤ B. Remaining = ⌊B − est⌋. RetryAfter is the earliest time
//     at which est + c ≤ B, ResetAfter the time until est reaches 0.
//   - FixedWindow: windows aligned at multiples of P; admitted iff
//     cur + c ≤ B. ResetAfter (and a denied request's RetryAfter) is the
//     time to the end of the window.
//
// NextAfter, the time until a limit next makes quota available, is
// stated per algorithm in "Next quota" below.
//
// # Suppression
//
// Shedding load above a soft limit, instead of refusing at a cliff, is not
// an algorithm of this package but a layer over a sliding window counter:
// package [github.com/ratekeeper/ratekeeper/store/suppressed] states and
// tests its semantics.
//
// # Changing a limit
//
// Every algorithm stores what was used, never what is left, so a changed limit
// applies to the units already used at once: raising a key's limit from 2/min
// to 10/min gives a client who used 2 the remaining 8 right away, and cutting
// 10/min to 2/min refuses a client who already used 3 until enough has drained
// (GCRA and TokenBucket, at the new rate) or the window has moved on (window
// algorithms). A bucket's state written before the cut still expires when it
// would have drained at the rate that wrote it (its TTL was set then): a cut
// to a slower rate holds the units used before it for at most that long, and
// every unit used after it in full. State is kept per limit ID
// ([Limit.ID]): a limit that keeps its ID keeps its state across changes of
// Rate, Period or Burst; changing the algorithm starts from fresh state.
//
// A limit trips when count + c > B. A "refuse when the count reaches N"
// limit (">=" rather than ">") is a limit of Rate N − 1.
//
// Remaining, ResetAfter and NextAfter, and each entry of
// [Decision.PerLimit], describe a limit after the request when the request
// is admitted and recorded, and without it otherwise: when it is denied
// (even if CountDenied records it), blocked, or admitted as a duplicate.
//
// # Next quota
//
// [Decision.NextAfter] (and [LimitState.NextAfter]) is the time until a
// limit next makes quota available if nothing more is recorded: the wait
// after which it admits Remaining+1 units, the moment a request for one
// unit more than it has left would be admitted. It is 0 exactly when the
// limit is full (Remaining is the capacity): no more quota will come. It
// is never later than ResetAfter (more quota comes no later than all of
// it), and, for a refusal, never later than RetryAfter (the deciding
// limit's value is capped there). Per algorithm:
//
//   - GCRA and TokenBucket: unit Remaining+1 is free once used has drained
//     to B − Remaining − 1, (B − Remaining − 1)·P/R before the limit is
//     full. Both stores derive it from Remaining and ResetAfter:
//     ResetAfter − (B − Remaining − 1)·P/R, rounded up, plus 1µs for the
//     floating point of the admission test, within [1µs, ResetAfter]. It
//     is never before the exact instant and at most 3µs after it.
//   - SlidingWindowLog: once the (B − Remaining)-th newest entry in the
//     window leaves it (the oldest entry in the window unless counted
//     refusals took the count past B): s + P − now. After an admission
//     into an empty window, P.
//   - SlidingWindowCounter: the earliest time at which est ≤ B − Remaining
//     − 1, computed (and made exact to the microsecond) as a RetryAfter
//     is: inside this window while the previous window's weight falls, or
//     in the next, where the current window has become the previous one.
//   - FixedWindow (a calendar window too): every unit comes back at the
//     window's end: ResetAfter.
//
// A blocked request reports NextAfter = RetryAfter (nothing is made
// available before the block ends), as does a suspended client; an exempt
// client's limits are full. Where a store cannot know the next unit it
// reports ResetAfter, the moment more quota has surely come: the
// suppressed strategy (package store/suppressed), a Redis store's user
// script, and the hybrid store's local answers (package store/hybrid).
//
// With several limits, the deciding limit ([Decision.LimitID]) of a denied
// request is the denying limit with the longest RetryAfter (ties: the
// earliest), so waiting RetryAfter is enough for every limit; for an
// admitted request it is the limit with the fewest units remaining (ties:
// the earliest). A client that waits exactly RetryAfter and sends the same
// request is admitted, unless other requests were recorded meanwhile (with
// CountDenied, a refused request counts as one).
//
// # Blocks, counted refusals and de-duplication
//
// A Take runs these steps as one atomic step:
//
//  1. The request is validated before any state is read.
//  2. Block check, for a request with at least one blocking limit (Block >
//     0; a request without one is not subject to blocks and pays nothing
//     for them): while the key's block lasts, the request is refused with
//     Blocked, RetryAfter = ResetAfter = the later of the block's remaining
//     time and the longest RetryAfter of the request's limits that refuse
//     it (computed without it, as in step 4; a block shorter than a
//     window's period can end while the window is still full), Remaining
//     0, LimitID the ID of the limit that started the block and Index its
//     position in this request (−1 when it is not there; Limit is
//     then the first limit's capacity). A block belongs to the key, whatever
//     limits later requests carry. With CountDenied the attempt is recorded
//     in every limit; nothing else is written.
//  3. De-duplication, when DedupID is set: an id admitted for this key
//     within its window (DedupWindow, a minute by default, at most the
//     longest period of the request's limits) and replayed fewer than
//     DedupReplays times (3 by default) admits the request again, with
//     Duplicate; a take counts the replay against the id and writes
//     nothing else. An id with no replay left is decided as in step 4 and
//     stays as it is until its window ends, so one id gets at most
//     DedupReplays admissions more than requests without an id would.
//  4. Every limit evaluates the request.
//  5. Admitted: it is recorded in every limit and its DedupID remembered for
//     its window with no replay yet, unless the id is live with no replay
//     left (only admitted ids are remembered; ids longer than 128 bytes
//     are kept as their SHA-256). Refused: with
//     CountDenied it is recorded anyway; then, if refusing limits have a
//     Block, the one whose block is longest after escalation (ties: the
//     earliest) blocks the key, and the request reports Blocked and
//     BlockStarted with RetryAfter = ResetAfter the later of the block's
//     duration and the refusing limits' longest RetryAfter. However many
//     refusals race, one starts the block; none extends it.
//
// With BlockMax > Block, the n-th block of a key lasts
// min(Block·2^(n−1), BlockMax): each block that escalates adds a strike to
// the key, and the strike count is kept for that block's duration plus
// BlockMax after it starts, then forgotten. Blocks and strike counts keep
// whole milliseconds, as Redis key TTLs do: a block started at time t for d
// ends at ⌊t⌋ms + d and is reported with its remaining time rounded up to
// the millisecond; a strike count set at t for d lasts while
// ⌊now⌋ms ≤ ⌊t⌋ms + d.
//
// CountDenied is for the window algorithms only. Counts may then exceed the
// capacity (Remaining stays 0), and RetryAfter is computed without the
// refused attempt. The attempt is recorded in every limit, so a retry at
// RetryAfter may still be refused by it: in a limit it filled (a daily
// limit beside the per-minute one that refused), or in a sliding window,
// which still holds it then (a single fixed window does not: the window
// RetryAfter waits for forgets it). A Peek of the same request after the
// refusal gives the wait with the attempt; package middleware/limiter
// reports the longer of the two, so that its wait holds for a client that
// stops. One that keeps trying keeps counting, which is the point for
// login brute-force limits. A sliding
// window log keeps only its newest (largest R + cost) entries, which changes
// no decision.
//
// Peek runs steps 1 to 4 and writes nothing: it reports an existing block
// or a remembered id with a replay left (without using it); where Take would start a block it reports the
// refusal without Blocked. Reset forgets the key's block, strike count and
// remembered ids along with the state of the given limits.
//
// # Partial grants
//
// A [Request.Partial] request of cost c takes as many of its c units as
// fit now instead of all or none. Its grant g is the largest number of
// units, at most c, that every limit admits at this moment: ⌊B − used⌋
// for GCRA and the token bucket, B − count for the sliding window log
// (each limit's count in its window), ⌊B − est⌋ for the sliding window
// counter and B − cur for the fixed window (c may exceed B; g never
// does). When g ≥ 1 the request is decided and recorded exactly as a
// request of cost g, in one atomic step with the measurement, and
// [Decision.Granted] is g. When g is 0 (a limit is full, or the key is
// blocked) it is decided as a request of cost 1, which is refused: its
// RetryAfter is the time until one unit fits, a refusing limit with a
// Block blocks the key, and Granted is 0. A Peek reports the decision and
// the grant a Take would make now and writes nothing.
//
// # Waiting instead of refusing
//
// A [Request.MaxWait] request of cost c (GCRA and the token bucket) that
// its limits refuse now but would admit within MaxWait is admitted with
// a delay instead: d is the smallest wait after which every limit admits
// it (each limit's RetryAfter, the longest of them), and when d ≤
// MaxWait the request is recorded in the same atomic step as the
// decision as if it arrived at now + d: each limit's units then (used
// drained to now + d, plus c) are written at now on the same line, that
// is with the units that drain until then added. The state then holds
// more than the capacity, so that every later request is decided behind
// the reserved one, exactly as the request will proceed: waiters never
// exceed the limit, and a crowd of waiters leaves in turn instead of at
// once. [Decision.Delay] is d; Remaining (and PerLimit's) is what the
// limit will have left when the request proceeds, ResetAfter is counted
// from now. A request whose d exceeds MaxWait is refused as without
// MaxWait (RetryAfter d), and one that fits at once is decided exactly as
// without it (Delay 0). A refusal by a limit that blocks, beyond MaxWait,
// starts the block; a request admitted with a delay starts none. A Peek
// reports what a Take would, writing nothing.
//
// The place is given back with [Waiter.CancelWait] when the caller will
// not proceed: each limit whose state is still the one the reservation
// wrote is put back as it was before the reservation. A limit written
// since (a later request reserved behind it) keeps the units: giving them
// back would let a newcomer take a turn at the same time as the later
// waiter's, so the cancelled turn goes unused. Places given back from the
// last one backwards are all given back.
//
// # Calendar quotas
//
// A [FixedWindow] limit with [Limit.Calendar] counts in calendar windows
// of its [Limit.Location] (UTC when nil) instead of windows of Period
// (which is then 0): "day" runs from one local midnight to the next,
// "week" from Monday's midnight to the next Monday's, "month" from
// midnight on the 1st to midnight on the next 1st. The windows end at the
// real boundaries: a day is 23 or 25 hours long when daylight saving time
// starts or ends, a month 28 to 31 days (plus or minus the hour of a
// change inside it), and where the clocks skip midnight the day starts at
// the instant they jump to. Within its window a calendar limit is
// decided exactly as a fixed window: admitted iff cur + c ≤ B, and
// ResetAfter (and a refusal's RetryAfter) is the time to the window's
// end. Its state expires at that end, and its default ID is
// "fixed_window/<calendar>". A request may mix calendar limits with
// fixed windows of a Period, and carry blocks, counted refusals,
// de-duplication ids and overrides as any request; not Partial, and not
// in a stack. The memory store computes the window from its clock; the
// Redis store computes the windows around its own clock and the script
// picks the one that holds the server's TIME (an error when the two
// clocks differ by more than a window).
//
// # Costs settled after the response
//
// A cost known only once the request is served (tokens of a model's
// answer, bytes sent) is reserved and then settled: a Take with the
// estimated cost c reserves it like any request, and [Refunder.Settle]
// with the actual cost a applies d = a − c to the key's limits at once,
// in one atomic step. A charge (d > 0) may take a limit past its capacity
// B, and requests are then refused until the overrun is paid back; a
// give-back (d < 0) returns units to what the reservation recorded and
// never takes a count below 0. Per algorithm:
//
//   - GCRA and TokenBucket: at now, for each limit, used =
//     max(0, used − (now − ts)·R/P) + d, floored at 0, and ts = now
//     (absent state counts as 0 used; a result of 0 leaves the limit as
//     fresh). An overrun drains like any use: a request is refused until
//     used + c ≤ B again (RetryAfter (used + c − B)·P/R as ever); a
//     give-back returns at most what is still counted, the newest units
//     first.
//   - FixedWindow: a charge adds d to the count of the window holding now
//     (created when absent), which may exceed B: the key is refused for
//     the rest of that window, and the overrun is paid back when the
//     window ends, since a fixed window forgets everything then. A
//     give-back subtracts |d| from the count of the window that holds the
//     take's time ([Decision.Taken]) while the key's state is that window,
//     floored at 0; once a later window has started counting, the units
//     are no longer counted and nothing is given back.
//   - SlidingWindowCounter: a charge adds d to cur in the window holding
//     now (with the previous window's count as a take would carry it),
//     so est may exceed B: a request is refused until est + c ≤ B, which
//     happens while the window holding the overrun weighs less and less as
//     prev in the next one. A give-back subtracts |d| from cur when the
//     state's window holds the take's time, from prev when the state's
//     window is the one after it (the take's units still weigh there),
//     floored at 0; otherwise they no longer count and nothing changes.
//   - SlidingWindowLog: a charge records min(d, B_max) units at now, B_max
//     being the largest capacity of the request's limits (more would change
//     no decision: the log is full for a period either way); a request is
//     refused until enough units have left the window (RetryAfter as
//     ever). A give-back removes up to |d| of the units recorded at the
//     take's time that the log still holds (units of the same microsecond
//     count alike); units that have left the window are gone already.
//
// The window algorithms need the take's time, which a Take reports in
// [Decision.Taken] when the request has [Request.Reserve]; Settle refuses
// their decisions without it. A settlement is applied once per call, and
// a reservation never settled (its instance crashed, or the settlement
// failed) stays charged with the estimate and expires as any recorded
// request: never as free.
//
// # Concurrency
//
// A Store is safe for concurrent use. Each Take is atomic: concurrent Takes
// for one key admit exactly as many requests as a serial run would.
//
// # Capabilities
//
// Beyond [Store], a store may implement optional capabilities, each an
// interface declared beside the others (capability.go) and found with a
// type assertion: [MultiStore] (stacked decisions), [OverrideStore]
// (per-client overrides), [BlockLister] (listing blocked keys),
// [EvictionCounter] and [EvictionPolicyReporter] (evictions),
// [Refunder] (refunds of stacked decisions and settled costs),
// [NodeLocator] (the node that serves a key), [Waiter] (admissions later
// instead of refusals, and the place given back when the caller leaves)
// and [SlotStore] (in-flight caps). Each says which stores implement it. Nothing above
// a store reads or parses its keys: what a caller needs to know about
// stored state, it asks the store through one of these.
//
// # Stacked decisions
//
// A [MultiStore] decides several requests with different keys as one
// ([MultiStore.TakeMulti]): each is checked against its own limits, all
// are recorded only if all admit, and the [MultiDecision] describes the
// most restrictive part. [MultiStore] states what a stack may hold.
package store
