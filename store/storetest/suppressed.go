package storetest

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
	"github.com/ratekeeper/ratekeeper/store/suppressed"
)

// suppressedTests run once each, as "suppressed/<name>", on harnesses
// that set Rand (the draws must be chosen by the test).
var suppressedTests = []generalTest{
	{"regimes", testSuppressedRegimes},
	{"factor-follows-offered-load", testSuppressedFactor},
	{"factor-held-for-the-cache-period", testSuppressedFactorHeld},
	{"cost-above-soft-limit", testSuppressedCostAboveSoft},
	{"exact", testSuppressedExact},
	{"peek", testSuppressedPeek},
	{"reset", testSuppressedReset},
	{"multi", testSuppressedMulti},
	{"ttl", testSuppressedTTL},
	{"invalid", testSuppressedInvalid},
}

// needRand skips subtests that choose the store's random draws.
func (e *env) needRand() {
	e.Helper()
	if e.h.Rand == nil {
		e.Skip("chooses the random draws of the suppressed strategy: needs a harness with Rand")
	}
}

// suppress has the subtest decide through the store of package
// store/suppressed over the harness's store, with the soft limits that
// suppressedLimit registers.
func (e *env) suppress() {
	e.Helper()
	st, err := suppressed.New(e.h.Store, suppressed.Options{Soft: func(l store.Limit) int64 {
		if v, ok := e.softs.Load(l.Name); ok {
			return v.(int64)
		}
		return max(l.Rate/2, 1) // the default, which limits with hard 0 test
	}})
	if err != nil {
		e.Fatalf("suppressed.New: %v", err)
	}
	e.base, e.h.Store, e.suppressing = e.h.Store, st, true
}

// suppressedLimit returns a named counting limit of hard units per period
// and registers soft as its soft limit; a hard of 0 asks for the default
// soft limit (half the hard one) under a hard limit of 2·soft.
func (e *env) suppressedLimit(name string, soft, hard int64, period time.Duration) store.Limit {
	if hard == 0 {
		hard = 2 * soft
		e.softs.Delete(name)
	} else {
		e.softs.Store(name, soft)
	}
	return store.Limit{Name: name, Algorithm: store.SlidingWindowCounter, Rate: hard, Period: period}
}

// factor returns the suppression factor as the stores compute it for a
// limit of soft and hard limits whose window holds acc accepted units
// when offered units have been offered, this request included (both as
// the stores estimate them): 1 − soft·(hard − acc)/((hard − soft)·offered),
// rounded to whole parts per million, within 0 to 1.
func factor(soft, hard int64, acc, offered float64) float64 {
	share := float64(soft) * (float64(hard) - acc) / (float64(hard-soft) * offered)
	f := math.Floor(float64((1-share)*1e6) + 0.5)
	return min(max(f, 0), 1e6) / 1e6
}

// suppression asserts the suppression part of a decision.
func (e *env) suppression(what string, d store.Decision, want float64, suppressed bool) {
	e.Helper()
	if d.Suppression != want || d.Suppressed != suppressed {
		e.Errorf("%s: got %s, want Suppression %v, Suppressed %t", what, show(d), want, suppressed)
	}
}

