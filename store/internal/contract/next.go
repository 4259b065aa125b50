package contract

import (
	"math"

	"github.com/ratekeeper/ratekeeper/store"
)

// NextUS returns the time in µs until l, which a store reports with rem
// units remaining and resetUS µs until it is full, admits rem+1 units
// (store.Decision.NextAfter), for the algorithms where that follows from
// those two numbers, and whether it does:
//
//   - GCRA and the token bucket drain at R/P units per µs, so unit rem+1
//     is free (B − rem − 1)·P/R before the limit is full: resetUS less
//     that, rounded up, plus a microsecond for the floating point of the
//     admission test, within [1, resetUS]. resetUS is itself rounded up,
//     so the result is never before the instant a request for rem+1 units
//     is admitted and at most 3µs after it; both stores compute it here,
//     from the same two integers.
//   - The fixed window (a calendar window too) gives back every unit at
//     the window's end: resetUS.
//   - The suppressed strategy reports resetUS, an upper bound (its
//     refusals between the soft and the hard limit are random anyway).
//
// The sliding window log and counter depend on state the two numbers do
// not show: ok is false and the store computes them itself. The result is
// 0 when rem is the capacity (nothing to come) or resetUS is 0.
func NextUS(l *store.Limit, rem, resetUS int64) (us int64, ok bool) {
	switch l.Algorithm {
	case store.SlidingWindowLog, store.SlidingWindowCounter:
		return 0, false
	}
	if rem >= l.Capacity() || resetUS <= 0 {
		return 0, true
	}
	if l.Algorithm != store.GCRA && l.Algorithm != store.TokenBucket {
		return resetUS, true
	}
	k := float64(l.Capacity() - rem - 1)
	x := float64(resetUS) - k*float64(l.Period.Microseconds())/float64(l.Rate)
	return min(max(int64(math.Ceil(x))+1, 1), resetUS), true
}
