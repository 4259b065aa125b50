package storetest

import (
	"fmt"
	"sync"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// refunder returns the store as a [store.Refunder], or skips.
func (e *env) refunder() store.Refunder {
	e.Helper()
	r, ok := e.h.Store.(store.Refunder)
	if !ok {
		e.Skip("settles costs: needs a store that implements store.Refunder")
	}
	return r
}

// settle settles r, whose take answered taken, at the actual cost and
// fails on an error.
func (e *env) settle(r store.Request, taken store.Decision, actual int64) {
	e.Helper()
	if err := e.refunder().Settle(e.ctx, r, taken, actual); err != nil {
		e.Fatalf("Settle(%s, %d): got error %v, want nil", describe(r), actual, err)
	}
}

// reserve returns a reservation: a request of cost with Reserve.
func reserve(key string, cost int64, limits ...store.Limit) store.Request {
	r := req(key, cost, limits...)
	r.Reserve = true
	return r
}

// reserved takes the reservation r, which must be admitted and report
// when it was taken.
func (e *env) reserved(r store.Request) store.Decision {
	e.Helper()
	d := e.allow(r)
	if d.Taken.IsZero() {
		e.Fatalf("Take(%s): got %s with a zero Taken, want the time of the take", describe(r), show(d))
	}
	return d
}

// testSettle (GCRA and the token bucket): of 10/h, a reservation of 4
// settled at 7 leaves 3, one settled at 1 leaves 9, one settled at its
// estimate changes nothing, one never settled stays charged; a
// reservation of 8 settled at 15 takes the balance 5 past the capacity:
// a request of one unit is refused until 6 units have drained (exact: 36
// minutes, and a microsecond less is refused), then admitted. A give-back
// larger than what is counted leaves the key fresh.
func testSettle(e *env, alg store.Algorithm) {
	e.refunder()
	l := limit(alg, 10, time.Hour)
	k := e.key()
	d := e.allow(req(k, 4, l))
	e.settle(req(k, 4, l), d, 7)
	e.check("4 reserved, 7 used", e.peek(req(k, 1, l)), expect{allowed: true, remaining: 2, resetAfter: -1})

	k = e.key()
	d = e.allow(req(k, 4, l))
	e.settle(req(k, 4, l), d, 1)
	e.check("4 reserved, 1 used", e.peek(req(k, 1, l)), expect{allowed: true, remaining: 8, resetAfter: -1})
	e.settle(req(k, 4, l), d, 4)
	e.check("4 reserved, 4 used", e.peek(req(k, 1, l)), expect{allowed: true, remaining: 8, resetAfter: -1})
	e.settle(req(k, 20, store.Limit{Algorithm: alg, Rate: 10, Period: time.Hour, Burst: 20}), d, 0)
	e.check("given back more than counted", e.peek(req(k, 1, l)), expect{allowed: true, remaining: 9, resetAfter: 6 * time.Minute})

	k = e.key()
	e.allow(req(k, 4, l))
	e.check("4 reserved, never settled", e.peek(req(k, 1, l)), expect{allowed: true, remaining: 5, resetAfter: -1})

	k = e.key()
	d = e.allow(req(k, 8, l))
	// The overrun drains like a larger bucket would: the suite's bounds
	// on durations and TTLs allow for it.
	e.note(req(k, 1, store.Limit{Algorithm: alg, Rate: 10, Period: time.Hour, Burst: 20}))
	e.settle(req(k, 8, l), d, 15)
	d = e.take(req(k, 1, l))
	e.check("8 reserved, 15 used", d, expect{remaining: 0, resetAfter: 90 * time.Minute, retryAfter: 36 * time.Minute})
	if !e.h.Exact {
		if d.RetryAfter < 35*time.Minute {
			e.Errorf("8 reserved, 15 used: got %s, want a RetryAfter near 36m", show(d))
		}
		return
	}
	e.advance(36*time.Minute - time.Microsecond)
	e.deny(req(k, 1, l))
	e.advance(time.Microsecond)
	e.allow(req(k, 1, l))
}

// testSettleWindows (the window algorithms): of 10 per period, a
// reservation of 4 settled at 7 leaves 3, one settled at 1 leaves 9, one
// settled at its estimate changes nothing, one never settled stays
// charged. A reservation of 8 settled at 20 a quarter period later takes
// the count 10 past the capacity, and a request of one unit is refused
// until the overrun is paid back, which each algorithm defines: the fixed
// window forgets it when its window ends (in ¾ of a period); the sliding
// window log when enough of its units have left the window (the take's 8,
// one period after it); the sliding window counter when the weight of the
// window holding 20 has fallen far enough into the next one (1.3 periods
// on). Exact to the microsecond with an exact clock.
func testSettleWindows(e *env, alg store.Algorithm) {
	e.refunder()
	p := pick(e, time.Hour, 4*time.Second)
	l := limit(alg, 10, p)
	e.windowRoom(alg, p/2, p)
	k := e.key()
	d := e.reserved(reserve(k, 4, l))
	e.settle(reserve(k, 4, l), d, 7)
	e.check("4 reserved, 7 used", e.peek(req(k, 1, l)), expect{allowed: true, remaining: 2, resetAfter: -1})

	k = e.key()
	d = e.reserved(reserve(k, 4, l))
	e.settle(reserve(k, 4, l), d, 1)
	e.check("4 reserved, 1 used", e.peek(req(k, 1, l)), expect{allowed: true, remaining: 8, resetAfter: -1})
	e.settle(reserve(k, 4, l), d, 4)
	e.check("4 reserved, 4 used", e.peek(req(k, 1, l)), expect{allowed: true, remaining: 8, resetAfter: -1})

	k = e.key()
	e.reserved(reserve(k, 4, l))
	e.check("4 reserved, never settled", e.peek(req(k, 1, l)), expect{allowed: true, remaining: 5, resetAfter: -1})

	k = e.key()
	d = e.reserved(reserve(k, 8, l))
	e.advance(pick(e, p/4, 0))
	e.settle(reserve(k, 8, l), d, 20)
	d = e.take(req(k, 1, l))
	e.check("8 reserved, 20 used", d, expect{remaining: 0, resetAfter: -1, retryAfter: -1})
	if !e.h.Exact {
		return
	}
	want := map[store.Algorithm]time.Duration{store.FixedWindow: 3 * p / 4, store.SlidingWindowLog: p, store.SlidingWindowCounter: 13 * p / 10}[alg]
	if d.RetryAfter != want {
		e.Errorf("8 reserved, 20 used: got %s, want RetryAfter %s", show(d), want)
	}
	e.advance(d.RetryAfter - time.Microsecond)
	e.deny(req(k, 1, l))
	e.advance(time.Microsecond)
	e.allow(req(k, 1, l))
}

// testSettleWindowMoved (the window algorithms): a give-back returns units
// to the window the reservation was taken in only while that window still
// counts them. Of 10 per period, 4 reserved in the first half of a window
// and 3 taken one period later leave 6 after a give-back of the 4 (the
// counter's previous window no longer weighs them; the fixed window and
// the log no longer count them anyway, and the give-back does not take
// them from the current window), and so do 4 reserved two periods before,
// where nothing counts them any more.
func testSettleWindowMoved(e *env, alg store.Algorithm) {
	e.refunder()
	p := pick(e, time.Hour, time.Second)
	l := limit(alg, 10, p)
	for _, later := range []time.Duration{p, 2 * p} {
		e.windowRoom(alg, p/2, p)
		k := e.key()
		d := e.reserved(reserve(k, 4, l))
		e.advance(later)
		e.allow(req(k, 3, l))
		e.settle(reserve(k, 4, l), d, 0)
		e.check(fmt.Sprintf("4 reserved, given back %s later", later), e.peek(req(k, 1, l)), expect{allowed: true, remaining: 6, resetAfter: -1})
	}
}

// testSettleTTL: the keys a settlement writes carry a TTL no longer than
// their state can matter: after a charge, an overrun past the capacity
// (for GCRA and the token bucket, the time a capacity of 20 takes to
// drain) and a give-back of everything reserved, every key expires within
// that lifetime, and none is left once it has passed.
func testSettleTTL(e *env, alg store.Algorithm) {
	e.refunder()
	e.needKeyTTLs()
	p := 500 * time.Millisecond
	l := limit(alg, 10, p)
	if bucketLike(alg) {
		e.note(req(e.key(), 1, store.Limit{Algorithm: alg, Rate: 10, Period: p, Burst: 20}))
	}
	e.windowRoom(alg, p/2, p)
	for _, tc := range []struct{ cost, actual int64 }{{4, 9}, {8, 15}, {4, 0}} {
		k := e.key()
		d := e.reserved(reserve(k, tc.cost, l))
		e.settle(reserve(k, tc.cost, l), d, tc.actual)
	}
	longest := e.lifetime([]store.Limit{l})
	for _, k := range sortedKeys(e.keys()) {
		if ttl := e.keys()[k]; ttl <= 0 || ttl > longest+ttlSlack {
			e.Errorf("key %q after settlements: got TTL %s, want within (0, %s]", k, ttl, longest)
		}
	}
	e.past(longest)
	if left := e.keys(); len(left) != 0 {
		e.Errorf("%s after the settlements: got keys %q, want none", longest, sortedKeys(left))
	}
}

// testSettleConcurrent: 20 concurrent reservations of 5 against 1000 per
// hour (per 4 seconds on real time for the window algorithms), each
// settled at 2, leave 40 units used (39 to 40 for GCRA and the token
// bucket with real time, which drain a little).
func testSettleConcurrent(e *env, alg store.Algorithm) {
	rf := e.refunder()
	p := time.Hour
	if windowAlg(alg) {
		p = pick(e, time.Hour, 4*time.Second)
	}
	l := limit(alg, 1000, p)
	e.windowRoom(alg, p/2, p)
	k := e.key()
	var wg sync.WaitGroup
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := reserve(k, 5, l)
			d, err := e.h.Store.Take(e.ctx, r)
			if err != nil || !d.Allowed {
				e.Errorf("Take(%s): got %v, %v, want admitted", describe(r), d.Allowed, err)
				return
			}
			if err := rf.Settle(e.ctx, r, d, 2); err != nil {
				e.Errorf("Settle(%s, 2): got error %v, want nil", describe(r), err)
			}
		}()
	}
	wg.Wait()
	got := e.peek(req(k, 1, l)).Remaining
	if got != 959 && (e.h.Exact || windowAlg(alg) || got != 960) {
		e.Errorf("20 reservations of 5 settled at 2: got %d remaining after one more, want 959 (40 used)", got)
	}
}