// testSuppressedRegimes: with soft limit 10 and hard limit 20 per minute,
// the first 10 units are admitted whatever the draw (factor 0); the 11th
// meets the factor 1 − 10/11 (10 offered before it, plus itself; at the
// soft limit the share admitted is the rate's) and is refused by a draw
// below it (Suppressed, Remaining still 10, RetryAfter the wait until it
// fits under the soft limit); the factor then rises with every unit
// accepted and offered, and a draw at or above it admits; units up to the
// hard limit (the 20th, at the hard limit, included) are drawn for; the
// 21st, over the hard limit, is refused whatever the draw with factor 1,
// not Suppressed, and waits for room under the hard limit.
func testSuppressedRegimes(e *env) {
	e.needRand()
	const p = time.Minute
	e.windowRoom(store.SlidingWindowCounter, 2*time.Second, p)
	l := e.suppressedLimit("s", 10, 20, p)
	k := e.key()
	e.h.Rand.always(0)
	for i := int64(1); i <= 10; i++ {
		d := e.take(req(k, 1, l))
		e.check("below the soft limit", d, expect{allowed: true, remaining: 20 - i, resetAfter: 2 * p})
		e.suppression("below the soft limit", d, 0, false)
	}
	d := e.take(req(k, 1, l))
	// Under the soft limit once 1 of the 10 units has lost its weight:
	// 6s into the next window.
	e.check("between the limits, draw 0", d, expect{remaining: 10, resetAfter: 2 * p, retryAfter: p + 6*time.Second})
	e.suppression("between the limits, draw 0", d, factor(10, 20, 10, 11), true)

	e.h.Rand.always(0.999999)
	d = e.peek(req(k, 1, l))
	e.check("between the limits: peek", d, expect{allowed: true, remaining: 9, resetAfter: 2 * p})
	e.suppression("between the limits: peek", d, factor(10, 20, 10, 12), false)
	for i := int64(1); i <= 10; i++ {
		// 10+i−1 accepted, 11+i−1 offered before this one.
		acc, offered := float64(9+i), float64(11+i)
		d = e.take(req(k, 1, l))
		e.check("between the limits", d, expect{allowed: true, remaining: 10 - i, resetAfter: 2 * p})
		e.suppression("between the limits", d, factor(10, 20, acc, offered), false)
	}
	d = e.take(req(k, 1, l))
	e.check("over the hard limit", d, expect{remaining: 0, resetAfter: 2 * p, retryAfter: p + 3*time.Second})
	e.suppression("over the hard limit", d, 1, false)
	d = e.peek(req(k, 2, l))
	e.suppression("over the hard limit, cost 2: peek", d, 1, false)
}

// testSuppressedFactor: the factor is computed from the offered load,
// refused requests included, and rises with it at once: the refusals after
// the soft limit meet 1 − 10/11, 1 − 10/12, ... 1 − 10/40, and the request
// after them, a cache period later, 1 − 10/41.
func testSuppressedFactor(e *env) {
	e.needRand()
	const p = time.Minute
	e.windowRoom(store.SlidingWindowCounter, 2*time.Second, p)
	l := e.suppressedLimit("s", 10, 0, p)
	k := e.key()
	e.h.Rand.always(0)
	e.exhaust(req(k, 1, l), 10)
	for i := 0; i < 29; i++ {
		d := e.take(req(k, 1, l))
		e.suppression("between the limits", d, factor(10, 20, 10, float64(12+i)), true)
	}
	e.past(contract.SuppressionCache)
	d := e.take(req(k, 1, l))
	e.check("after the cache period", d, expect{remaining: 10, resetAfter: -1, retryAfter: -1})
	e.suppression("after the cache period", d, factor(10, 20, 10, 41), true)
}

// testSuppressedFactorHeld: a factor lower than the cached one does not
// replace it before contract.SuppressionCache has passed. With a period of
// one second: 10 accepted and 30 offered in one window; at the start of
// the next, a refusal meets 1 − 10/31 and caches it; 50ms later the
// weights have fallen to 0.95 and the factor computed would be lower, but
// the cached one holds; 110ms after it, with a cost of 2 to stay above the
// soft limit, the lower factor applies.
func testSuppressedFactorHeld(e *env) {
	e.needRand()
	e.needExact()
	const p = time.Second
	e.windowRoom(store.SlidingWindowCounter, 0, p)
	l := e.suppressedLimit("s", 10, 20, p)
	k := e.key()
	e.h.Rand.always(0)
	for i := 0; i < 30; i++ {
		e.take(req(k, 1, l))
	}
	e.advance(p)
	held := factor(10, 20, 10, 31)
	e.suppression("next window", e.take(req(k, 1, l)), held, true)
	e.advance(50 * time.Millisecond)
	weighted := func(n, cur int64, e time.Duration) float64 {
		return float64(n)*float64((p-e).Microseconds())/float64(p.Microseconds()) + float64(cur)
	}
	if lower := factor(10, 20, weighted(10, 0, 50*time.Millisecond), weighted(30, 1, 50*time.Millisecond)+1); lower >= held {
		e.Fatalf("test setup: factor %v 50ms later, want below %v", lower, held)
	}
	e.suppression("50ms later", e.take(req(k, 1, l)), held, true)
	e.advance(60 * time.Millisecond)
	at := 110 * time.Millisecond
	e.suppression("110ms later, cost 2", e.take(req(k, 2, l)), factor(10, 20, weighted(10, 0, at), weighted(30, 2, at)+2), true)
}

