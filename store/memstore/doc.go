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
// Reported durations are rounded up to the microsecond (a block's to the
// millisecond, see below). R is the rate, P
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
// recorded, and without it otherwise (denied, blocked, or admitted as a
// duplicate).
//
// A denied request's RetryAfter is first computed in closed form, then
// corrected by whole microseconds against the very admission test a later
// Take runs, so that it is the smallest delay after which the same request
// is admitted: float rounding never makes a client that waits RetryAfter
// be refused, nor one that waits a microsecond less be admitted.
//
// # Blocks, counted refusals and de-duplication
//
// Each request key has one more state, shared by all its limits, created
// when it is first needed: its block (the scope, the ID of the limit that
// started it, and its end), its strike count and its remembered
// de-duplication ids. One Take runs the steps of package store under the
// key's lock: the block check, the de-duplication check, the evaluation
// of every limit, then recording (and remembering the id) or, for a
// refusal, the counted refusal and the start of a block. The lock makes
// every block start exactly once, however many requests race.
//
// Blocks and strike counts expire as Redis keys with a TTL in whole
// milliseconds do, so that both stores decide alike: a block started at
// time t for d ends at ⌊t⌋ms + d, and a blocked request's RetryAfter is
// its remaining time rounded up to the millisecond (the block's duration
// when the request started it); a strike count set at t for d counts
// while ⌊now⌋ms <= ⌊t⌋ms + d, through the millisecond in which a Redis key
// shows a PTTL of 0. Remembered ids expire to the microsecond, a longest
// period after their admission. Ids longer than 128 bytes are kept as
// their SHA-256.
//
// With [store.Request.CountDenied] the window algorithms record refused
// attempts, so counts may exceed the capacity; a sliding window log then
// keeps only its newest (largest Rate + cost) entries, which changes no
// decision, since a decision never looks past the (capacity − cost + 1)-th
// newest entry.
//
// # Memory
//
// Each state expires when it no longer matters, at the TTL the Redis store
// gives its keys: GCRA and TokenBucket when the bucket is full again, the
// log one longest period after its newest entry, the sliding counter at
// the end of the next window, the fixed window at the end of its window,
// a key's block, strike count and ids when the last of them ends (a block
// after its duration, a strike count its block's duration plus BlockMax
// after the block started, an id a longest period after its admission).
// Expiry never changes a decision: a bucket expires at the first
// microsecond at which its float64 refill reaches B, which may be one
// microsecond after the rounded ResetAfter.
// Expired state is dropped when its key is next used; each insertion of a
// new state also examines a few random states of its shard and drops the
// expired ones; a key's expired ids are pruned whenever it holds twice as
// many ids as at its last pruning, plus 16.
//
// [Options.MaxKeys] caps the number of states: one per key and limit (per
// key and limit set for the sliding window log), one per key with a
// block, strike count or ids, and one per remembered id, so that a flood
// of distinct keys or ids cannot grow memory past the cap. Each shard
// holds at most its share of the cap and sweeps itself completely
// (expired ids included) before refusing a new state. An admission that
// needs a new state then fails with [store.ErrTooManyKeys]; a refusal
// stays a refusal, without the writes (counted refusal, new block) that do
// not fit (see [Store.Take]). A sliding window log holds one run per
// distinct microsecond in its longest period, so its memory grows with
// Rate, and a key's ids grow with the admissions in its longest period.
//
// Keys are stored as given: a very long key costs its length in memory.
//
// A Take or Peek of a key with state and one limit allocates nothing, nor
// does a blocked request or a duplicate; a multi-limit decision allocates
// its PerLimit slice, remembering an id allocates its copy.
//
// # Concurrency
//
// States are spread over [Options.Shards] maps by a hash of the key,
// seeded randomly per Store, each with its own mutex. All states of one
// key live in one shard, so a multi-limit Take is atomic under one lock,
// held for the in-memory update only. The clock is read before locking,
// and time never runs backwards within a shard.
package memstore
