// Package memstore is the in-memory [store.Store]: rate-limit state kept in
// the process, for single-instance services, tests, and as the local
// fallback when the shared store is unavailable.
//
// The store [New] returns implements the semantics of package [store], where every
// algorithm, blocks, counted refusals, de-duplication and changed limits
// are specified once. It computes in integer microseconds of its clock and
// evaluates the float64 expressions given there in the order the Redis
// store's scripts do, so the two stores make the same decisions, to the
// microsecond; both pass the conformance suite in
// [github.com/ratekeeper/ratekeeper/store/storetest]. Limits held in memory
// are per process: behind a load balancer each replica admits its own
// Rate.
//
//	s, err := memstore.New(memstore.Options{})
//	if err != nil { ... }
//	d, err := s.Take(ctx, store.Request{Key: ip, Limits: []store.Limit{store.PerMinute(60)}})
//
// Of the optional capabilities of package store it implements
// [store.MultiStore], [store.OverrideStore], [store.BlockLister],
// [store.EvictionCounter], [store.Refunder] (costs settled after the
// response, for every algorithm), [store.Waiter] (admissions later
// instead of refusals) and [store.SlotStore] (in-flight caps).
//
// # Expiry
//
// A state expires at the first microsecond at which it decides exactly
// like no state, which is when the Redis store's key for it expires
// (before Redis rounds its TTL to the millisecond): GCRA and TokenBucket
// once what was used has drained, the sliding window log one longest
// period after its newest entry, the sliding window counter at the end of
// the next window, the fixed window at the end of its window, a key's
// block, strike count and remembered ids when the last of them ends.
// Expired state is dropped when its key is next taken, when a write that
// creates state examines a few other keys, and when a full store makes
// room; a key's expired ids are pruned whenever it holds twice as many as
// at its last pruning, plus 16.
//
// # Memory and eviction
//
// [Options.MaxKeys] caps the number of states the whole store holds: one
// per key and limit (per key and limit set for the sliding window log),
// one per key with a block, strike count or ids, and one per remembered
// id, so that a flood of distinct keys or ids cannot grow memory past the
// cap. The cap is exact and global: however unevenly keys hash over the
// shards, MaxKeys states fit.
//
// A write that needs new states in a full store makes room. It first drops
// state that carries no information (expired state, in any shard), then
// evicts the least recently taken keys, each with all its states, block,
// strike count and remembered ids; [memStore.Evictions] counts them. A Take
// is a use of its key, admitted or refused; a Peek is not. Recency is kept
// to within 100 ms: a key taken again less than 100 ms after the Take that
// last placed it keeps its place, so keys whose last Takes are less than
// 100 ms apart may go in either order (and a key taken many times a
// second costs its Takes no writes to the store's recency list, which
// callers on other cores would fetch back). An evicted key starts afresh,
// as if its state had expired: a store smaller than its set of active
// clients forgets some of them and admits them again, so size MaxKeys for
// the clients seen within the longest Period and watch Evictions. Only a
// request that cannot fit even in an otherwise empty store fails (see
// [memStore.Take]).
//
// A key with one limit costs about 165 bytes plus its length: keys are
// stored as given, so a very long key costs its length in memory. A
// sliding window log holds one entry per distinct microsecond in its
// longest period, so its memory grows with Rate, and a key's ids grow with
// its admissions in its longest period.
//
// A Take or Peek of a key with state allocates nothing for one limit, nor
// does a blocked request or a duplicate; a multi-limit decision allocates
// its PerLimit slice, remembering an id allocates its copy, and a new key
// allocates its record unless it takes over the memory of a key it
// evicted.
//
// # Concurrency
//
// Keys are spread over [Options.Shards] shards by a hash of the key, seeded
// randomly per Store, each with its own mutex. All states of one key live
// in one record in one shard, so a Take is atomic under one lock, held for
// the in-memory update only. The clock is read once per call, before
// locking, and time never runs backwards within a shard. The shards share
// one count of states, changed only when states are created or dropped,
// never when a Take updates a state in place; making room may lock other
// shards, one at a time and never waiting for one, so it cannot deadlock.
//
// A key taken by many callers at once (a route-wide limit, or one busy
// client) is a hot key: every Take of it locks the same shard. When a
// key with one GCRA, token bucket or fixed window state and no block,
// strikes or ids is taken twice in a row in its shard, its counts move
// next to the shard's lock, where its Takes then write them, so that
// callers on different cores move one cache line between them per Take
// instead of two; any other use of the shard puts them back in the key's
// record first. On a 2-core guest the memory store alone on one GCRA key
// at 64 callers went from 2.8-2.9 M to 4.0-4.9 M decisions per second,
// and the middleware from 2.4-2.6 M to 3.3-3.6 M, with no change at one
// caller or over 10,000 keys. (The sliding window log and counter keep
// more counts than the shard's line has room for.)
package memstore
