package storetest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// checkNext asserts NextAfter, of the decision and of each PerLimit entry:
// whole microseconds, 0 exactly when the limit is full, never later than
// ResetAfter; for a refusal never later than RetryAfter, and for a block
// RetryAfter itself.
func (e *env) checkNext(r store.Request, d store.Decision, fail func(string, ...any)) {
	e.Helper()
	entry := func(what string, capacity, rem int64, next, reset time.Duration) {
		switch {
		case next < 0 || next%time.Microsecond != 0:
			fail("%s: NextAfter %s, want >= 0 in whole microseconds", what, next)
		case (next == 0) != (rem >= capacity):
			fail("%s: NextAfter %s with %d of %d remaining, want 0 exactly when full", what, next, rem, capacity)
		case next > reset:
			fail("%s: NextAfter %s, want <= ResetAfter %s (more quota comes no later than all of it)", what, next, reset)
		}
	}
	for i, p := range d.PerLimit {
		if i < len(r.Limits) && d.Override != store.OverrideScale {
			entry(fmt.Sprintf("PerLimit[%d]", i), r.Limits[i].Capacity(), p.Remaining, p.NextAfter, p.ResetAfter)
		}
	}
	switch {
	case d.Blocked:
		if d.NextAfter != d.RetryAfter {
			fail("NextAfter: got %s, want RetryAfter %s for a blocked request", d.NextAfter, d.RetryAfter)
		}
	case !d.Allowed && d.NextAfter > d.RetryAfter:
		fail("NextAfter: got %s, want <= RetryAfter %s for a refusal", d.NextAfter, d.RetryAfter)
	case d.Override == store.OverrideSuspend:
		if d.NextAfter != d.RetryAfter {
			fail("NextAfter: got %s, want RetryAfter %s while suspended", d.NextAfter, d.RetryAfter)
		}
	default:
		entry("decision", d.Capacity, d.Remaining, d.NextAfter, d.ResetAfter)
		if d.Index >= 0 && d.Index < len(d.PerLimit) && d.Allowed && d.PerLimit[d.Index].NextAfter != d.NextAfter {
			fail("PerLimit[%d]: NextAfter %s, want the deciding limit's %s", d.Index, d.PerLimit[d.Index].NextAfter, d.NextAfter)
		}
	}
}

// nextLate is how much later than the exact instant a store may report
// NextAfter for alg: GCRA and the token bucket derive it from two numbers
// rounded up to the microsecond (contract.NextUS), the window algorithms
// compute it exactly.
func nextLate(alg store.Algorithm) time.Duration {
	if bucketLike(alg) {
		return 3 * time.Microsecond
	}
	return 0
}

// testNextAfter: NextAfter is honest and tight. After every decision on a
// limit that is not full, a request for one unit more than Remaining is
// admitted once NextAfter has passed and, with an exact clock, refused
// just before (a microsecond before for the window algorithms, four for
// GCRA and the token bucket), through random costs and waits.
func testNextAfter(e *env, alg store.Algorithm) {
	seed := uint64(time.Now().UnixNano())
	e.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x4e78))
	l := limit(alg, 5, pick(e, 700*time.Millisecond, 300*time.Millisecond))
	if bucketLike(alg) {
		l.Burst = 7
	}
	k := e.key()
	steps := pick(e, 90, 15)
	for step := 0; step < steps; step++ {
		e.advance(time.Duration(rng.Int64N(int64(l.Period) / 3)))
		d := e.take(req(k, 1+rng.Int64N(3), l))
		if d.Remaining >= d.Capacity || rng.IntN(3) == 0 {
			continue // some steps check nothing, so that state builds up
		}
		what := fmt.Sprintf("seed %d, step %d: after %s", seed, step, show(d))
		more := req(k, d.Remaining+1, l)
		if e.h.Exact {
			early := d.NextAfter - nextLate(alg) - time.Microsecond
			e.advance(early)
			if p := e.peek(more); p.Allowed {
				e.Fatalf("%s: %d units admitted at %s, before NextAfter %s: want refused (NextAfter too late)", what, more.Cost, early, d.NextAfter)
			}
			e.advance(d.NextAfter - early)
		} else {
			e.advance(d.NextAfter)
		}
		if p := e.peek(more); !p.Allowed {
			e.Fatalf("%s: %d units refused after NextAfter %s (%s): want admitted", what, more.Cost, d.NextAfter, show(p))
		}
	}
}

// testNextAfterValues (exact clock only) checks NextAfter against values
// worked out by hand: the time until one unit more, not until the limit is
// full.
func testNextAfterValues(e *env, alg store.Algorithm) {
	e.needExact()
	k := e.key()
	ms := time.Millisecond
	switch alg {
	case store.GCRA, store.TokenBucket:
		// 5 per 500ms with a burst of 8: a unit drains in 100ms. The
		// derived time is a microsecond late (contract.NextUS).
		l := limit(alg, 5, 500*ms)
		l.Burst = 8
		us := time.Microsecond
		e.near("fresh, after 6 units", e.take(req(k, 6, l)).NextAfter, 100*ms+us)
		e.advance(50 * ms) // 5.5 used, 6.5 after a unit: 1 remaining, the second in 50ms
		d := e.take(req(k, 1, l))
		e.near(fmt.Sprintf("6.5 used (%s)", show(d)), d.NextAfter, 50*ms+us)
		e.near("its ResetAfter", d.ResetAfter, 650*ms)
	case store.FixedWindow:
		l := limit(alg, 5, 500*ms)
		e.windowRoom(alg, 0, l.Period)
		e.advance(120 * ms)
		e.near("after 2 units", e.take(req(k, 2, l)).NextAfter, 380*ms)
	case store.SlidingWindowLog:
		l := limit(alg, 5, 500*ms)
		e.allow(req(k, 2, l))
		e.advance(100 * ms)
		d := e.allow(req(k, 3, l))
		// The two oldest units leave at 500ms, the newest at 600ms.
		e.near("full: next", d.NextAfter, 400*ms)
		e.near("full: reset", d.ResetAfter, 500*ms)
		e.advance(400 * ms)
		d = e.peek(req(k, 1, l))
		e.near("after the oldest left: next", d.NextAfter, 100*ms)
	case store.SlidingWindowCounter:
		// 4 per second; 4 units at 0.5s of a window. In the next window,
		// at 0.25s, est = 4·0.75 = 3, 1 remaining: est falls to 2 at 0.5s.
		l := limit(alg, 4, time.Second)
		e.windowRoom(alg, 0, l.Period)
		e.advance(500 * ms)
		e.allow(req(k, 4, l))
		e.advance(750 * ms)
		d := e.peek(req(k, 1, l))
		e.check("next window", d, expect{allowed: true, remaining: 0, resetAfter: -1, retryAfter: -1})
		e.near("est 3 + 1: next", d.NextAfter, 250*ms)
	}
}