// testSuppressedCostAboveSoft: a request costing more than the soft limit
// (and no more than the hard one) is drawn for against the factor, and
// refused it waits until nothing accepted is left in the window: then it
// passes whatever the draw.
func testSuppressedCostAboveSoft(e *env) {
	e.needRand()
	const p = time.Minute
	e.windowRoom(store.SlidingWindowCounter, 2*time.Second, p)
	l := e.suppressedLimit("s", 2, 6, p)
	k := e.key()
	e.h.Rand.always(0)
	e.allow(req(k, 1, l))
	f := factor(2, 6, 1, 5)
	e.h.Rand.always(f / 2)
	d := e.take(req(k, 4, l))
	e.check("cost 4 of soft 2, a draw below the factor", d, expect{remaining: 5, resetAfter: 2 * p, retryAfter: 2 * p})
	e.suppression("cost 4 of soft 2, a draw below the factor", d, f, true)
	e.h.Rand.always(0.9)
	d = e.take(req(k, 4, l))
	e.check("cost 4 of soft 2, draw 0.9", d, expect{allowed: true, remaining: 1, resetAfter: 2 * p})
	e.suppression("cost 4 of soft 2, draw 0.9", d, factor(2, 6, 1, 9), false)
}

// testSuppressedExact: concurrent takes on one key, with random draws,
// never accept more than the hard limit, and every accepted unit is
// counted once: a peek afterwards reports the hard limit less the
// admissions as remaining.
func testSuppressedExact(e *env) {
	e.needRand()
	const (
		soft, hard = 20, 40
		workers    = 16
		each       = 20
	)
	p := time.Hour
	e.windowRoom(store.SlidingWindowCounter, 5*time.Second, p)
	l := e.suppressedLimit("s", soft, hard, p)
	k := e.key()
	src := rand.New(rand.NewPCG(1, 2))
	e.h.Rand.drawFrom(src.Float64)
	var admitted, suppressed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				d, err := e.h.Store.Take(e.ctx, req(k, 1, l))
				if err != nil {
					e.Errorf("Take: got error %v, want nil", err)
					return
				}
				e.checkDecision("Take", req(k, 1, l), d)
				if d.Allowed {
					admitted.Add(1)
				}
				if d.Suppressed {
					suppressed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	a := admitted.Load()
	if a < soft || a > hard {
		e.Fatalf("%d concurrent takes: got %d admitted, want %d to %d", workers*each, a, soft, hard)
	}
	if suppressed.Load() == 0 {
		e.Errorf("%d concurrent takes: got no suppressed refusal, want some", workers*each)
	}
	e.h.Rand.always(0.999999)
	d := e.peek(req(k, 1, l))
	if d.Remaining != hard-a {
		e.Errorf("after %d admitted: got %s, want Remaining %d", a, show(d), hard-a)
	}
}

// testSuppressedPeek: a peek draws like a take and decides like it, but
// writes nothing: no key for a fresh one, no offered unit.
func testSuppressedPeek(e *env) {
	e.needRand()
	const p = time.Minute
	e.windowRoom(store.SlidingWindowCounter, 2*time.Second, p)
	l := e.suppressedLimit("s", 3, 6, p)
	k := e.key()
	e.h.Rand.always(0)
	d := e.peek(req(k, 1, l))
	e.check("fresh key: peek", d, expect{allowed: true, remaining: 5, resetAfter: 2 * p})
	if e.h.KeyTTLs != nil {
		if states := e.keys(); len(states) != 0 {
			e.Fatalf("after a peek on a fresh key: got keys %q, want none", sortedKeys(states))
		}
	}
	e.exhaust(req(k, 1, l), 3)
	// Three accepted and four offered: once the factor cached by the
	// refusal has lapsed, a peek meets 1 − 3/5, and so does the take
	// after it, which would meet 1 − 3/6 had the peek been recorded.
	e.past(contract.SuppressionCache)
	peeked := e.peek(req(k, 1, l))
	e.suppression("peek between the limits", peeked, factor(3, 6, 3, 5), true)
	e.sameDecision("take after a peek", e.take(req(k, 1, l)), peeked)
}

// testSuppressedReset: Reset forgets accepted and offered units alike.
func testSuppressedReset(e *env) {
	e.needRand()
	l := e.suppressedLimit("s", 2, 4, time.Hour)
	k := e.key()
	e.h.Rand.always(0)
	e.exhaust(req(k, 1, l), 2)
	e.reset(req(k, 1, l))
	d := e.take(req(k, 1, l))
	e.check("after Reset", d, expect{allowed: true, remaining: 3, resetAfter: -1})
	e.reset(req(k, 1, l))
	e.resetNotFound("second Reset", req(k, 1, l))
}

// testSuppressedMulti: with two limits a request is accepted only if both
// admit it; a request refused by one limit's draw is Suppressed, counts as
// offered in both and as accepted in neither.
func testSuppressedMulti(e *env) {
	e.needRand()
	e.windowRoom(store.SlidingWindowCounter, 2*time.Second, time.Minute, time.Hour)
	a := e.suppressedLimit("a", 5, 10, time.Minute)
	b := e.suppressedLimit("b", 100, 200, time.Hour)
	k := e.key()
	e.h.Rand.always(0)
	for i := 0; i < 5; i++ {
		e.allow(req(k, 1, a, b))
	}
	d := e.take(req(k, 1, a, b))
	if d.Allowed || !d.Suppressed || d.Index != 0 || d.Suppression != factor(5, 10, 5, 6) {
		e.Errorf("refused by a's draw: got %s, want refused, Suppressed, Index 0, Suppression %v", show(d), factor(5, 10, 5, 6))
	}
	d = e.peek(req(k, 1, b))
	e.check("b alone after the refusal", d, expect{allowed: true, remaining: 194, resetAfter: -1})
	e.suppression("b alone after the refusal", d, 0, false)
}

// testSuppressedTTL: every key a suppressed take writes, admitted or
// refused, expires within two periods.
func testSuppressedTTL(e *env) {
	e.needRand()
	e.needKeyTTLs()
	p := pick(e, time.Minute, 2*time.Second)
	l := e.suppressedLimit("s", 2, 3, p)
	e.h.Rand.always(0)
	k := e.key()
	e.exhaust(req(k, 1, l), 2)
	e.take(req(k, 1, l))
	states := e.keys()
	if len(states) != 1 {
		e.Fatalf("got keys %q, want one state key", sortedKeys(states))
	}
	for key, ttl := range states {
		if ttl <= 0 || ttl > 2*p+ttlSlack {
			e.Errorf("%s: got TTL %s, want in (0, %s]", key, ttl, 2*p)
		}
	}
	e.past(2 * p)
	if states := e.keys(); len(states) != 0 {
		e.Errorf("after two periods: got keys %q, want none", sortedKeys(states))
	}
}

// testSuppressedInvalid: a hard limit below the soft one, a Block,
// counted refusals or a counting limit other than a sliding window counter
// are invalid; without a soft limit of its own a limit's soft limit is
// half its hard one.
func testSuppressedInvalid(e *env) {
	k := e.key()
	for _, tc := range []struct {
		what string
		r    store.Request
		want error
	}{
		{"hard limit below the soft one", req(k, 1, e.suppressedLimit("s", 10, 5, time.Minute)), store.ErrInvalidLimit},
		{"Block", req(k, 1, store.Limit{Algorithm: store.SlidingWindowCounter, Rate: 10, Period: time.Minute, Block: time.Second}), store.ErrInvalidLimit},
		{"not a sliding window counter", req(k, 1, store.Limit{Algorithm: store.FixedWindow, Rate: 10, Period: time.Minute}), store.ErrInvalidLimit},
		{"CountDenied", store.Request{Key: k, Limits: []store.Limit{e.suppressedLimit("s", 10, 0, time.Minute)}, CountDenied: true}, store.ErrInvalidRequest},
		{"cost above the hard limit", req(k, 21, e.suppressedLimit("s", 10, 20, time.Minute)), store.ErrCostExceedsCapacity},
	} {
		if _, err := e.h.Store.Take(e.ctx, tc.r); !isErr(err, tc.want) {
			e.Errorf("%s: Take: got error %v, want %v", tc.what, err, tc.want)
		}
	}
	if e.h.Rand == nil {
		return
	}
	e.h.Rand.always(0)
	d := e.take(req(k, 1, e.suppressedLimit("s", 10, 0, time.Minute)))
	if d.Capacity != 2*10 || !d.Allowed || d.Suppression != 0 {
		e.Errorf("default soft limit: got %s, want allowed with Limit %d, factor 0", show(d), 2*10)
	}
}
