package storetest

import (
	"fmt"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// testMultiAllOrNothing: with "short" 3/second AND "long" 5/hour, requests
// denied by short are recorded in neither limit: short keeps denying until
// its RetryAfter (waiting it admits the request, so short recorded none of
// the denials) and long runs out only after exactly 5 admissions (so long
// recorded none of them). The denial after the fifth admission comes from
// long.
func testMultiAllOrNothing(e *env, alg store.Algorithm) {
	short := named("short", alg, 3, time.Second)
	long := named("long", alg, 5, time.Hour)
	e.windowRoom(alg, 5*time.Second, time.Hour, time.Second)
	r := req(e.key(), 1, short, long)
	admitted := 0
	for round := 0; admitted < 5; round++ {
		if round > 12 {
			e.Fatalf("after %d rounds: got %d admitted, want 5", round, admitted)
		}
		d := e.take(r)
		if d.Allowed {
			admitted++
			continue
		}
		if d.LimitID != "short" || d.Index != 0 {
			e.Fatalf("after %d admitted: got %s, want a denial by \"short\" (Index 0): \"long\" still admits %d", admitted, show(d), 5-admitted)
		}
		refilled := false
		for i := 0; i < 3; i++ {
			if again := e.take(r); again.Allowed {
				if e.h.Exact {
					e.Fatalf("same request at the same instant as a denial: got %s, want denied", show(again))
				}
				admitted++ // short refilled in between; rare with real time
				refilled = true
				break
			}
		}
		if refilled {
			continue
		}
		e.retryHonest(fmt.Sprintf("after %d admitted and 4 denials", admitted), r, d)
		admitted++
	}
	d := e.take(r)
	if d.Allowed || d.LimitID != "long" || d.Index != 1 || d.Remaining != 0 {
		e.Errorf("after 5 admitted: got %s, want denied by \"long\" (Index 1) with Remaining 0", show(d))
	}
}

// testMultiDecidingLimit: an admitted request reports the limit with the
// fewest units remaining (ties: the earliest); a denied one the denying
// limit with the longest RetryAfter, wherever it sits in the list, with
// that limit's Remaining, ResetAfter and RetryAfter, so that waiting
// RetryAfter satisfies every limit. The single-limit twins of a
// multi-limit key, fed the same requests, tell what each limit answers.
func testMultiDecidingLimit(e *env, alg store.Algorithm) {
	e.windowRoom(alg, 10*time.Second, 2*time.Hour, time.Hour, time.Second)
	const h = time.Hour
	admitted := []struct {
		limits []store.Limit
		index  int
	}{
		{[]store.Limit{named("a", alg, 10, h), named("b", alg, 5, h)}, 1},
		{[]store.Limit{named("b", alg, 5, h), named("a", alg, 10, h)}, 0},
		{[]store.Limit{named("a", alg, 5, h), named("b", alg, 5, 2*h)}, 0},
	}
	for _, tc := range admitted {
		r := req(e.key(), 1, tc.limits...)
		if d := e.take(r); !d.Allowed || d.Index != tc.index || d.Remaining != 4 {
			e.Errorf("%s: got %s, want allowed, Index %d, Remaining 4 (fewest remaining, earliest on ties)", describe(r), show(d), tc.index)
		}
	}

	for _, index := range []int{0, 1} {
		limits := []store.Limit{named("a", alg, 2, h), named("b", alg, 10, h)}
		if index == 1 {
			limits[0], limits[1] = limits[1], limits[0]
		}
		r := req(e.key(), 1, limits...)
		e.allow(r)
		e.allow(r)
		if d := e.take(r); d.Allowed || d.Index != index || d.Remaining != 0 {
			e.Errorf("%s, third request: got %s, want denied, Index %d (the only denying limit), Remaining 0", describe(r), show(d), index)
		}
	}

	// Twelve calls in one window of a: the room asked for at the start
	// may have gone by now.
	e.windowRoom(alg, 300*time.Millisecond, time.Second)
	la := named("a", alg, 2, time.Second)
	lb := named("b", alg, 2, time.Hour)
	ka, kb, kab, kba := req(e.key(), 1, la), req(e.key(), 1, lb), req(e.key(), 1, la, lb), req(e.key(), 1, lb, la)
	for i := 0; i < 2; i++ {
		for _, r := range []store.Request{ka, kb, kab, kba} {
			e.allow(r)
		}
	}
	da, db, dab, dba := e.peek(ka), e.peek(kb), e.peek(kab), e.peek(kba)
	if da.Allowed || db.Allowed {
		e.Fatalf("single-limit twins after 2 requests: got %s and %s, want both denied", show(da), show(db))
	}
	for _, tc := range []struct {
		d     store.Decision
		index int
	}{{dab, 1}, {dba, 0}} {
		d := tc.d
		switch {
		case d.Allowed || d.LimitID != "b" || d.Index != tc.index:
			e.Errorf("both limits exhausted: got %s, want denied by \"b\" (Index %d): its RetryAfter %s exceeds a's %s", show(d), tc.index, db.RetryAfter, da.RetryAfter)
		case d.RetryAfter < da.RetryAfter:
			e.Errorf("both limits exhausted: got RetryAfter %s, want >= %s (a's)", d.RetryAfter, da.RetryAfter)
		case e.h.Exact && (d.RetryAfter != db.RetryAfter || d.ResetAfter != db.ResetAfter || d.Remaining != db.Remaining):
			e.Errorf("both limits exhausted: got %s, want b's durations and Remaining %s", show(d), show(db))
		case !e.h.Exact && (d.RetryAfter < db.RetryAfter-time.Second || d.RetryAfter > db.RetryAfter+time.Second):
			e.Errorf("both limits exhausted: got RetryAfter %s, want about %s (b's)", d.RetryAfter, db.RetryAfter)
		}
	}
}

// testMultiExact (exact clock, GCRA and token bucket): the limit from the
// package documentation, 3/second AND 5/10 seconds, step by step: the
// short limit decides first, the long one once it has fewer units left,
// a request denied by the long limit alone waits for it alone, and every
// Remaining, ResetAfter and RetryAfter is exact.
func testMultiExact(e *env, alg store.Algorithm) {
	e.needExact()
	a := named("a", alg, 3, time.Second)
	b := named("b", alg, 5, 10*time.Second)
	r := req(e.key(), 1, a, b)
	steps := []struct {
		advance time.Duration
		want    expect
	}{
		{0, expect{allowed: true, remaining: 2, resetAfter: 333334 * us, limitID: "a"}},
		{0, expect{allowed: true, remaining: 1, resetAfter: 666667 * us, limitID: "a"}},
		{0, expect{allowed: true, remaining: 0, resetAfter: time.Second, limitID: "a"}},
		{0, expect{remaining: 0, resetAfter: time.Second, retryAfter: 333334 * us, limitID: "a"}},
		{time.Second, expect{allowed: true, remaining: 1, resetAfter: 7 * time.Second, limitID: "b"}},
		{0, expect{allowed: true, remaining: 0, resetAfter: 9 * time.Second, limitID: "b"}},
		{0, expect{remaining: 0, resetAfter: 9 * time.Second, retryAfter: time.Second, limitID: "b"}},
		{time.Second - us, expect{remaining: 0, resetAfter: -1, retryAfter: us, limitID: "b"}},
		{us, expect{allowed: true, remaining: 0, resetAfter: 10 * time.Second, limitID: "b"}},
		{0, expect{remaining: 0, resetAfter: 10 * time.Second, retryAfter: 2 * time.Second, limitID: "b"}},
	}
	for i, st := range steps {
		e.advance(st.advance)
		what := fmt.Sprintf("step %d", i)
		e.check(what+", peek", e.peek(r), st.want)
		e.check(what, e.take(r), st.want)
	}
}
