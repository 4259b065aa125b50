// Package memstore is the in-memory [store.Store]: rate-limit state kept in
// the process, for single-instance services, tests, and as the local
// fallback when the shared store is unavailable.
//
// A [Store] makes the decisions the Redis store makes, following the
// semantics documented in package [store], and passes the conformance suite
// in [github.com/ratekeeper/ratekeeper/store/storetest]. Limits held in
// memory are per process: behind a load balancer each replica admits its
// own Rate.
//
//	s, err := memstore.New(memstore.Options{})
//	if err != nil { ... }
//	d, err := s.Take(ctx, store.Request{Key: ip, Limits: []store.Limit{store.PerMinute(60)}})
//
// # Arithmetic
//
// Time is an integer number of microseconds since the Unix epoch. Rates
// divide time in float64, evaluated in the order written below (left to
// right), which is the order a Lua script evaluates the same expressions.
// Reported durations are rounded up to the microsecond. R is the rate, P
// the period in µs, B the capacity ([store.Limit.Capacity]), c the cost.
//
//   - GCRA and TokenBucket share one state {ts, tokens}: tokens at now are
//     min(B, tokens + (now − ts)·R/P), B without state. A GCRA
//     theoretical arrival time TAT is the same state seen from the other
//     side (TAT = ts + (B − tokens)·P/R), so both algorithms decide alike;
//     storing tokens rather than an absolute float64 TAT keeps a burst of B
//     exact, which an absolute TAT does not (its resolution today is
//     0.25µs, and sums of fractional emission intervals drift past τ).
//     Admitted iff tokens ≥ c; then tokens −= c, ts = now. Remaining =
//     ⌊tokens⌋, ResetAfter = (B − tokens)·P/R.
//   - Window algorithms count up to the capacity: Rate, or Rate−1 under
//     [store.ThresholdReach].
//   - SlidingWindowLog: entries with timestamp > now − P count; entries
//     recorded in the same microsecond are kept as one run with a count.
//   - SlidingWindowCounter: est = prev·(P − e)/P + cur; Remaining =
//     ⌊B − est⌋ (est including c when admitted); ResetAfter is the time to
//     the end of the next window while cur > 0, else to the end of this
//     one while prev > 0.
//   - FixedWindow: integer counts only.
//
// Remaining and ResetAfter (and [store.Decision.PerLimit] for multi-limit
// requests) describe each limit after the request when it is admitted and
// without it when it is denied.
//
// A denied request's RetryAfter is first computed in closed form, then
// corrected by whole microseconds against the very admission test a later
// Take runs, so that it is the smallest delay after which the same request
// is admitted: float rounding never makes a client that waits RetryAfter
// be refused, nor one that waits a microsecond less be admitted.
//
// # Memory
//
// Each state expires when it no longer matters, at the TTL the Redis store
// gives its keys: GCRA and TokenBucket when the bucket is full again, the
// log one longest period after its newest entry, the sliding counter at
// the end of the next window, the fixed window at the end of its window.
// Expiry never changes a decision: a bucket expires at the first
// microsecond at which its float64 refill reaches B, which may be one
// microsecond after the rounded ResetAfter.
// Expired state is dropped when its key is next used; each insertion of a
// new state also examines a few random states of its shard and drops the
// expired ones. [Options.MaxKeys] caps the number of states; each shard
// holds at most its share of the cap and sweeps itself completely before
// refusing a new state, which then fails with [store.ErrTooManyKeys] (see
// [Store.Take]). A sliding window log holds one run per distinct
// microsecond in its longest period, so its memory grows with Rate.
//
// Keys are stored as given: a very long key costs its length in memory.
//
// A Take or Peek of a key with state and one limit allocates nothing; a
// multi-limit decision allocates its PerLimit slice.
//
// # Not implemented yet
//
// Blocks ([store.Limit.Block], BlockMax), counted refusals
// ([store.Request.CountDenied]) and de-duplication
// ([store.Request.DedupID]): requests carrying them are decided as if
// those fields were unset, and decisions never report Blocked,
// BlockStarted or Duplicate.
//
// # Concurrency
//
// States are spread over [Options.Shards] maps by a hash of the key,
// seeded randomly per Store, each with its own mutex. All states of one
// key live in one shard, so a multi-limit Take is atomic under one lock,
// held for the in-memory update only. The clock is read before locking,
// and time never runs backwards within a shard.
package memstore
