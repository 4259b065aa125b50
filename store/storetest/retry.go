package storetest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// testRetryAfter: RetryAfter is honest. A denied request sent again after
// waiting exactly its RetryAfter is admitted, from an exhausted key and
// again from the state that follows. Exact: a microsecond earlier it is
// still denied, with a RetryAfter of one microsecond.
func testRetryAfter(e *env, alg store.Algorithm, cost int64) {
	l := limit(alg, 5, 500*time.Millisecond)
	r := req(e.key(), cost, l)
	for round := 0; round < 2; round++ {
		_, d := e.exhaust(r, 10)
		e.retryHonest(fmt.Sprintf("round %d", round), r, d)
	}
}

// retryHonest waits d.RetryAfter (exactly, or a microsecond short first
// with an exact clock) and asserts that r is then admitted.
func (e *env) retryHonest(what string, r store.Request, d store.Decision) {
	e.Helper()
	if e.h.Exact {
		e.advance(d.RetryAfter - time.Microsecond)
		if d2 := e.take(r); d2.Allowed || d2.RetryAfter != time.Microsecond {
			e.Fatalf("%s: denied with RetryAfter %s; a microsecond before: got %s, want denied with RetryAfter 1µs", what, d.RetryAfter, show(d2))
		}
		e.advance(time.Microsecond)
	} else {
		e.advance(d.RetryAfter)
	}
	if d2 := e.take(r); !d2.Allowed {
		e.Fatalf("%s: denied with RetryAfter %s; after waiting it: got %s, want allowed", what, d.RetryAfter, show(d2))
	}
}

// testRetryAfterRandom (exact clock only): random limit sets (one to three
// limits, rates 1-8, assorted periods and bursts), random costs and random
// waits. Every peek equals the take that follows it, and every denial's
// RetryAfter is exact to the microsecond.
func testRetryAfterRandom(e *env, alg store.Algorithm) {
	e.needExact()
	seed := uint64(time.Now().UnixNano())
	e.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	periods := []time.Duration{700 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2 * time.Second, time.Minute}
	for trial := 0; trial < 12; trial++ {
		n := 1 + rng.IntN(3)
		limits := make([]store.Limit, n)
		minCap := int64(1 << 30)
		for i := range limits {
			l := named(fmt.Sprintf("l%d", i), alg, 1+rng.Int64N(8), periods[rng.IntN(len(periods))])
			if bucketLike(alg) && rng.IntN(2) == 0 {
				l.Burst = 1 + rng.Int64N(l.Rate+4)
			}
			limits[i] = l
			minCap = min(minCap, l.Capacity())
		}
		k := e.key()
		for step := 0; step < 40; step++ {
			r := req(k, 1+rng.Int64N(minCap), limits...)
			switch rng.IntN(4) {
			case 0:
				e.advance(time.Duration(rng.Int64N(400_000)) * time.Microsecond)
			case 1:
				e.advance(time.Duration(rng.Int64N(1000)) * time.Microsecond)
			}
			p := e.peek(r)
			d := e.take(r)
			what := fmt.Sprintf("seed %d, trial %d, step %d, %s", seed, trial, step, describe(r))
			e.sameDecision(what+": peek then take", p, d)
			if !d.Allowed {
				e.retryHonest(what, r, d)
			}
		}
	}
}

// step is one request of an exact scenario: wait advance, then take (or
// peek) cost units and compare with want.
type step struct {
	advance time.Duration
	cost    int64
	want    expect
}

const (
	us = time.Microsecond
	ms = time.Millisecond
)

func ok(rem int64, reset time.Duration) expect {
	return expect{allowed: true, remaining: rem, resetAfter: reset}
}

func no(rem int64, reset, retry time.Duration) expect {
	return expect{remaining: rem, resetAfter: reset, retryAfter: retry}
}

// exactScenario is a scripted sequence of testExact: steps on one key
// under a limit of rate per period of the algorithm under test.
type exactScenario struct {
	rate   int64
	period time.Duration
	steps  []step
}

