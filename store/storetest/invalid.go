package storetest

import (
	"fmt"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// invalidCases are malformed requests with the error every store returns.
// costOnly marks requests that are invalid only through their cost, which
// Reset ignores.
func invalidCases(key string) []struct {
	name     string
	r        store.Request
	want     error
	costOnly bool
} {
	ok := limit(store.GCRA, 5, time.Second)
	nine := make([]store.Limit, store.MaxLimits+1)
	for i := range nine {
		nine[i] = named(fmt.Sprintf("l%d", i), store.GCRA, 5, time.Second)
	}
	return []struct {
		name     string
		r        store.Request
		want     error
		costOnly bool
	}{
		{"empty key", req("", 1, ok), store.ErrInvalidRequest, false},
		{"no limits", req(key, 1), store.ErrInvalidRequest, false},
		{"too many limits", req(key, 1, nine...), store.ErrInvalidRequest, false},
		{"negative cost", req(key, -1, ok), store.ErrInvalidRequest, true},
		{"cost above capacity", req(key, 6, ok), store.ErrCostExceedsCapacity, true},
		{"cost above burst", req(key, 4, store.Limit{Algorithm: store.TokenBucket, Rate: 5, Period: time.Second, Burst: 3}), store.ErrCostExceedsCapacity, true},
		{"cost above the second limit", req(key, 4, ok, named("b", store.GCRA, 3, time.Minute)), store.ErrCostExceedsCapacity, true},
		{"cost above a window's rate", req(key, 3, limit(store.SlidingWindowLog, 2, time.Second)), store.ErrCostExceedsCapacity, true},
		{"zero rate", req(key, 1, limit(store.GCRA, 0, time.Second)), store.ErrInvalidLimit, false},
		{"negative rate", req(key, 1, limit(store.FixedWindow, -3, time.Second)), store.ErrInvalidLimit, false},
		{"zero period", req(key, 1, limit(store.TokenBucket, 1, 0)), store.ErrInvalidLimit, false},
		{"sub-millisecond period", req(key, 1, limit(store.SlidingWindowCounter, 1, 1500*time.Microsecond)), store.ErrInvalidLimit, false},
		{"unknown algorithm", req(key, 1, limit(store.Algorithm(42), 1, time.Second)), store.ErrInvalidLimit, false},
		{"negative burst", req(key, 1, store.Limit{Rate: 1, Period: time.Second, Burst: -1}), store.ErrInvalidLimit, false},
		{"burst on a window algorithm", req(key, 1, store.Limit{Algorithm: store.FixedWindow, Rate: 5, Period: time.Second, Burst: 7}), store.ErrInvalidLimit, false},
		{"control character in a name", req(key, 1, named("a\nb", store.GCRA, 1, time.Second)), store.ErrInvalidLimit, false},
		{"second limit invalid", req(key, 1, ok, limit(store.GCRA, 1, 0)), store.ErrInvalidLimit, false},
		{"mixed algorithms", req(key, 1, ok, limit(store.FixedWindow, 1, time.Hour)), store.ErrInvalidRequest, false},
		{"duplicate limit IDs", req(key, 1, ok, limit(store.GCRA, 9, time.Second)), store.ErrInvalidRequest, false},
	}
}

// testInvalid: Take, Peek and Reset refuse malformed requests with an
// error matching the documented sentinel (and not ErrStoreUnavailable, so
// callers never mistake them for an outage); Reset ignores the cost and
// forgets the key's state.
func testInvalid(e *env) {
	for _, tc := range invalidCases(e.key()) {
		if tc.costOnly {
			fit := tc.r
			fit.Cost = 1
			e.allow(fit)
		}
		if _, err := e.h.Store.Take(e.ctx, tc.r); !isErr(err, tc.want) {
			e.Errorf("%s: Take: got error %v, want %v", tc.name, err, tc.want)
		}
		if _, err := e.h.Store.Peek(e.ctx, tc.r); !isErr(err, tc.want) {
			e.Errorf("%s: Peek: got error %v, want %v", tc.name, err, tc.want)
		}
		err := e.h.Store.Reset(e.ctx, tc.r)
		switch {
		case tc.costOnly && err != nil:
			e.Errorf("%s: Reset: got error %v, want nil (Reset ignores the cost)", tc.name, err)
		case !tc.costOnly && !isErr(err, tc.want):
			e.Errorf("%s: Reset: got error %v, want %v", tc.name, err, tc.want)
		}
	}
}

// testInvalidRecordsNothing: a refused request records nothing, even in
// the limits that were valid: for every algorithm, a key hit by a request
// whose second limit is invalid, or too small for the cost, is still fresh
// under its first limit. With KeyTTLs, no key exists at all.
func testInvalidRecordsNothing(e *env) {
	for _, alg := range store.Algorithms {
		first := named("a", alg, 5, time.Hour)
		k := e.key()
		bad := []store.Request{
			req(k, 1, first, named("b", alg, 0, time.Hour)),
			req(k, 4, first, named("b", alg, 3, time.Hour)),
			req(k, 1, first, named("b", alg, 1, 0)),
		}
		for _, r := range bad {
			if _, err := e.h.Store.Take(e.ctx, r); err == nil {
				e.Fatalf("Take(%s): got nil error, want a refusal", describe(r))
			}
		}
		if e.h.KeyTTLs != nil {
			if states := e.keys(); len(states) != 0 {
				e.Fatalf("%s: after refused requests: got keys %q, want none", alg, sortedKeys(states))
			}
		}
		e.check(fmt.Sprintf("%s: first valid request after refused ones", alg), e.peek(req(k, 1, first)), expect{allowed: true, remaining: 4, resetAfter: -1})
	}
}

// testResetIgnoresCost: Reset accepts any cost, even one the limits could
// never admit or a negative one, and still forgets the key.
func testResetIgnoresCost(e *env) {
	l := limit(store.GCRA, 2, time.Hour)
	k := e.key()
	for _, cost := range []int64{1000, -5} {
		e.exhaust(req(k, 1, l), 2)
		if err := e.h.Store.Reset(e.ctx, req(k, cost, l)); err != nil {
			e.Fatalf("Reset with cost %d: got error %v, want nil", cost, err)
		}
		e.check(fmt.Sprintf("after a Reset with cost %d", cost), e.take(req(k, 1, l)), expect{allowed: true, remaining: 1, resetAfter: -1})
	}
}