// testSettleInvalid: a settlement with an actual cost below 0 or above
// 2³⁰, with ApplyOverride or Partial, of an invalid request, of a
// decision that recorded nothing (a refusal), or of a window algorithm's
// decision taken without Reserve, is ErrInvalidRequest (or the request's
// own error) and charges nothing; so is a reservation that is also
// partial.
func testSettleInvalid(e *env) {
	rf := e.refunder()
	g := limit(store.GCRA, 10, time.Hour)
	f := limit(store.FixedWindow, 10, time.Hour)
	k := e.key()
	ok := e.allow(req(k, 1, g))
	plain := e.allow(req(k, 1, f))
	for _, tc := range []struct {
		name   string
		r      store.Request
		taken  store.Decision
		actual int64
		want   error
	}{
		{"fixed window without Reserve", req(k, 1, f), plain, 5, store.ErrInvalidRequest},
		{"a refusal", req(k, 1, g), store.Decision{}, 5, store.ErrInvalidRequest},
		{"negative actual", req(k, 1, g), ok, -1, store.ErrInvalidRequest},
		{"actual above 2³⁰", req(k, 1, g), ok, 1<<30 + 1, store.ErrInvalidRequest},
		{"ApplyOverride", store.Request{Key: k, Limits: []store.Limit{g}, ApplyOverride: true}, ok, 5, store.ErrInvalidRequest},
		{"Partial", partial(k, 1, g), ok, 5, store.ErrInvalidRequest},
		{"invalid limit", req(k, 1, limit(store.GCRA, 0, time.Hour)), ok, 5, store.ErrInvalidLimit},
	} {
		if err := rf.Settle(e.ctx, tc.r, tc.taken, tc.actual); !isErr(err, tc.want) {
			e.Errorf("%s: got error %v, want %v", tc.name, err, tc.want)
		}
	}
	e.check("after the refused settlements", e.peek(req(k, 1, g)), expect{allowed: true, remaining: 8, resetAfter: -1})
	e.check("after the refused settlements", e.peek(req(k, 1, f)), expect{allowed: true, remaining: 8, resetAfter: -1})
	r := reserve(k, 1, f)
	r.Partial = true
	if _, err := e.h.Store.Take(e.ctx, r); !isErr(err, store.ErrInvalidRequest) {
		e.Errorf("Take(%s): got error %v, want %v", describe(r), err, store.ErrInvalidRequest)
	}
}
