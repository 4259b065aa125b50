package store

import (
	"context"
	"time"
)

// This file declares the optional capabilities of a [Store]: each is an
// interface that a store implements in addition to [Store] when it can,
// and that a caller discovers with a type assertion. The memory store
// ([github.com/ratekeeper/ratekeeper/store/memstore]), the Redis store
// ([github.com/ratekeeper/ratekeeper/store/redisstore]) and the hybrid
// store ([github.com/ratekeeper/ratekeeper/store/hybrid]) say in their
// documentation which ones they implement; a decorator forwards those of
// the store it wraps that it can honour.

// MultiStore is implemented by stores that decide several requests, each
// with its own key and limits (a per-client policy and a route-wide one,
// say), as one stacked decision: the request is admitted only if every
// part admits it, and a refusal charges no part. The memory store and the
// Redis store implement it; the hybrid store does not.
//
// A stack holds 1 to [MaxParts] parts, each valid ([Request.Validate]),
// without a DedupID (a stack has no single identity to de-duplicate for),
// without Partial (a stack takes all or nothing), without Calendar
// limits, without Overrides (not decided in a stack), and with distinct
// keys (parts of one key would count against each other before either is
// recorded; give one request all the limits of a key instead).
//
// The memory store and the Redis store on one node decide a stack in one
// atomic step. The Redis store on a Redis Cluster decides the parts whose
// keys share a slot in one atomic step and the others in turn, giving
// back (refunding) what earlier steps recorded when a later one refuses;
// see its TakeMulti for the guarantee, and [Refunder] for the counts.
type MultiStore interface {
	Store
	// TakeMulti decides reqs as one request (see [MultiDecision]). Each
	// part is checked against its own limits as [Store.Take] would, the
	// parts that admit are recorded only if all admit, and a part that
	// refuses writes what its refusal writes alone (a counted refusal, a
	// block). A part with CountDenied records the attempt whenever the
	// stack refuses, as it would for its own refusal.
	//
	// It returns an error wrapping [ErrInvalidRequest] for a stack that
	// breaks the rules above, the error of [Request.Validate] for an
	// invalid part, and a *[BackendError] when the backend fails.
	TakeMulti(ctx context.Context, reqs []Request) (MultiDecision, error)
}

// OverrideStore is implemented by stores that keep per-client overrides
// ([Override]), which requests with [Request.ApplyOverride] apply: the memory
// store and the Redis store. The key is a [Request.Key]: one client under
// one policy (and tier).
type OverrideStore interface {
	// SetOverride stores o for key, replacing any override it has, for
	// o.TTL. It returns o.Validate's error for an invalid override.
	SetOverride(ctx context.Context, key string, o Override) error
	// GetOverride returns key's live override with the time it has left
	// in TTL, or an error wrapping [ErrNotFound] when it has none.
	GetOverride(ctx context.Context, key string) (Override, error)
	// ClearOverride removes key's override, or returns an error wrapping
	// [ErrNotFound] when it had none.
	ClearOverride(ctx context.Context, key string) error
}

// Block is one blocked client, as a [BlockLister] lists it.
type Block struct {
	// Key is the client's [Request.Key], as the request that started the
	// block gave it.
	Key string
	// Scope is the ID ([Limit.ID]) of the limit whose refusal started the
	// block ([Decision.LimitID]).
	Scope string
	// Remaining is how long the block still lasts, in whole milliseconds.
	Remaining time.Duration
}

// BlockLister is implemented by stores that can list the keys they hold
// blocked (see [Limit.Block]): the memory store, the Redis store, and the
// hybrid store when its backend can.
type BlockLister interface {
	// Blocks lists the blocked keys that start with keyPrefix (every key
	// when it is empty), a page at a time: it returns about count blocks
	// and the cursor of the next page, "" when the listing is complete.
	// An empty cursor starts a listing; a cursor is only meaningful to the
	// store that issued it. A page may hold fewer than count blocks, even
	// none, before the listing is complete, and a key blocked or unblocked
	// while a listing runs may be missed or listed twice; each store says
	// what it guarantees beyond that.
	//
	// It returns an error wrapping [ErrInvalidRequest] for a count below
	// 1 or a cursor the store did not issue, and a *[BackendError] when
	// the backend fails.
	Blocks(ctx context.Context, keyPrefix, cursor string, count int) (blocks []Block, next string, err error)
}

// EvictionCounter is implemented by stores that forget clients to stay
// within a memory bound: the memory store (its MaxKeys), and the hybrid
// store when its backend does. A growing count means the bound is too
// small for the clients: each evicted client starts afresh.
type EvictionCounter interface {
	// Evictions returns how many keys the store has evicted to stay within
	// its bound since it was created. It is safe for concurrent use and
	// cheap enough for every metrics scrape.
	Evictions() uint64
}

// EvictionPolicyReporter is implemented by stores whose backend has an
// eviction policy of its own: the Redis store (the server's
// maxmemory-policy), and the hybrid store when its backend does. A policy
// that may evict any key (Redis's allkeys-*) lets the backend drop limiter
// state under memory pressure, admitting clients afresh.
type EvictionPolicyReporter interface {
	// EvictionPolicy returns the backend's eviction policy ("noeviction",
	// "allkeys-lru", ...), "unknown" when the backend refused to tell,
	// or "" while it is not known yet. It sends nothing to the backend
	// and is safe for concurrent use.
	EvictionPolicy() string
}

