// Package hybrid is an opt-in [store.Store] that answers hot keys from
// process memory and reconciles with a shared backend (normally the Redis
// store, [github.com/ratekeeper/ratekeeper/store/redisstore]) in the
// background. It trades a bounded, stated overshoot across instances for
// decisions that cost no round trip.
//
//	rs, err := redisstore.New(rdb, redisstore.Options{})
//	if err != nil { ... }
//	s, err := hybrid.New(rs, hybrid.Options{SyncInterval: 10 * time.Millisecond})
//	if err != nil { ... }
//	defer s.Close()
//
// # What is decided locally
//
// Only lean requests: one limit without
// [store.Limit.Block], without [store.Request.CountDenied], without
// [store.Request.DedupID], without [store.Request.Partial] and without
// [store.Request.ApplyOverride]. Every
// other request goes straight to the backend, unchanged, and is exactly as
// precise as the backend is. Local state is kept per key and [store.Limit]
// (the whole value, so a changed limit starts a new local state).
//
// # Capabilities
//
// Of the optional capabilities of package store, a Store forwards to its
// backend those that describe state the backend keeps: [store.BlockLister]
// (blocks are only started by backend calls), [store.EvictionCounter],
// [store.EvictionPolicyReporter], [store.Refunder] and [store.SlotStore]
// (in-flight caps, kept by the backend alone so that a cap holds across
// instances), so that metrics, the admin API and the middleware work on a
// hybrid store as on its backend. A backend
// without one of them answers as a store that has nothing to report: no
// evictions, no policy, no refunds, and a block listing that fails with
// [errors.ErrUnsupported].
//
// It does not forward the others:
//
//   - [store.MultiStore]: a stack would be decided by the backend beside
//     the leases this store holds for the same keys, missing the units
//     admitted locally and not yet committed, so the overshoot bound
//     would not hold. Stack policies on the backend directly.
//   - [store.OverrideStore]: a request that applies overrides is never
//     lean, so a policy with overrides would gain nothing from this store;
//     run it on the backend directly.
//   - [store.NodeLocator]: a request decided from a lease makes no
//     backend call, and locating its node on every request would cost
//     about as much as the local decision; the middleware's limiter-wide
//     circuit breaker serves a hybrid store.
//   - [store.Waiter]: a request admitted later holds a place in the
//     backend's timeline that the leases of other instances do not see.
//     Such requests (MaxWait) are passed to the backend, which decides
//     them by its limits alone; a limiter with MaxWait refuses a hybrid
//     store when it is built. Give such a limiter the backend directly.
//
// # How a key is decided
//
// The first request of a key is a backend Take: it decides that request
// exactly and tells the instance how many units the limit still has (its
// Remaining). From then on the instance holds a lease: it admits locally
// while the lease lasts, without I/O, and counts the units it admitted as
// pending. The lease is the smaller of what the backend reported as
// remaining and
//
//	L = ⌈Rate · SyncInterval / Period⌉   (at least 1, at most the capacity)
//
// that is, what the limit refills in one sync interval. Every SyncInterval
// a background syncer commits each key's pending units to the backend as
// one Take whose Cost is their number (split into several when it exceeds
// the capacity), and the answer renews the lease. A request that finds the
// lease spent refreshes synchronously: one backend Take of its own cost
// plus the pending units, which decides it exactly and renews the lease.
// Concurrent refreshes of one key wait for the first one instead of
// crowding the backend.
//
// A refusal from the backend is remembered until its RetryAfter (measured
// from before the call, so that nothing the backend would admit is
// refused; the waits it answers count from the refusal's arrival, so that
// a client that waits them is not refused again for them; a refusal the
// backend itself answered from a cache is not kept) and answered
// locally ([store.Decision.Cached]) to
// requests of the same cost (a costlier one waits longer, and the backend
// tells it how long), for 250 ms at a time: the first such
// request after that asks the backend again (and, refused, caches the new
// answer). So a reset made through another instance (the admin API, the
// CLI) reaches this one within 250 ms instead of after the refusal's
// RetryAfter, and a key that keeps being refused costs at most four
// backend calls a second.
//
// When a commit does not fit (other instances used the capacity first), the
// instance commits what fits and keeps the rest as debt: those units were
// admitted beyond the limit. [Stats] counts them as Overadmitted; the
// instance admits nothing locally while it owes, and commits the debt as
// capacity frees, so that the long-run rate stays exact.
//
// # Overshoot bound
//
// With N instances sharing one backend, at any moment the units admitted by
// all instances exceed what the backend alone would have admitted by at
// most
//
//	(N − 1) · L = (N − 1) · ⌈Rate · SyncInterval / Period⌉
//
// units, so over any span of time t from a fresh key at most
// B + Rate·t/Period + (N − 1)·L are admitted, B being the capacity. Proof
// sketch: each instance's admitted-but-uncommitted units (pending, debt and
// commits in flight) plus its unspent lease never exceed min(r, L), r being
// the remaining it learned at its last backend call, which happened when
// the backend had used at most B − r. Take the instance whose backend call
// came last: it holds at most B − used; every other instance holds at most
// L; after that call nobody commits, so the backend's count only drains.
// With one instance the bound is exact: it never admits more than the
// limit, and it refuses only when the backend does.
//
// The overshoot is borrowed, not lost: the units are committed later as
// debt and delay further admissions by as much. Keep SyncInterval short
// for limits with few units per period (L = 1 for any limit slower than
// one unit per SyncInterval, so such a key costs about one backend call
// per admitted request, like the backend alone).
//
// The backend records committed units when the commit reaches it, up to
// one SyncInterval after they were admitted. That only makes limits
// stricter: a unit recorded late drains late (GCRA, TokenBucket) or leaves
// the window late (SlidingWindowLog), and a unit admitted at the end of a
// fixed or counted window may be counted in the next one.
//
// The bound assumes the backend answers. See "Outages" for what it becomes
// when it does not.
//
// # Outages
//
// A backend call that fails is counted in [Stats.Failures], and the store
// marks the backend down: until a probe (a Peek, which writes nothing)
// succeeds, at most once per SyncInterval doubling up to a second, no commit
// is sent, pending units accumulate and are committed once the backend
// answers again. A request whose lease is spent is then decided against
// what the instance knows: it is admitted while the remaining learned at
// the last successful call lasts, and otherwise gets a [*store.BackendError]
// (wrapping [store.ErrStoreUnavailable]) so that the caller's failure mode
// decides. During an outage each instance therefore admits at most the
// remaining it last learned, and N instances up to N times that.
//
// A commit whose call fails may or may not have been applied. It counts as
// applied and is never sent again, so nothing is counted twice; its units
// are added to [Stats.Unconfirmed], the most by which the backend may
// undercount. Only a call refused before any connection was made
// (connection refused) is known not to have been applied; its units stay
// pending.
//
// # Decisions answered locally
//
// A local admission reports Allowed, Limit (the capacity), Remaining (the
// remaining learned at the last backend call minus the local admissions
// since), ResetAfter (an estimate: the learned ResetAfter, moved by the
// local admissions for GCRA and TokenBucket), NextAfter (the same
// estimate, the moment more quota has surely come) and LimitID with Index
// 0. A cached refusal reports Cached and the remaining RetryAfter, which
// is also its NextAfter.
//
// # Lifecycle
//
// New starts one background goroutine. Close stops it, commits the pending
// units of every key within [Options.CloseTimeout] and returns when every
// goroutine the store started has ended. After Close, requests go straight
// to the backend. Idle keys (no request for [Options.IdleTimeout], nothing
// pending) are forgotten by the syncer.
package hybrid
