package middleware

import (
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
