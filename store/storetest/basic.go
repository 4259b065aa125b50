package storetest

import (
	"fmt"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// byAlg picks the value for alg among the bucket algorithms (GCRA, token
// bucket), the sliding window log, the sliding window counter and the
// fixed window.
func byAlg[T any](alg store.Algorithm, bucket, log, counter, fixed T) T {
	switch alg {
	case store.SlidingWindowLog:
		return log
	case store.SlidingWindowCounter:
		return counter
	case store.FixedWindow:
		return fixed
	}
	return bucket
}

// testLimit: from a fresh key exactly Rate requests of cost 1 are
// admitted, each reporting one unit fewer, and the next is denied with no
// unit remaining. Rates 6 and 7 catch a GCRA whose float arithmetic drifts
// past the tolerance before the burst is spent. Exact: ResetAfter after
// each request and RetryAfter of the denial, at the start of a window.
func testLimit(e *env, alg store.Algorithm) {
	for _, rate := range []int64{1, 5, 6, 7, 60} {
		l := limit(alg, rate, time.Hour)
		p := l.Period
		e.windowRoom(alg, 10*time.Second, p)
		r := req(e.key(), 1, l)
		for i := int64(1); i <= rate; i++ {
			e.check(fmt.Sprintf("rate %d, request %d", rate, i), e.take(r), expect{
				allowed:    true,
				remaining:  rate - i,
				resetAfter: byAlg(alg, ceilDiv(p, i, rate), p, 2*p, p),
			})
		}
		e.check(fmt.Sprintf("rate %d, request %d", rate, rate+1), e.take(r), expect{
			remaining:  0,
			resetAfter: byAlg(alg, p, p, 2*p, p),
			retryAfter: byAlg(alg, ceilDiv(p, 1, rate), p, p+ceilDiv(p, 1, rate), p),
		})
	}
}

// testBurst: GCRA and the token bucket admit Burst units at once from a
// fresh key, whether Burst is above or below Rate, report Burst as Limit,
// and then admit one unit per Period/Rate.
func testBurst(e *env, alg store.Algorithm) {
	const p = time.Hour
	for _, tc := range []struct{ rate, burst int64 }{{2, 6}, {6, 2}} {
		l := store.Limit{Algorithm: alg, Rate: tc.rate, Period: p, Burst: tc.burst}
		r := req(e.key(), 1, l)
		for i := int64(1); i <= tc.burst; i++ {
			e.check(fmt.Sprintf("rate %d burst %d, request %d", tc.rate, tc.burst, i), e.take(r), expect{
				allowed:    true,
				remaining:  tc.burst - i,
				resetAfter: ceilDiv(p, i, tc.rate),
			})
		}
		e.check(fmt.Sprintf("rate %d burst %d, request %d", tc.rate, tc.burst, tc.burst+1), e.take(r), expect{
			remaining:  0,
			resetAfter: ceilDiv(p, tc.burst, tc.rate),
			retryAfter: ceilDiv(p, 1, tc.rate),
		})
		e.check("a whole burst at once", e.take(req(e.key(), tc.burst, l)), expect{allowed: true, remaining: 0, resetAfter: -1, retryAfter: -1})
		if _, err := e.h.Store.Take(e.ctx, req(e.key(), tc.burst+1, l)); !isErr(err, store.ErrCostExceedsCapacity) {
			e.Errorf("cost %d above burst %d: got error %v, want ErrCostExceedsCapacity", tc.burst+1, tc.burst, err)
		}
	}
}

// testCost: a request of cost c takes c units; one that does not fit is
// denied and takes nothing (Remaining is unchanged afterwards, and a
// request that does fit is then admitted); a request of the whole capacity
// fits a fresh key; a cost above capacity is an error, not a denial, and
// records nothing.
func testCost(e *env, alg store.Algorithm) {
	l := limit(alg, 5, time.Hour)
	p := l.Period
	e.windowRoom(alg, 10*time.Second, p)
	k := e.key()
	e.check("cost 3 on a fresh key", e.take(req(k, 3, l)), expect{
		allowed: true, remaining: 2,
		resetAfter: byAlg(alg, ceilDiv(p, 3, 5), p, 2*p, p),
	})
	e.check("cost 3 with 2 remaining", e.take(req(k, 3, l)), expect{
		remaining:  2,
		resetAfter: byAlg(alg, ceilDiv(p, 3, 5), p, 2*p, p),
		retryAfter: byAlg(alg, ceilDiv(p, 1, 5), p, p+ceilDiv(p, 1, 3), p),
	})
	e.check("peek cost 2 after the denied cost 3", e.peek(req(k, 2, l)), expect{allowed: true, remaining: 0, resetAfter: -1})
	e.check("cost 2 after the denied cost 3", e.take(req(k, 2, l)), expect{allowed: true, remaining: 0, resetAfter: -1})
	e.check("cost 1 on an exhausted key", e.take(req(k, 1, l)), expect{remaining: 0, resetAfter: -1, retryAfter: -1})

	k2 := e.key()
	e.check("whole capacity on a fresh key", e.take(req(k2, 5, l)), expect{allowed: true, remaining: 0, resetAfter: -1})
	e.deny(req(k2, 1, l))

	k3 := e.key()
	if _, err := e.h.Store.Take(e.ctx, req(k3, 6, l)); !isErr(err, store.ErrCostExceedsCapacity) {
		e.Errorf("Take cost 6 of capacity 5: got error %v, want ErrCostExceedsCapacity", err)
	}
	if _, err := e.h.Store.Peek(e.ctx, req(k3, 6, l)); !isErr(err, store.ErrCostExceedsCapacity) {
		e.Errorf("Peek cost 6 of capacity 5: got error %v, want ErrCostExceedsCapacity", err)
	}
	e.check("whole capacity after a refused cost", e.take(req(k3, 5, l)), expect{allowed: true, remaining: 0, resetAfter: -1})
}

// testManyUnits: units recorded at the same instant all count. A cost of
// 50 takes 50 units in one step. Exact, sliding window log: 100 requests
// in one microsecond are all admitted, the 101st waits exactly one Period,
// and all 100 leave the window together.
func testManyUnits(e *env, alg store.Algorithm) {
	l := limit(alg, 100, time.Hour)
	e.windowRoom(alg, 10*time.Second, l.Period)
	k := e.key()
	e.check("cost 50", e.take(req(k, 50, l)), expect{allowed: true, remaining: 50, resetAfter: -1})
	e.check("second cost 50", e.take(req(k, 50, l)), expect{allowed: true, remaining: 0, resetAfter: -1})
	e.deny(req(k, 1, l))

	if alg != store.SlidingWindowLog || !e.h.Exact {
		return
	}
	l = limit(alg, 100, time.Second)
	r := req(e.key(), 1, l)
	for i := 0; i < 2; i++ {
		for j := int64(1); j <= 100; j++ {
			e.check(fmt.Sprintf("round %d, request %d in one microsecond", i, j), e.take(r), expect{allowed: true, remaining: 100 - j, resetAfter: time.Second})
		}
		e.check(fmt.Sprintf("round %d, request 101", i), e.take(r), expect{remaining: 0, resetAfter: time.Second, retryAfter: time.Second})
		e.advance(time.Second - time.Microsecond)
		e.check(fmt.Sprintf("round %d, a microsecond before the entries leave", i), e.take(r), expect{remaining: 0, resetAfter: time.Microsecond, retryAfter: time.Microsecond})
		e.advance(time.Microsecond)
	}
}

// testRefill: after waiting the ResetAfter of a denial a key is as good as
// new: it answers like a fresh key and admits exactly Rate again. Exact: a
// microsecond earlier it is not yet full.
func testRefill(e *env, alg store.Algorithm) {
	l := limit(alg, 4, time.Second)
	e.windowRoom(alg, 300*time.Millisecond, l.Period)
	r := req(e.key(), 1, l)
	n, d := e.exhaust(r, 8)
	if n != 4 {
		e.Fatalf("fresh key, rate 4: got %d admitted, want 4", n)
	}
	if e.h.Exact {
		e.advance(d.ResetAfter - time.Microsecond)
		got, fresh := e.peek(r), e.peek(req(e.key(), 1, l))
		if got.Remaining >= fresh.Remaining {
			e.Errorf("a microsecond before ResetAfter %s: got Remaining %d, want < %d (not yet full)", d.ResetAfter, got.Remaining, fresh.Remaining)
		}
		e.advance(time.Microsecond)
	} else {
		e.past(d.ResetAfter)
	}
	e.sameDecision("peek after ResetAfter, compared with a fresh key", e.peek(r), e.peek(req(e.key(), 1, l)))
	if n, _ := e.exhaust(r, 8); n != 4 {
		e.Errorf("after ResetAfter: got %d admitted, want 4", n)
	}
}
