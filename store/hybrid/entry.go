package hybrid

import (
	"math"
	"sync"
	"syscall"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// errConnRefused is the one failure known to leave a call unsent.
var errConnRefused error = syscall.ECONNREFUSED

// entry is one key's local state under one limit. Its fields are guarded
// by mu; times are on the store clock, in nanoseconds.
//
// Invariant (the overshoot bound rests on it): pending + debt + inflight +
// lease ≤ min(r, L), r being the remaining learned at the last backend call.
type entry struct {
	mu sync.Mutex

	key      string
	lim      store.Limit
	id       string // lim.ID()
	capacity int64
	leaseMax int64 // L = ⌈Rate·SyncInterval/Period⌉ within [1, capacity]
	unitNs   int64 // Period/Rate, for GCRA and TokenBucket ResetAfter

	lease     int64 // units still admissible locally
	remaining int64 // learned remaining minus local admissions since
	pending   int64 // admitted locally, not yet sent
	debt      int64 // admitted locally, refused by the backend at commit
	inflight  int64 // being committed right now
	known     bool  // a backend call has answered for this key

	resetAt   int64 // ResetAfter reference point
	denyUntil int64 // a cached refusal lasts until then (from the call's sending)
	denyCost  int64 // for requests of at least this cost
	denyCheck int64 // and is answered from memory until then
	denyFrom  int64 // when the refusal came back: its waits count from then
	denyRetry int64 // denyFrom + RetryAfter
	lastUse   int64

	syncing bool          // a backend call for this key is in flight
	wait    chan struct{} // closed when it ends
	dead    bool          // dropped from the map; look up again
}

func newEntry(key string, lim store.Limit, interval time.Duration, now int64) *entry {
	capacity := lim.Capacity()
	// L = ⌈Rate·interval/Period⌉ within [1, capacity].
	iv, p := int64(interval), int64(lim.Period)
	var f float64
	if lim.Rate <= (math.MaxInt64-p)/iv {
		f = float64((lim.Rate*iv + p - 1) / p) // exact
	} else {
		f = math.Ceil(float64(lim.Rate) * float64(iv) / float64(p))
	}
	l := capacity
	if f < float64(capacity) {
		l = max(int64(f), 1)
	}
	return &entry{
		key:      key,
		lim:      lim,
		id:       lim.ID(),
		capacity: capacity,
		leaseMax: l,
		unitNs:   int64(lim.Period) / lim.Rate,
		lastUse:  now,
	}
}

// denyCheckInterval is how long a cached refusal is answered from memory
// before the next request of its key asks the backend again: a reset made
// through another instance (or the backend directly) reaches this one
// within it, not after the refusal's RetryAfter, at the cost of at most
// one backend call per interval for a key that keeps being refused.
const denyCheckInterval = 250 * time.Millisecond

// local decides a request of cost from memory: a cached refusal of that
// cost (for denyCheckInterval after the backend refused; a costlier
// request waits longer than it was told, and an invalid one must meet the
// backend's error), or an admission from the lease (recorded when take is
// set). It reports false when the backend must decide.
func (e *entry) local(now, cost int64, take bool) (store.Decision, bool) {
	if take {
		e.lastUse = now
	}
	if now < e.denyUntil && cost == e.denyCost && now < e.denyCheck {
		// The backend read its clock between the call's sending (the
		// start of denyUntil) and its answer: a wait counted from the
		// answer never ends before the backend's, and never exceeds what
		// it answered.
		at := max(now, e.denyFrom)
		retry := ceilMicros(e.denyRetry - at)
		return store.Decision{
			Capacity: e.capacity, RetryAfter: retry, ResetAfter: max(retry, e.resetAfter(at)),
			NextAfter: retry, LimitID: e.id, Cached: true,
		}, true
	}
	if e.lease < cost {
		return store.Decision{}, false
	}
	if !take {
		return e.admission(now, max(0, e.remaining-cost)), true
	}
	e.lease -= cost
	e.remaining = max(0, e.remaining-cost)
	e.pending += cost
	e.admitted(now, cost)
	return e.admission(now, e.remaining), true
}

// admission is a local admission's decision with remaining units left.
// NextAfter is, like ResetAfter, an estimate: the time until the limit is
// full, by which more quota has surely come.
func (e *entry) admission(now, remaining int64) store.Decision {
	d := store.Decision{
		Allowed: true, Capacity: e.capacity, Remaining: remaining,
		ResetAfter: e.resetAfter(now), LimitID: e.id,
	}
	if remaining < e.capacity {
		d.NextAfter = d.ResetAfter
	}
	return d
}

// admitted moves the ResetAfter reference for cost units admitted at now.
func (e *entry) admitted(now, cost int64) {
	switch e.lim.Algorithm {
	case store.GCRA, store.TokenBucket:
		e.resetAt = max(e.resetAt, now) + cost*e.unitNs
	case store.SlidingWindowLog:
		e.resetAt = now + int64(e.lim.Period)
	}
}

func (e *entry) resetAfter(now int64) time.Duration {
	return ceilMicros(max(0, e.resetAt-now))
}

// ceilMicros returns ns rounded up to whole microseconds, as every store
// reports durations: a wait learned from the backend, which is whole, stays
// as it was.
func ceilMicros(ns int64) time.Duration {
	return time.Duration((ns+999)/1000) * time.Microsecond
}

// begin marks a backend call for the key and hands it the units to commit.
// It returns them and the debt among them.
func (e *entry) begin() (send, owed int64) {
	e.syncing = true
	e.wait = make(chan struct{})
	send, owed = e.pending+e.debt, e.debt
	e.inflight = send
	e.pending, e.debt = 0, 0
	return send, owed
}

// end closes the backend call begun by begin.
func (e *entry) end() {
	e.syncing = false
	e.inflight = 0
	close(e.wait)
}

// settle applies the outcome of a backend call to the entry's counters:
// units not applied become debt (those refused beyond what was already
// owed are counted as overadmitted), units of unknown outcome are counted
// as unconfirmed, and a successful answer renews the lease.
func (e *entry) settle(s *hybridStore, now, owed int64, x *exchange) {
	e.end()
	if x.unknown > 0 {
		s.unconfirmed.Add(uint64(x.unknown))
	}
	refused := x.left
	if x.err != nil {
		// Units not applied because of the failure are sent again later;
		// those owed before stay owed.
		back := min(x.left, owed)
		e.debt += back
		e.pending += x.left - back
		refused = 0
	} else if refused > 0 {
		if over := refused - owed; over > 0 {
			s.overadmitted.Add(uint64(over))
		}
		e.debt += refused
	}
	if x.err != nil || !x.answered {
		return // nothing learned
	}
	e.known = true
	r := x.d.Remaining
	if refused > 0 {
		r = 0
	}
	local := e.pending + e.debt
	e.remaining = max(0, r-e.pending)
	if e.debt > 0 {
		e.lease = 0
	} else {
		e.lease = max(0, min(r, e.leaseMax)-local)
	}
	e.resetAt = now + int64(x.d.ResetAfter)
}

// finish completes a request's refresh, begun at now and answered at
// done: it settles the exchange and returns the request's decision,
// degrading to local knowledge when the backend failed before deciding it.
func (e *entry) finish(s *hybridStore, now, done, owed int64, x *exchange) (store.Decision, error) {
	e.settle(s, now, owed, x)
	if !x.decided {
		applied := int64(0)
		if x.costSent {
			applied = 1 // the request's cost counts as applied
		}
		return e.degrade(now, x.cost, applied, x.err)
	}
	d := x.d
	if !d.Allowed {
		// Refused, even when committing the pending units failed after.
		e.lease, e.remaining = 0, 0
		if d.Cached {
			// The backend answered from its own cache, whose waits count
			// from its call's answer, not its sending: now + RetryAfter
			// may be later than the backend admits. Its cache answers the
			// next requests without a round trip anyway.
			return d, nil
		}
		e.denyUntil = now + int64(d.RetryAfter)
		e.denyCost = x.cost
		e.denyCheck = now + int64(denyCheckInterval)
		e.denyFrom = max(now, done)
		e.denyRetry = e.denyFrom + int64(d.RetryAfter)
		e.resetAt = e.denyFrom + int64(d.ResetAfter)
		return d, nil
	}
	e.denyUntil = 0
	return d, nil
}

// degrade decides a request of cost against the remaining the key last
// learned, for a backend that failed with err. When applied is set, the
// failed call carried the request's cost, which then counts as applied and
// is not added to pending.
func (e *entry) degrade(now, cost, applied int64, err error) (store.Decision, error) {
	if !e.known || e.remaining < cost || e.debt > 0 {
		return store.Decision{}, err
	}
	e.remaining -= cost
	// The lease is part of what remains: left above it, it would admit
	// the units this admission spent once more.
	e.lease = min(e.lease, e.remaining)
	if applied == 0 {
		e.pending += cost
	}
	e.admitted(now, cost)
	return e.admission(now, e.remaining), nil
}
