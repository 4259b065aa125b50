// Package lua holds the Redis Lua scripts behind
// [github.com/ratekeeper/ratekeeper/store/redisstore]: one script per
// rate-limiting algorithm, each made of a common prelude (prelude.lua:
// clock, argument parsing, replay records, rounding helpers, the choice of
// the deciding limit, and the bucket arithmetic GCRA and the token bucket
// share) followed by the algorithm's own file. The sources are embedded at
// build time; the package has no dependencies.
//
// [Source] returns a complete script by algorithm name ([Names] lists them;
// they match the store package's Algorithm names). The scripts implement the
// semantics documented in package [github.com/ratekeeper/ratekeeper/store],
// with the same arithmetic, step for step, as the in-memory store
// [github.com/ratekeeper/ratekeeper/store/memstore], so that both reach the
// same decisions. Their clock is the server's TIME in integer microseconds;
// rates divide time in float64; durations are rounded up to the
// microsecond, and a refused request's retry time is corrected against the
// admission test itself, so that waiting exactly that long is enough.
//
// # Calling convention
//
// Every script takes the same KEYS and ARGV layout:
//
//	KEYS[1]        replay record key of this take attempt (see below); peek
//	               never touches it, so a peek may pass any key of the slot
//	KEYS[2..n+1]   one state key per limit, in request order
//	               (sliding_window_log: KEYS[2] only, one sorted set shared
//	               by every limit of the request)
//	ARGV[1]        "take" (check and record) or "peek" (check, write nothing)
//	ARGV[2]        cost, an integer >= 1
//	ARGV[3]        nonce: unique per take attempt, free of ':' and ','; it
//	               also makes sliding window log members unique
//	ARGV[4]        replay record TTL in milliseconds, 0 for no record
//	ARGV[5]        n, the number of limits (at least 1)
//	ARGV[6..]      per limit i, three integers: rate, period in microseconds
//	               (a whole number of milliseconds), capacity (the store's
//	               Limit.Capacity: the burst of GCRA and the token bucket,
//	               what the window algorithms count up to)
//
// All keys must share one hash tag so that the script runs on Redis Cluster.
// A malformed header or malformed stored state makes the script fail with an
// error reply; state of the wrong type fails with WRONGTYPE.
//
// # Reply
//
// An array of 6 + 2n integers:
//
//	1  allowed: 1 when every limit admitted the request, else 0
//	2  index of the deciding limit, from 0
//	3  units the deciding limit still admits (after this request if admitted)
//	4  the deciding limit's reset after, microseconds
//	5  retry after, microseconds; 0 when allowed
//	6  replayed: 1 when the reply came from a replay record
//	then per limit i: the units it still admits and its reset after, after
//	the request when it was admitted, without it when it was refused
//
// The deciding limit is, for a refused request, the refusing limit with the
// longest retry after (ties: the earliest); for an admitted one, the limit
// with the fewest units remaining (ties: the earliest).
//
// # Replay records
//
// A client library may re-send a command after a read timeout or a broken
// connection although the server already ran it (go-redis does so up to
// MaxRetries times). For a take whose replay TTL is positive, the script
// first looks for KEYS[1]: when it exists it holds the reply of an earlier
// run of the same attempt, which is returned with the replayed flag set,
// and nothing is counted again. Otherwise a take that writes state stores
// its reply there with PX set to the replay TTL. A refused take writes
// nothing and leaves no record: running it again is harmless. Callers must
// use a fresh nonce and record key for every attempt.
//
// # State and expiry
//
// Every write sets a TTL in whole milliseconds, rounded up and at least 1,
// that ends when the state can no longer change a decision:
//
//   - gcra: one string "<ts>:<tokens>" per limit, the time of the last
//     admission (integer µs) and the tokens left then. It is the theoretical
//     arrival time TAT = ts + (B − tokens)·P/R seen from the bucket's side,
//     kept this way because an absolute float TAT has a resolution of
//     0.25µs today and sums of fractional emission intervals drift. Expires
//     at the TAT.
//   - token_bucket: one hash {tokens, ts} per limit; expires when the bucket
//     would be full again.
//   - sliding_window_log: one sorted set for the request's limits, a member
//     "<now>:<nonce>:<j>" per admitted unit scored with its time; pruned to
//     the longest period on each admitted take; expires one longest period
//     after its newest unit.
//   - sliding_window_counter: one hash {w, cur, prev} per limit, w the start
//     of the window cur counts; expires at the end of the window after w.
//   - fixed_window: one hash {w, cur} per limit; expires at the end of
//     window w.
//
// Storing w means callers need not know the current window. Windows are
// aligned at multiples of the period since the Unix epoch. If the server
// clock goes back (after a failover to a replica whose clock is behind), a
// stored window later than the current one stays current, which can only
// make the window algorithms stricter.
//
// Each script is O(1) per limit, apart from the sliding window log: O(log n)
// per limit for the checks (ZCOUNT and rank access), plus O(cost · log n) to
// record an admitted request and amortized O(1) per unit pruned.
package lua