// Refunder is implemented by stores that give back, or charge, units
// after a decision: the memory store, the Redis store and the hybrid
// store when its backend does. The Redis store may decide a stacked
// decision ([MultiStore]) in several steps and gives back what earlier
// steps recorded when a later one refuses (its stacks take several steps
// on a Redis Cluster); the counts report those refunds, only grow and are
// safe to read concurrently (always 0 on the memory store). Settle
// charges the difference between a reserved and an actual cost (package
// store, "Costs settled after the response").
type Refunder interface {
	// Settle settles the Take of req that answered taken, whose cost
	// (req.Cost, the estimate it reserved) turned out to be actual: it
	// charges actual − req.Cost to req.Key under req.Limits in one atomic
	// step, more units when positive (possibly past the capacity: the key
	// is then refused until the overrun is paid back), fewer when
	// negative, given back to the window the take counted in while it
	// still counts and never more than is counted (package store, "Costs
	// settled after the response", says what both mean per algorithm).
	// Call it at most once per admitted Take: each call applies; a Take
	// never settled stays charged with its estimate. It returns an error
	// wrapping [ErrInvalidRequest] for a request that is not valid
	// without ApplyOverride or Partial, for a taken decision that did not
	// admit the request or, of a window algorithm, was not a
	// [Request.Reserve] take ([Decision.Taken] zero), or for an actual
	// cost below 0 or above 2³⁰; and a *[BackendError] when the backend
	// fails (then the settlement may or may not have applied; do not
	// repeat it).
	Settle(ctx context.Context, req Request, taken Decision, actual int64) error
	// Refunds returns how many parts of stacked decisions were refunded
	// because a later step refused the request.
	Refunds() uint64
	// Unrefunded returns how many parts could not be refunded because the
	// backend failed: their units stay charged until they expire. A rising
	// count means the backend fails between the steps of a stack.
	Unrefunded() uint64
}

// NodeLocator is implemented by stores spread over several nodes that can
// tell, before a call, which node serves a request: the Redis store (the
// master of the key's slot on a Redis Cluster). The hybrid store does not
// forward it (see its package documentation). The middleware keeps a
// circuit breaker per node with it, so that a failing node does not
// switch limiting off for the keys of the others.
type NodeLocator interface {
	// NodeFor returns the address of the node that serves req's key, or ""
	// when the store does not know (a single node, say). It is cheap, never
	// waits on the network for long, and is safe for concurrent use.
	NodeFor(ctx context.Context, req Request) string
}

// Waiter is implemented by stores that admit a request later instead of
// refusing it ([Request.MaxWait]) and can give back the place such an
// admission reserved: the memory store and the Redis store. A store
// without it decides a MaxWait request as it would any other, by its
// limits alone, so callers that wait check for it first.
type Waiter interface {
	// CancelWait gives back the place that d, a Take of req admitted with
	// a Delay, reserved, when the caller will not proceed (its context
	// ended first): in one atomic step, each limit is put back as it
	// stood before the reservation if no later request has written it
	// since; a limit written since (a later request queued behind this
	// one) keeps the units, so that the later ones' times stay exact, and
	// the place goes unused (package store, "Waiting instead of
	// refusing"). It returns an error wrapping [ErrInvalidRequest] when d
	// holds no reservation of req, and a *[BackendError] when the backend
	// fails. Call it at most once per decision; a call for a decision
	// whose Delay has passed changes nothing a later request relies on
	// only while nothing was written since.
	CancelWait(ctx context.Context, req Request, d Decision) error
}

// Slot is one slot of an in-flight cap ([SlotStore]): the key whose
// concurrent requests it counts and the id of the request that holds it.
type Slot struct {
	// Key is the cap's key, like a [Request.Key] (a client under a policy,
	// or a route); the store keeps its slots apart from its rate-limit
	// state.
	Key string
	// ID names the holder, unique among the key's live holders (a random
	// per-process prefix and a sequence number will do).
	ID string
}

// MaxSlots is the largest cap a [SlotStore] accepts: 2³⁰.
const MaxSlots = 1 << 30

// SlotStore is implemented by stores that keep in-flight caps: at most max
// requests of one key hold a slot at once. The memory store and the Redis
// store implement it, and the hybrid store passes it to its backend.
//
// Every slot is leased: it counts until it is released or until its lease
// runs out, whichever comes first, so that a slot whose holder died (a
// crashed instance) comes back by itself. A live holder renews its lease
// before it runs out. Leases are kept on the store's clock (Redis TIME),
// and a slot whose lease ends at the store's now has ended. Each method is
// one atomic step per key.
//
// The methods return an error wrapping [ErrInvalidRequest] for an empty
// key or id, a max outside 1 to [MaxSlots], or a lease outside 1ms to 24h,
// and a *[BackendError] when the backend fails.
type SlotStore interface {
	// Acquire takes a slot of slot.Key for slot.ID, leased for lease, when
	// fewer than max live slots of the key are held, and reports whether
	// it took it and how many live slots the key holds after the call. An
	// id that already holds a slot keeps it with a fresh lease (acquired).
	Acquire(ctx context.Context, slot Slot, max int64, lease time.Duration) (acquired bool, held int64, err error)
	// Release gives slot back; releasing a slot that is not held (already
	// released, or its lease ran out) does nothing.
	Release(ctx context.Context, slot Slot) error
	// Renew gives each of slots that is still held a fresh lease of lease;
	// it never takes a slot that is not held (one whose lease ran out may
	// have been taken by another holder), and returns how many it renewed.
	// The Redis store sends one call per key, concurrently.
	Renew(ctx context.Context, slots []Slot, lease time.Duration) (renewed int, err error)
}
