package storetest

import (
	"fmt"
	"strings"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// withID returns r with a de-duplication id.
func withID(r store.Request, id string) store.Request {
	r.DedupID = id
	return r
}

// remainingOf returns PerLimit[i].Remaining, or -1 when d has no such
// entry (which checkDecision reports).
func remainingOf(d store.Decision, i int) int64 {
	if i >= len(d.PerLimit) {
		return -1
	}
	return d.PerLimit[i].Remaining
}

// counted returns r with CountDenied set.
func counted(r store.Request) store.Request {
	r.CountDenied = true
	return r
}

// wantDedup asserts a decision's Allowed, Duplicate and Remaining.
func (e *env) wantDedup(what string, d store.Decision, allowed, duplicate bool, remaining int64) {
	e.Helper()
	if d.Allowed != allowed || d.Duplicate != duplicate || d.Remaining != remaining {
		e.Errorf("%s: got %s, want Allowed %t, Duplicate %t, Remaining %d", what, show(d), allowed, duplicate, remaining)
	}
}

// testDedup: a de-duplication id admitted once admits its repeats without
// recording them (Duplicate, Remaining unchanged, even once the limit is
// exhausted); distinct ids count separately, a request without an id
// always counts, a peek neither remembers an id nor records a duplicate,
// ids are scoped to the key, a refused id is not remembered, ids that
// look like storage syntax or differ only past 128 bytes stay distinct,
// and with the default window an id whose limits' longest period is below
// a minute is remembered for that period: exactly that long with an exact
// clock. The bound on replays is testDedupBound's.
func testDedup(e *env, alg store.Algorithm) {
	e.windowRoom(alg, 5*time.Second, time.Hour)
	dedupRepeats(e, alg)
	dedupDistinctIDs(e, alg)
	dedupLongestPeriod(e, alg)
}

// dedupRepeats is testDedup's sequence on one key: repeats, distinct ids,
// requests without an id, peeks, refused ids and another key.
func dedupRepeats(e *env, alg store.Algorithm) {
	l := named("d", alg, 5, time.Hour)
	k := e.key()
	r := req(k, 1, l)
	r.DedupReplays = 10
	want := e.wantDedup
	first := e.take(withID(r, "a"))
	want("id a", first, true, false, 4)
	for i := 0; i < 3; i++ {
		d := e.take(withID(r, "a"))
		want(fmt.Sprintf("id a again (%d)", i), d, true, true, 4)
		if e.h.Exact && d.ResetAfter != first.ResetAfter {
			e.Errorf("id a again (%d): got ResetAfter %s, want %s (the state as it stands)", i, d.ResetAfter, first.ResetAfter)
		}
	}
	want("id b", e.take(withID(r, "b")), true, false, 3)
	want("no id", e.take(r), true, false, 2)
	want("peek id c", e.peek(withID(r, "c")), true, false, 1)
	want("id c after its peek", e.take(withID(r, "c")), true, false, 1)
	want("peek id a", e.peek(withID(r, "a")), true, true, 1)
	want("no id, exhausting", e.take(r), true, false, 0)
	want("id z on the exhausted key", e.take(withID(r, "z")), false, false, 0)
	want("id z again: refused ids are not remembered", e.take(withID(r, "z")), false, false, 0)
	want("id a on the exhausted key", e.take(withID(r, "a")), true, true, 0)
	want("id a on another key", e.take(withID(req(e.key(), 1, l), "a")), true, false, 4)
}

// dedupDistinctIDs: ids that look like storage syntax or differ only past
// 128 bytes count apart.
func dedupDistinctIDs(e *env, alg store.Algorithm) {
	want := e.wantDedup
	long := strings.Repeat("i", 300)
	ids := []string{
		"#", "=", "=a", "a", "~a", ":", "{a}", "a:b", "a\x00", "\x00", "\xff", " a",
		long[:128], long[:129], long + "1", long + "2",
	}
	wide := named("wide", alg, int64(len(ids)), time.Hour)
	rw := req(e.key(), 1, wide)
	for i, id := range ids {
		want(fmt.Sprintf("id %q (%d bytes), first", trim(id), len(id)), e.take(withID(rw, id)), true, false, int64(len(ids)-i-1))
	}
	for _, id := range ids {
		want(fmt.Sprintf("id %q (%d bytes), again", trim(id), len(id)), e.take(withID(rw, id)), true, true, 0)
	}
}

// dedupLongestPeriod: with the default window, an id is remembered for
// the longest period of its limits when that is below a minute.
func dedupLongestPeriod(e *env, alg store.Algorithm) {
	want := e.wantDedup
	p1 := pick(e, time.Second, 400*time.Millisecond)
	p2 := pick(e, 3*time.Second, time.Second)
	two := withID(req(e.key(), 1, named("short", alg, 5, p1), named("long", alg, 5, p2)), "e")
	want("two limits, id e", e.take(two), true, false, 4)
	if e.h.Exact {
		e.advance(p2 - time.Microsecond)
		if d := e.take(two); !d.Allowed || !d.Duplicate {
			e.Errorf("id e a microsecond before the longest period ends: got %s, want a Duplicate", show(d))
		}
		e.advance(time.Microsecond)
	} else {
		e.past(p1)
		if d := e.take(two); !d.Allowed || !d.Duplicate {
			e.Errorf("id e after the short period, within the long one: got %s, want a Duplicate", show(d))
		}
		e.past(p2 - p1)
	}
	if d := e.take(two); !d.Allowed || d.Duplicate {
		e.Errorf("id e once the longest period has passed: got %s, want admitted, not a Duplicate", show(d))
	}
}

// testDedupBound: an admitted id is replayed as a Duplicate at most
// DedupReplays times, and a peek reports a replay without using one; the
// repeats after the last replay are decided and recorded like requests
// without an id, and do not renew the id. So a flood of one id against a
// limit of capacity c (here 50 concurrent takes, c = 5, the default 3
// replays) is admitted exactly c + 3 times, 3 of them as Duplicate. An id
// is replayed only within DedupWindow of its admission (exactly that long
// with an exact clock; a minute by default, checked with an exact clock),
// and one admitted again after its window starts a new one with fresh
// replays. Negative bounds are invalid requests.
func testDedupBound(e *env, alg store.Algorithm) {
	e.windowRoom(alg, 5*time.Second, time.Hour)
	limits := dedupReplays(e, alg)
	dedupFlood(e, alg)
	dedupWindow(e, alg)
	dedupInvalidBounds(e, limits)
}

// dedupReplays: an id is replayed DedupReplays times, peeks use no replay,
// and the repeats after the last replay are recorded without renewing the
// id. It returns the request's limits.
func dedupReplays(e *env, alg store.Algorithm) []store.Limit {
	want := e.wantDedup
	r := withID(req(e.key(), 1, named("n", alg, 10, time.Hour)), "k")
	r.DedupReplays = 2
	want("id k", e.take(r), true, false, 9)
	want("id k, first replay", e.take(r), true, true, 9)
	want("peek id k, a replay left", e.peek(r), true, true, 9)
	want("id k, second replay", e.take(r), true, true, 9)
	want("peek id k, no replay left: as a recorded take would be", e.peek(r), true, false, 8)
	want("id k beyond its replays: recorded", e.take(r), true, false, 8)
	want("id k beyond its replays, again: not renewed", e.take(r), true, false, 7)
	return r.Limits
}

// dedupFlood: 50 concurrent takes of one id against a capacity of 5, with
// the default 3 replays, admit 8, 3 of them as Duplicate.
func dedupFlood(e *env, alg store.Algorithm) {
	flood := withID(req(e.key(), 1, named("f", alg, 5, time.Hour)), "flood")
	var admitted, duplicates int
	for _, d := range e.storm(flood, 50) {
		if d.Allowed {
			admitted++
		}
		if d.Duplicate {
			duplicates++
		}
	}
	if admitted != 5+3 || duplicates != 3 {
		e.Errorf("50 concurrent takes of one id, capacity 5, default replays: got %d admitted, %d Duplicate, want 8 admitted, 3 Duplicate", admitted, duplicates)
	}
}

// dedupWindow: an id is replayed only within DedupWindow of its admission
// (a minute by default, checked with an exact clock), and one admitted
// again after its window starts a new one.
func dedupWindow(e *env, alg store.Algorithm) {
	want := e.wantDedup
	w := pick(e, 10*time.Second, 400*time.Millisecond)
	rw := withID(req(e.key(), 1, named("w", alg, 5, time.Hour)), "w")
	rw.DedupReplays, rw.DedupWindow = 100, w
	want("id w", e.take(rw), true, false, 4)
	if e.h.Exact {
		e.advance(w - time.Microsecond)
		want("id w a microsecond before its window ends", e.take(rw), true, true, 4)
		e.advance(time.Microsecond)
	} else {
		want("id w within its window", e.take(rw), true, true, 4)
		e.past(w)
	}
	want("id w once its window has passed: recorded", e.take(rw), true, false, 3)
	want("id w in its new window", e.take(rw), true, true, 3)

	if e.h.Exact {
		rd := withID(req(e.key(), 1, named("m", alg, 5, time.Hour)), "m")
		e.take(rd)
		e.advance(time.Minute - time.Microsecond)
		if d := e.take(rd); !d.Duplicate {
			e.Errorf("id m a microsecond before the default minute ends: got %s, want a Duplicate", show(d))
		}
		e.advance(time.Microsecond)
		if d := e.take(rd); !d.Allowed || d.Duplicate {
			e.Errorf("id m once the default minute has passed: got %s, want admitted, not a Duplicate", show(d))
		}
	}
}

// dedupInvalidBounds: negative DedupReplays and DedupWindow are invalid
// requests, to Take and Peek alike.
func dedupInvalidBounds(e *env, limits []store.Limit) {
	for _, bad := range []store.Request{
		{Key: e.key(), Limits: limits, DedupID: "x", DedupReplays: -1},
		{Key: e.key(), Limits: limits, DedupID: "x", DedupWindow: -time.Second},
	} {
		if _, err := e.h.Store.Take(e.ctx, bad); !isErr(err, store.ErrInvalidRequest) {
			e.Errorf("Take(%s, replays %d, window %s): got error %v, want ErrInvalidRequest", describe(bad), bad.DedupReplays, bad.DedupWindow, err)
		}
		if _, err := e.h.Store.Peek(e.ctx, bad); !isErr(err, store.ErrInvalidRequest) {
			e.Errorf("Peek(%s, replays %d, window %s): got error %v, want ErrInvalidRequest", describe(bad), bad.DedupReplays, bad.DedupWindow, err)
		}
	}
}

// testCountDenied (window algorithms): with CountDenied a refused request
// is recorded in every limit, refused by a limit or by a block: with
// "a" 3 AND "b" 100 per period, 5 attempts leave a with 0 remaining and b
// with 95; once the window has passed the key is fresh again. A refused
// cost that is counted uses units a later request needed (without
// CountDenied it does not). Attempts refused by a block count too, and
// still do once the block is over. Exact clock, sliding log and fixed
// window: after 300 counted refusals, waiting the last RetryAfter still
// admits (the log's trim changes no decision).
func testCountDenied(e *env, alg store.Algorithm) {
	countDeniedWindow(e, alg)
	countDeniedCost(e, alg)
	countDeniedBlocks(e, alg)
	countDeniedMany(e, alg)
}

// countDeniedWindow: 5 counted attempts against "a" 3 AND "b" 100 leave a
// with 0 remaining and b with 95; once the window has passed the key is
// as fresh as a new one.
func countDeniedWindow(e *env, alg store.Algorithm) {
	p := pick(e, 10*time.Second, 500*time.Millisecond)
	a, b := named("a", alg, 3, p), named("b", alg, 100, p)
	e.windowRoom(alg, 200*time.Millisecond, p)
	r := counted(req(e.key(), 1, a, b))
	for i := 0; i < 5; i++ {
		d := e.take(r)
		if d.Allowed != (i < 3) || (!d.Allowed && d.LimitID != "a") {
			e.Errorf("attempt %d: got %s, want allowed %t (refusals by \"a\")", i+1, show(d), i < 3)
		}
	}
	d := e.peek(r)
	if d.Allowed || d.Remaining != 0 || remainingOf(d, 1) != 95 {
		e.Errorf("peek after 5 counted attempts: got %s, want refused, Remaining 0, PerLimit[1] Remaining 95", show(d))
	}
	e.past(lifetime(r))
	fresh := r
	fresh.Key = e.key()
	e.sameDecision("peek once the window has passed, compared with a fresh key", e.peek(r), e.peek(fresh))
}

// countDeniedCost: a refused cost that is counted uses units a later
// request needed; without CountDenied it does not.
func countDeniedCost(e *env, alg store.Algorithm) {
	e.windowRoom(alg, 2*time.Second, time.Hour)
	for _, isCounted := range []bool{true, false} {
		l := named("c", alg, 3, time.Hour)
		k := e.key()
		one, three := req(k, 1, l), req(k, 3, l)
		one.CountDenied, three.CountDenied = isCounted, isCounted
		e.allow(one)
		e.deny(three)
		if d := e.take(one); d.Allowed == isCounted {
			e.Errorf("CountDenied %t: cost 1 after an admitted 1 and a refused 3 of 3: got %s, want allowed %t", isCounted, show(d), !isCounted)
		}
	}
}

// countDeniedBlocks: attempts refused by a block count, and still do once
// the block is over.
func countDeniedBlocks(e *env, alg store.Algorithm) {
	p3 := pick(e, 10*time.Second, 2*time.Second)
	blk := pick(e, time.Second, 300*time.Millisecond)
	rb := counted(req(e.key(), 1, blocking("a", alg, 3, p3, blk, 0), named("b", alg, 100, p3)))
	e.windowRoom(alg, time.Second, p3)
	for i := 0; i < 3; i++ {
		e.allow(rb)
	}
	e.blockedBy("fourth attempt", e.take(rb), wantBlock{"a", 0, true, blk, 0})
	for i := 0; i < 3; i++ {
		if d := e.take(rb); !d.Blocked {
			e.Errorf("attempt %d during the block: got %s, want Blocked", i+5, show(d))
		}
	}
	if d := e.peek(rb); !d.Blocked || remainingOf(d, 1) != 93 {
		e.Errorf("peek during the block: got %s, want Blocked with PerLimit[1] Remaining 93 (3 admitted, 1 refused, 3 blocked)", show(d))
	}
	e.past(blk)
	if d := e.peek(rb); d.Allowed || d.Blocked || remainingOf(d, 1) != 93 {
		e.Errorf("peek after the block: got %s, want refused, not Blocked, PerLimit[1] Remaining 93", show(d))
	}
}

// countDeniedMany (exact clock, sliding log and fixed window): after 300
// counted refusals, waiting the last RetryAfter still admits (the log's
// trim changes no decision).
func countDeniedMany(e *env, alg store.Algorithm) {
	if !e.h.Exact || (alg != store.SlidingWindowLog && alg != store.FixedWindow) {
		return
	}
	rf := counted(req(e.key(), 1, named("f", alg, 3, time.Second)))
	e.windowRoom(alg, 0, time.Second)
	for i := 0; i < 3; i++ {
		e.allow(rf)
	}
	e.advance(time.Millisecond)
	var last store.Decision
	for i := 0; i < 300; i++ {
		last = e.deny(rf)
	}
	e.retryHonest("after 300 counted refusals", rf, last)
}