// bucketScenarios are testExact's sequences for GCRA and the token bucket,
// which decide alike.
var bucketScenarios = []exactScenario{
	{4, time.Second, []step{
		{0, 1, ok(3, 250*ms)},
		{0, 1, ok(2, 500*ms)},
		{0, 1, ok(1, 750*ms)},
		{0, 1, ok(0, time.Second)},
		{0, 1, no(0, time.Second, 250*ms)},
		{125 * ms, 1, no(0, 875*ms, 125*ms)},
		{125*ms - us, 1, no(0, -1, us)},
		{us, 1, ok(0, time.Second)},
		{0, 3, no(0, time.Second, 750*ms)},
		{500 * ms, 3, no(2, 500*ms, 250*ms)},
		{250 * ms, 3, ok(0, time.Second)},
		{2 * time.Second, 1, ok(3, 250*ms)},
	}},
	{7, time.Second, []step{
		{0, 1, ok(6, 142858*us)},
		{0, 6, ok(0, time.Second)},
		{0, 1, no(0, time.Second, 142858*us)},
		{142857 * us, 1, no(0, -1, us)},
		{us, 1, ok(0, time.Second)},
	}},
}

// exactScenarios are testExact's sequences per algorithm, with every
// Remaining, ResetAfter and RetryAfter as package store states them.
var exactScenarios = map[store.Algorithm][]exactScenario{
	store.GCRA:        bucketScenarios,
	store.TokenBucket: bucketScenarios,
	store.FixedWindow: {
		{3, time.Second, []step{
			{0, 1, ok(2, time.Second)},
			{0, 1, ok(1, time.Second)},
			{0, 1, ok(0, time.Second)},
			{400 * ms, 1, no(0, 600*ms, 600*ms)},
			{0, 2, no(0, 600*ms, 600*ms)},
			{600*ms - us, 1, no(0, us, us)},
			{us, 2, ok(1, time.Second)},
			{0, 2, no(1, time.Second, time.Second)},
			{time.Second - us, 1, ok(0, us)},
			{us, 3, ok(0, time.Second)},
		}},
	},
	store.SlidingWindowCounter: {
		{4, time.Second, []step{
			{0, 1, ok(3, 2*time.Second)},
			{0, 1, ok(2, 2*time.Second)},
			{0, 1, ok(1, 2*time.Second)},
			{0, 1, ok(0, 2*time.Second)},
			{0, 1, no(0, 2*time.Second, 1250*ms)},
			{1250*ms - us, 1, no(0, 750001*us, us)},
			{us, 1, ok(0, 1750*ms)},
			{0, 1, no(0, 1750*ms, 250*ms)},
			{250 * ms, 1, ok(0, 1500*ms)},
			{0, 2, no(0, 1500*ms, 500*ms)},
			{500 * ms, 2, ok(0, 2*time.Second)},
			{750 * ms, 1, ok(0, 1250*ms)},
			{0, 1, no(0, 1250*ms, 250*ms)},
		}},
	},
	store.SlidingWindowLog: {
		{3, time.Second, []step{
			{0, 1, ok(2, time.Second)},
			{100 * ms, 1, ok(1, time.Second)},
			{100 * ms, 1, ok(0, time.Second)},
			{100 * ms, 1, no(0, 900*ms, 700*ms)},
			{0, 2, no(0, 900*ms, 800*ms)},
			{0, 3, no(0, 900*ms, 900*ms)},
			{700*ms - us, 1, no(0, 200001*us, us)},
			{us, 1, ok(0, time.Second)},
			{0, 1, no(0, time.Second, 100*ms)},
			{0, 3, no(0, time.Second, time.Second)},
			{200 * ms, 2, ok(0, time.Second)},
		}},
	},
}

// testExact (exact clock only): a scripted sequence per algorithm with
// every Remaining, ResetAfter and RetryAfter checked against the
// semantics in package store, including fractional refills, the weighted
// previous window, boundaries one microsecond apart and costs that do not
// fit. Window algorithms start at the start of a window.
func testExact(e *env, alg store.Algorithm) {
	e.needExact()
	for si, sc := range exactScenarios[alg] {
		l := limit(alg, sc.rate, sc.period)
		e.windowRoom(alg, 0, l.Period)
		k := e.key()
		for i, st := range sc.steps {
			e.advance(st.advance)
			r := req(k, st.cost, l)
			what := fmt.Sprintf("scenario %d (%s), step %d (cost %d)", si, describe(r), i, st.cost)
			// A peek first: it must answer the same and change nothing.
			e.check(what+", peek", e.peek(r), st.want)
			e.check(what, e.take(r), st.want)
		}
	}
}
