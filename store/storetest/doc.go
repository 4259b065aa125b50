// Package storetest is the conformance suite for implementations of
// [store.Store]: every store in this module runs it, the in-memory store on
// a fake clock in its unit tests and the Redis store against a real server
// in the integration tests. A third-party store passes it too before it
// claims the semantics documented in package [store]. With a store
// whose clock and random draws can be injected:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Harness {
//			clock := newManualClock() // Now and Advance, safe for concurrent use
//			rnd := &storetest.FakeRand{}
//			s, err := mystore.New(mystore.Options{Clock: clock.Now, Rand: rnd.Float64})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return storetest.Harness{Store: s, Advance: clock.Advance, Exact: true, Rand: rnd}
//		})
//	}
//
// # Harnesses
//
// [Run] builds a fresh [Harness] for every subtest and runs the subtests in
// parallel, each on keys of its own (a random prefix). A Harness names the
// store, a way to move its clock ([Harness.Advance]) and whether that way
// is exact:
//
//   - With an exact clock (a manual clock's Advance and Exact true) the
//     suite asserts every Remaining, ResetAfter and RetryAfter to the
//     microsecond, including boundaries one microsecond apart, and runs in
//     well under a second.
//   - With real time (Advance = time.Sleep, Exact false) the suite asserts
//     what holds under scheduling jitter and clock skew of a few
//     milliseconds between the store and the test: exact counts, honest
//     retry times (waiting RetryAfter admits), invariants of every
//     decision. Subtests that need exact boundaries are skipped with a
//     reason, and periods and blocks are shorter (blocks of 0.1 to 2
//     seconds). No subtest sleeps for more than about three seconds, but the
//     subtests sleep in parallel only up to -parallel (GOMAXPROCS by
//     default): run real-time suites with -parallel 64 or so.
//
// Window algorithms align windows to the store's clock. With real time a
// subtest that must not straddle a window boundary first learns where the
// boundary is (a fixed-window Peek reports the time to it) and waits for
// the next window when the current one is about to end; with an exact
// clock it moves to a window start, which makes durations predictable.
//
// [Harness.Rand] is optional: a [FakeRand] whose Float64 method the store
// draws from for the suppressed strategy (the stores' Rand option),
// so that the suite chooses every draw.
//
// [Harness.KeyTTLs] is optional. When set, it must list only this
// harness's keys (the Redis store: a key prefix per harness), each with
// its kind as the store knows it ([StoredKeys]), and the suite checks
// that every key expires, no later than its state's lifetime and no
// earlier than its state matters, that peeks create nothing, and that
// nothing survives Reset or the lifetime. Blocks, strike counters and
// de-duplication ids are checked against the block's duration, the block
// plus BlockMax and the longest period.
//
// # What is checked
//
// Per algorithm (subtests named "<algorithm>/<property>", e.g.
// "sliding_window_log/retry-after-cost-3"):
//
//   - limit: a fresh key admits exactly Rate (1, 5, 6, 7 and 60), each
//     decision reporting one unit fewer, and denies the next.
//   - burst: GCRA and the token bucket admit Burst at once, above or below
//     Rate, and report it as Limit.
//   - cost: a cost takes that many units; a cost that does not fit is
//     denied and takes nothing; a cost above capacity is an error.
//   - many-units-at-once: units recorded in the same instant all count.
//   - refill: after the ResetAfter of a denial the key is as good as new.
//   - retry-after-cost-1, retry-after-cost-3: waiting RetryAfter admits the
//     same request (exact clock: a microsecond less does not).
//   - retry-after-random (exact clock): random limit sets, costs and waits;
//     every peek equals the take after it and every RetryAfter is exact.
//   - exact (exact clock): a scripted sequence per algorithm with every
//     duration checked.
//   - peek, peek-creates-nothing: a peek answers what Take would and
//     changes nothing, not even a TTL.
//   - reset: Reset frees the key under the given limits only.
//   - reset-not-found: Reset of a key with nothing stored under the given
//     limits (never taken, just reset, state under other limits only or,
//     with KeyTTLs, expired) returns an error matching store.ErrNotFound;
//     one that forgets anything, a block included, returns nil.
//   - limit-change: under the same Name, raising 2/min to 10/min after 2
//     units admits 8 more at once and cutting 10/min to 2/min after 3
//     refuses at once (exact: with the RetryAfter and ResetAfter of the 3
//     units used); a bucket keeps its state across a change of Burst; a
//     changed algorithm starts afresh.
//   - period-change: 2 units under 100 per 2 s, then a period changed to
//     3 per hour under the same Name admits one with none left and, 4.2 s
//     later, refuses 3 more: the state lives as long as the new period
//     calls for (with KeyTTLs, its key's TTL reaches past the old period).
//   - isolation, hostile-keys: keys are limited separately, including
//     keys made of storage syntax, NUL, invalid UTF-8 and 10 KB keys.
//   - concurrent: concurrent takes admit exactly what a serial run would.
//   - multi-all-or-nothing, multi-deciding-limit, multi-exact: a request
//     denied by one limit is recorded in none; the deciding limit is the
//     one with the fewest units left (admitted) or the longest RetryAfter
//     (denied); PerLimit describes every limit.
//   - ttl: key lifetimes, as above.
//   - block: a refusal by a limit with a Block starts a block (Blocked,
//     BlockStarted, LimitID and Index of that limit, RetryAfter the
//     block's duration); the block refuses every request of the key, with
//     any limits, peeks included, and outlives the counting window with
//     RetryAfter its remaining time; after it the key is fresh, and
//     without BlockMax the next block lasts as long. In every block test
//     a blocked request's RetryAfter is the later of the block's
//     remaining time and its limits' own wait (a peek of the same limits
//     without their blocks), and a block's end is checked apart from
//     RetryAfter, by time.
//   - block-started-once: 100 concurrent takes (and 64 counted ones) of
//     rate 5 admit 5; every refusal is Blocked, exactly one BlockStarted.
//   - threshold (window algorithms): 100 concurrent attempts of rate 5
//     admit 5, and of rate 4 (a "refuse when the count reaches 5" limit)
//     admit 4, each starting one block.
//   - block-escalation: Block b, BlockMax 4b: blocks of b, 2b, 4b, 4b; the
//     strike count lapses the block plus BlockMax after the latest block
//     started, and blocks start again at b.
//   - block-choice: the longest (escalated) block among the refusing
//     limits wins, ties to the earliest; admitting limits and limits
//     without a Block start none; strikes belong to the key.
//   - block-reset: Reset lifts the block and forgets strikes and
//     remembered ids, under any limits of the key.
//   - block-ttl (needs KeyTTLs): block, strike and de-duplication keys
//     live as long as they matter and no longer.
//   - peek-blocks: a peek never starts a block, reports an existing one
//     without extending it, records no counted refusal, and a remembered
//     id does not pass a block.
//   - retry-after-block-shorter-than-window (sliding window log): with a
//     Block shorter than the Period, the refusal that starts the block
//     reports the window's wait as RetryAfter, not the block's end; a
//     retry at RetryAfter is admitted and starts no block, one a
//     microsecond earlier is refused (exact clock).
//   - count-denied (window algorithms): refused and blocked attempts are
//     recorded in every limit and use up units; the window then empties
//     as usual.
//   - dedup: an admitted id admits its repeats without recording them
//     (Duplicate, Remaining unchanged); refused ids are not remembered;
//     ids are per key, distinct ids (storage syntax, long ones) count
//     apart, and an id lasts the longest period of the request's limits.
//   - partial: a [store.Request.Partial] request takes what fits (of 5/h,
//     requests for 3, 4 and 4 units are granted 3, 2 and none; 100 units
//     on a fresh key are granted 5), a peek reports the grant a take would
//     make, a refusal waits for one unit (exact: with its RetryAfter), and
//     each is decided as a plain request of its grant's cost on a twin
//     key; granted less than asked leaves the deciding limit empty.
//   - partial-multi: a grant is what every limit admits; partial-block: a
//     partial request granted nothing starts the block of a blocking
//     limit and is refused by it; partial-concurrent: 24 concurrent
//     requests for 3 units against 10/h are granted 10 in all.
//   - settle, settle-concurrent (GCRA and the token bucket; they skip
//     unless the store implements [store.Refunder]): a reservation
//     settled at a higher actual cost charges the difference, at a lower
//     one gives it back (at most what is counted), at its estimate
//     changes nothing, never settled stays charged; an overrun past the
//     capacity refuses until it has drained (exact: to the microsecond);
//     20 concurrent reservations of 5 settled at 2 leave exactly 40 used.
//   - wait, wait-cancel, wait-concurrent, wait-block (GCRA and the token
//     bucket; they skip unless the store implements [store.Waiter]): on a
//     full key of 4 per period, requests allowed to wait get Delays of a
//     quarter and a half period, exact to the microsecond with an exact
//     clock, Remaining 0 and ResetAfter counted from now, and hold their
//     places (a plain request is refused until both have passed); one
//     whose turn is beyond MaxWait is refused and records nothing; a Peek
//     reports the Delay and writes nothing; a request that fits at once
//     is decided as without MaxWait. A place given back with CancelWait
//     is taken by the next request only when no later waiter holds one
//     behind it. 16 concurrent waiters: 12 admitted, in turns a quarter
//     period apart. A waiter starts no block; a refusal beyond MaxWait
//     does.
//
// The suppressed strategy (package store/suppressed over the harness's
// store, subtests "suppressed/<property>"), with [Harness.Rand] choosing each draw (they
// skip without it, but for invalid): regimes (below the soft limit
// admitted whatever the draw; between the limits refused by a draw below
// the factor, Suppressed, admitted by one at or above it, the factor
// rising with every unit; at the hard limit still drawn; over it refused
// with factor 1 and not Suppressed; exact RetryAfter for both refusals),
// factor-follows-offered-load (refusals count as offered),
// factor-held-for-the-cache-period (a lower factor waits for
// the 100ms cache period; exact clock), cost-above-soft-limit, exact
// (concurrent takes with random draws accept at most the hard limit and
// count every accepted unit once), peek (writes nothing, decides like the
// take after it), reset, multi (all-or-nothing, one draw, Suppressed when
// every refusing limit drew), ttl and invalid (a soft limit above the
// hard one, Block, CountDenied, a counting limit other than a sliding
// window counter, a cost over the hard limit; the default soft limit is
// half the hard one).
//
// Stacked decisions ([store.MultiStore]; subtests skip for a store that
// does not implement it), per algorithm of the first part, the second
// part of another algorithm: stack-all-or-nothing (a stack refused by one
// part is recorded in none), stack-deciding-part, stack-count-denied
// (window algorithms), stack-block, stack-concurrent (exact admissions),
// stack-ttl (needs KeyTTLs); and stack-invalid (invalid stacks are
// refused before any write).
//
// Across algorithms: invalid-requests (every malformed request is an error
// matching its sentinel, never ErrStoreUnavailable),
// invalid-requests-record-nothing, reset-ignores-cost, partial-invalid
// (Partial with CountDenied, DedupID, ApplyOverride, the suppressed
// strategy or in a stack is ErrInvalidRequest); calendar (a calendar day
// counts like a fixed window ending at UTC midnight, which a one-day
// fixed window confirms; exact clock: refused a microsecond before the
// boundary and fresh at it; state keys expire by the boundary),
// calendar-zones (days in Kolkata and Kathmandu end 5h30m and 5h45m
// before UTC's, modulo a day; a week and a month end on a UTC midnight),
// calendar-months (exact clock: three months in a row last 28 to 31
// whole days, not all alike; weeks 7 days),
// calendar-mixed (a calendar day beside an hourly fixed window) and
// calendar-invalid (each bad calendar field is an error naming it),
// settle-invalid (a settlement of a window algorithm, of an actual cost
// out of range, with ApplyOverride or Partial, is refused and charges
// nothing), wait-invalid (MaxWait below 0, with a window algorithm,
// Partial, a DedupID or ApplyOverride, or holding more than 2³⁰ units,
// and a CancelWait without a reservation, are refused).
//
// [Harness.Store] is checked as a black box: the suite's own tests run it
// against broken stores (a Reset that never reports ErrNotFound, a store
// that keeps the first limit seen under an ID, peeks that record, ...)
// and require each to fail the subtests that test its broken promise.
//
// Every decision the suite sees is also checked for what always holds:
// 0 <= Remaining <= Limit, Limit and LimitID those of Limits[Index],
// RetryAfter zero exactly when allowed, durations in whole microseconds and
// no longer than the state's lifetime (for GCRA and the token bucket, the
// time to drain the largest capacity the subtest sent under the limit's
// ID), PerLimit present exactly for multi-limit requests and consistent
// with the deciding limit. A blocked
// decision instead reports Remaining 0, RetryAfter and ResetAfter equal,
// in whole milliseconds and no longer than the longest block the subtest
// asked for, and Index -1 exactly when the blocking limit is not in the
// request. Blocked is never reported before the subtest has sent a limit
// with a Block, BlockStarted only by a Take, Duplicate only for an
// admitted request with a DedupID. Suppression is within [0, 1] and 0 for
// every algorithm but the suppressed strategy, Suppressed only for a
// refusal against a factor above 0. Granted is 0 but for a Partial
// request, which is granted 1 to its cost when admitted and 0 when
// refused.
//
// Blocks are asserted in whole milliseconds, as Redis keeps TTLs: with an
// exact clock a block is checked a millisecond before its end, not a
// microsecond.
package storetest
