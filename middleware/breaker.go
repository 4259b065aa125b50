package middleware

import (
	"sync/atomic"
	"time"
)

// breaker is a lock-free consecutive-failure circuit breaker. Closed: every
// call goes to the store. After threshold consecutive failures it opens for
// cooldown; then a single probe is let through, and its result closes the
// breaker or reopens it for another cooldown.
type breaker struct {
	threshold int32 // 0 disables
	cooldown  time.Duration
	failures  atomic.Int32
	openUntil atomic.Int64 // unix nanos; 0 = closed
	probing   atomic.Bool
}

// allow reports whether the store may be called now.
func (b *breaker) allow(now time.Time) bool {
	if b.threshold == 0 {
		return true
	}
	until := b.openUntil.Load()
	if until == 0 {
		return true
	}
	if now.UnixNano() < until {
		return false
	}
	return b.probing.CompareAndSwap(false, true)
}

// success records a successful call and closes the breaker.
func (b *breaker) success() {
	if b.threshold == 0 {
		return
	}
	if b.failures.Load() != 0 {
		b.failures.Store(0)
	}
	if b.openUntil.Load() != 0 {
		b.openUntil.Store(0)
	}
	b.probing.Store(false)
}

// failure records a failed call.
func (b *breaker) failure(now time.Time) {
	if b.threshold == 0 {
		return
	}
	if b.probing.Load() {
		b.openUntil.Store(now.Add(b.cooldown).UnixNano())
		b.probing.Store(false)
		return
	}
	if b.failures.Add(1) >= b.threshold {
		b.openUntil.Store(now.Add(b.cooldown).UnixNano())
	}
}

// release gives back a probe slot when a call ended without telling
// anything about the store (the client cancelled).
func (b *breaker) release() { b.probing.Store(false) }

// open reports whether the breaker currently skips the store.
func (b *breaker) open(now time.Time) bool {
	until := b.openUntil.Load()
	return b.threshold != 0 && until != 0 && now.UnixNano() < until
}
