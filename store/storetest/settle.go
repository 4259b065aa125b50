package storetest

import (
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

// settle settles r at the actual cost and fails on an error.
func (e *env) settle(r store.Request, actual int64) {
	e.Helper()
	if err := e.refunder().Settle(e.ctx, r, actual); err != nil {
		e.Fatalf("Settle(%s, %d): got error %v, want nil", describe(r), actual, err)
	}
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
	e.allow(req(k, 4, l))
	e.settle(req(k, 4, l), 7)
	e.check("4 reserved, 7 used", e.peek(req(k, 1, l)), expect{allowed: true, remaining: 2, resetAfter: -1})

	k = e.key()
	e.allow(req(k, 4, l))
	e.settle(req(k, 4, l), 1)
	e.check("4 reserved, 1 used", e.peek(req(k, 1, l)), expect{allowed: true, remaining: 8, resetAfter: -1})
	e.settle(req(k, 4, l), 4)
	e.check("4 reserved, 4 used", e.peek(req(k, 1, l)), expect{allowed: true, remaining: 8, resetAfter: -1})
	e.settle(req(k, 20, store.Limit{Algorithm: alg, Rate: 10, Period: time.Hour, Burst: 20}), 0)
	e.check("given back more than counted", e.peek(req(k, 1, l)), expect{allowed: true, remaining: 9, resetAfter: 6 * time.Minute})

	k = e.key()
	e.allow(req(k, 4, l))
	e.check("4 reserved, never settled", e.peek(req(k, 1, l)), expect{allowed: true, remaining: 5, resetAfter: -1})

	k = e.key()
	e.allow(req(k, 8, l))
	// The overrun drains like a larger bucket would: the suite's bounds
	// on durations and TTLs allow for it.
	e.note(req(k, 1, store.Limit{Algorithm: alg, Rate: 10, Period: time.Hour, Burst: 20}))
	e.settle(req(k, 8, l), 15)
	d := e.take(req(k, 1, l))
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

// testSettleConcurrent (GCRA and the token bucket): 20 concurrent
// reservations of 5 against 1000/h, each settled at 2, leave 40 units
// used (39 to 40 with real time, which drains a little).
func testSettleConcurrent(e *env, alg store.Algorithm) {
	rf := e.refunder()
	l := limit(alg, 1000, time.Hour)
	k := e.key()
	var wg sync.WaitGroup
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req(k, 5, l)
			d, err := e.h.Store.Take(e.ctx, r)
			if err != nil || !d.Allowed {
				e.Errorf("Take(%s): got %v, %v, want admitted", describe(r), d.Allowed, err)
				return
			}
			if err := rf.Settle(e.ctx, r, 2); err != nil {
				e.Errorf("Settle(%s, 2): got error %v, want nil", describe(r), err)
			}
		}()
	}
	wg.Wait()
	got := e.peek(req(k, 1, l)).Remaining
	if got != 959 && (e.h.Exact || got != 960) {
		e.Errorf("20 reservations of 5 settled at 2: got %d remaining after one more, want 959 (40 used)", got)
	}
}

// testSettleInvalid: a settlement of a window algorithm, with an actual
// cost below 0 or above 2³⁰, with ApplyOverride or Partial, or of an
// invalid request, is ErrInvalidRequest (or the request's own error) and
// charges nothing.
func testSettleInvalid(e *env) {
	rf := e.refunder()
	g := limit(store.GCRA, 10, time.Hour)
	k := e.key()
	e.allow(req(k, 1, g))
	for _, tc := range []struct {
		name   string
		r      store.Request
		actual int64
		want   error
	}{
		{"fixed window", req(k, 1, limit(store.FixedWindow, 10, time.Hour)), 5, store.ErrInvalidRequest},
		{"negative actual", req(k, 1, g), -1, store.ErrInvalidRequest},
		{"actual above 2³⁰", req(k, 1, g), 1<<30 + 1, store.ErrInvalidRequest},
		{"ApplyOverride", store.Request{Key: k, Limits: []store.Limit{g}, ApplyOverride: true}, 5, store.ErrInvalidRequest},
		{"Partial", partial(k, 1, g), 5, store.ErrInvalidRequest},
		{"invalid limit", req(k, 1, limit(store.GCRA, 0, time.Hour)), 5, store.ErrInvalidLimit},
	} {
		if err := rf.Settle(e.ctx, tc.r, tc.actual); !isErr(err, tc.want) {
			e.Errorf("%s: got error %v, want %v", tc.name, err, tc.want)
		}
	}
	e.check("after the refused settlements", e.peek(req(k, 1, g)), expect{allowed: true, remaining: 8, resetAfter: -1})
}
