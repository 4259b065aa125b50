package limiter

import (
	"sync"
	"sync/atomic"
	"time"
)

// breaker is a lock-free consecutive-failure circuit breaker. Closed: every
// call goes to the store. After threshold consecutive failures it opens for
// cooldown; then a single probe is let through, and only the probe's result
// closes the breaker or reopens it for another cooldown. The probe holder
// must resolve its probe (success, failure or release), which the
// middleware does in a deferred call so that even a panicking store cannot
// leave the breaker half-open forever.
type breaker struct {
	threshold int32 // 0 disables
	cooldown  time.Duration
	failures  atomic.Int32
	openUntil atomic.Int64 // unix nanos; 0 = closed
	probing   atomic.Bool
}

// maxBreakerThreshold bounds the threshold so it fits the counter.
const maxBreakerThreshold = 1 << 30

// allow reports whether the store may be called now, and whether this call
// is the single probe of a half-open breaker.
func (b *breaker) allow(now time.Time) (ok, probe bool) {
	if b.threshold == 0 {
		return true, false
	}
	until := b.openUntil.Load()
	if until == 0 {
		return true, false
	}
	if now.UnixNano() < until {
		return false, false
	}
	if b.probing.CompareAndSwap(false, true) {
		return true, true
	}
	return false, false
}

// success records a successful call: the store answers, so the breaker
// closes, whoever made the call. It reports whether this call closed an
// open breaker.
func (b *breaker) success(probe bool) (closed bool) {
	if b.threshold == 0 {
		return false
	}
	if b.failures.Load() != 0 {
		b.failures.Store(0)
	}
	if b.openUntil.Load() != 0 {
		closed = b.openUntil.Swap(0) != 0
	}
	if probe {
		b.probing.Store(false)
	}
	return closed
}

// failure records a failed call. A failed probe reopens the breaker for a
// full cooldown; other failures count towards the threshold. It reports
// whether this call opened a closed breaker.
func (b *breaker) failure(now time.Time, probe bool) (opened bool) {
	if b.threshold == 0 {
		return false
	}
	until := now.Add(b.cooldown).UnixNano()
	if probe {
		b.openUntil.Store(until)
		b.probing.Store(false)
		return false
	}
	if b.failures.Add(1) >= b.threshold {
		return b.openUntil.CompareAndSwap(0, until)
	}
	return false
}

// release gives the probe slot back when the probe ended without telling
// anything about the store (the client cancelled, the request was invalid,
// or the store panicked). Only the probe holder calls it.
func (b *breaker) release() { b.probing.Store(false) }

// down reports whether the breaker currently considers the store
// unavailable: from the moment it opens until a call succeeds, including
// the half-open time when requests are still skipped.
func (b *breaker) down() bool {
	return b.threshold != 0 && b.openUntil.Load() != 0
}

// maxNodeBreakers bounds how many nodes get a breaker of their own; the
// requests of further nodes share the limiter-wide breaker.
const maxNodeBreakers = 64

// breakers are a limiter's circuit breakers: the limiter-wide one (the
// embedded breaker, for requests whose node is unknown) and one per node
// for stores that implement [store.NodeLocator], so that a failing shard opens
// only its own breaker and the keys of healthy shards are still decided.
// Lookups are lock-free (a copy-on-write map); the mutex only serialises
// adding a node.
type breakers struct {
	breaker
	mu    sync.Mutex
	nodes atomic.Pointer[map[string]*breaker]
}

// of returns the breaker of node: the limiter-wide one for "", for a
// disabled breaker, and when maxNodeBreakers nodes have breakers that are
// all in use (a closed breaker with no failures is forgotten to make room).
func (bs *breakers) of(node string) *breaker {
	if node == "" || bs.threshold == 0 {
		return &bs.breaker
	}
	if m := bs.nodes.Load(); m != nil {
		if b := (*m)[node]; b != nil {
			return b
		}
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	var old map[string]*breaker
	if m := bs.nodes.Load(); m != nil {
		old = *m
	}
	if b := old[node]; b != nil {
		return b
	}
	next := make(map[string]*breaker, len(old)+1)
	for n, b := range old {
		if len(old) < maxNodeBreakers || !b.idle() {
			next[n] = b
		}
	}
	if len(next) >= maxNodeBreakers {
		return &bs.breaker
	}
	b := &breaker{threshold: bs.threshold, cooldown: bs.cooldown}
	next[node] = b
	bs.nodes.Store(&next)
	return b
}

// down reports whether the limiter-wide breaker or any node's breaker
// currently considers the store (or that node) unavailable.
func (bs *breakers) down() bool {
	if bs.breaker.down() {
		return true
	}
	if m := bs.nodes.Load(); m != nil {
		for _, b := range *m {
			if b.down() {
				return true
			}
		}
	}
	return false
}

// idle reports a closed breaker with no failures counted and no probe out:
// forgetting it loses nothing.
func (b *breaker) idle() bool {
	return b.openUntil.Load() == 0 && b.failures.Load() == 0 && !b.probing.Load()
}
