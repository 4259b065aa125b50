package storetest

import (
	"fmt"
	"sync"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// blocking returns a named limit whose refusals block the key for block,
// escalating up to blockMax (0: no escalation).
func blocking(name string, alg store.Algorithm, rate int64, period, block, blockMax time.Duration) store.Limit {
	return store.Limit{Name: name, Algorithm: alg, Rate: rate, Period: period, Block: block, BlockMax: blockMax}
}

// windowAlg reports whether alg counts units in windows, the algorithms
// that support CountDenied.
func windowAlg(alg store.Algorithm) bool { return !bucketLike(alg) }

// wantBlock is the block a refusal is expected to report: the ID of the
// limit that started it (limitID) and that limit's index in the request
// (-1 when absent), whether the request started it, and left, the block's
// remaining time.
type wantBlock struct {
	limitID string
	index   int
	started bool
	left    time.Duration
	// early: with real time, the block may have started up to early
	// after the moment left counts from (the request that started it
	// took that long, and Redis decided it somewhere within it), so it
	// may have up to early more to run than left.
	early time.Duration
}

// blockedByIt reports whether d refuses the request because of the block
// w, started or not by the request as w says, and fails otherwise.
func (e *env) blockedByIt(what string, d store.Decision, w wantBlock) bool {
	e.Helper()
	if d.Allowed || !d.Blocked || d.BlockStarted != w.started || d.LimitID != w.limitID || d.Index != w.index {
		e.Errorf("%s: got %s, want Blocked by %q (Index %d) with BlockStarted %t", what, show(d), w.limitID, w.index, w.started)
		return false
	}
	return true
}

// blockedBy asserts that d refuses the request because of the block w
// and that its RetryAfter is at least w.left, the block's remaining time:
// later when a limit refuses the request for longer (see blockedAfter).
func (e *env) blockedBy(what string, d store.Decision, w wantBlock) {
	e.Helper()
	if !e.blockedByIt(what, d, w) {
		return
	}
	if low := w.left - pick(e, 0, slack); d.RetryAfter < low {
		e.Errorf("%s: RetryAfter: got %s, want >= %s (the block's remaining time)", what, d.RetryAfter, low)
	}
}

// blockedAfter asserts that d refuses the request because of the block w
// and that its RetryAfter is the later of w.left, the block's remaining
// time, and wait, the limits' own wait for the request (see limitsWait; 0
// when they admit it).
func (e *env) blockedAfter(what string, d store.Decision, w wantBlock, wait time.Duration) {
	e.Helper()
	e.blockedWithin(what, d, w, wait, 0)
}

// blockedWithin is blockedAfter where, with real time, wait was measured
// up to late after the decision (so the decision's wait may be longer by
// as much).
func (e *env) blockedWithin(what string, d store.Decision, w wantBlock, wait, late time.Duration) {
	e.Helper()
	if !e.blockedByIt(what, d, w) {
		return
	}
	what = fmt.Sprintf("%s: RetryAfter (the later of the block's remaining %s and the limits' wait %s)", what, w.left, wait)
	want := max(w.left, wait)
	if e.h.Exact {
		e.near(what, d.RetryAfter, want)
		return
	}
	hi := want + slack
	if late > 0 && w.left < wait {
		hi = want + late + slack
	}
	hi = max(hi, w.left+w.early+slack)
	switch {
	case hi == want+slack:
		e.near(what, d.RetryAfter, want)
	case d.RetryAfter < want-slack || d.RetryAfter > hi:
		e.Errorf("%s: got %s, want %s to %s", what, d.RetryAfter, want-slack, hi)
	}
}

// blockedFor asserts what blockedAfter does, with the limits' own wait for
// r as it stands now: right for a decision on r that recorded nothing
// since it was made (a peek, or a take that does not count refusals).
func (e *env) blockedFor(what string, r store.Request, d store.Decision, w wantBlock) {
	e.Helper()
	// d came from the last take or peek: its wait was counted from a
	// moment since then (a loaded machine may stall between the two calls).
	from := time.Duration(e.callAt.Load())
	wait := e.limitsWait(r)
	e.blockedWithin(what, d, w, wait, e.clock()-from)
}

// limitsWait returns what r's limits alone make it wait: the RetryAfter
// of a peek of r with the same limits (the same IDs, so the same state)
// without their blocks, which no block refuses, and without its
// de-duplication id; 0 when they admit it.
func (e *env) limitsWait(r store.Request) time.Duration {
	e.Helper()
	ls := make([]store.Limit, len(r.Limits))
	for i, l := range r.Limits {
		l.Block, l.BlockMax = 0, 0
		ls[i] = l
	}
	r.Limits, r.DedupID = ls, ""
	d := e.peek(r)
	if d.Blocked {
		e.Errorf("peek of %s: got %s, want a decision of the limits alone", describe(r), show(d))
	}
	return d.RetryAfter
}

// endBlock waits until a block with left to run is over, left being
// tracked by the test, not read from RetryAfter (which names the first
// time a retry is admitted, later than the block's end when a limit
// still refuses). With an exact clock it first checks, a millisecond
// before the end, that r is still blocked (blocks keep whole
// milliseconds). Once the block is over, r is no longer Blocked, whatever
// its limits say.
func (e *env) endBlock(what string, r store.Request, limitID string, index int, left time.Duration) {
	e.Helper()
	if !e.h.Exact {
		e.advance(left + slack)
	} else {
		e.advance(left - time.Millisecond)
		e.blockedFor(what+", a millisecond before the block ends", r, e.peek(r), wantBlock{limitID, index, false, time.Millisecond, 0})
		e.advance(time.Millisecond)
	}
	if d := e.peek(r); d.Blocked {
		e.Errorf("%s, once the block has ended: got %s, want not Blocked", what, show(d))
	}
}

// storm sends n takes of r at once from n goroutines and returns their
// decisions, each checked.
func (e *env) storm(r store.Request, n int) []store.Decision {
	e.Helper()
	e.note(r)
	out := make([]store.Decision, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			d, err := e.h.Store.Take(e.ctx, r)
			if err != nil {
				e.Errorf("Take(%s): got error %v, want nil", describe(r), err)
				return
			}
			e.checkDecision("Take", r, d)
			out[g] = d
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// tally counts admitted, blocked and block-starting decisions.
func tally(ds []store.Decision) (admitted, blocked, started int) {
	for _, d := range ds {
		if d.Allowed {
			admitted++
		}
		if d.Blocked {
			blocked++
		}
		if d.BlockStarted {
			started++
		}
	}
	return admitted, blocked, started
}

// testBlock: a refusal by a limit with a Block starts a block: the
// refused request reports Blocked and BlockStarted, LimitID and Index name
// the limit, RetryAfter (and ResetAfter) is the block's duration (the
// window, shorter, has room by then). While the block lasts every request
// of the key is refused with RetryAfter the later of the block's remaining
// time and its limits' wait, Peek included, even after the counting window
// has emptied, and so are requests with other blocking limits (Index -1
// when the blocking limit is not among them); a request none of whose
// limits blocks is not subject to blocks. Once it ends the key is as good
// as new; the next block lasts as long (no BlockMax, no escalation).
func testBlock(e *env, alg store.Algorithm) {
	// On real time the three takes of a round have 300ms (a GCRA
	// interval, or the room left in the window) before a third would be
	// admitted, and the block outlasts the state's lifetime by 800ms.
	p := pick(e, time.Second, 600*time.Millisecond)
	blk := pick(e, 4*time.Second, 2*time.Second)
	l := blocking("login", alg, 2, p, blk, 0)
	other := blocking("other", alg, 100, time.Hour, time.Hour, 0)
	plain := named("plain", alg, 100, time.Hour)
	k := e.key()
	r := req(k, 1, l)
	// plain counts across both rounds, which take seconds on real time:
	// room in its hour's window first.
	e.windowRoom(alg, 15*time.Second, time.Hour)
	for round := 0; round < 2; round++ {
		what := fmt.Sprintf("round %d", round)
		e.windowRoom(alg, 300*time.Millisecond, p)
		e.check(what+", request 1", e.take(r), expect{allowed: true, remaining: 1, resetAfter: -1})
		e.check(what+", request 2", e.take(r), expect{allowed: true, remaining: 0, resetAfter: -1})
		start := e.clock()
		e.blockedAfter(what+", request 3", e.take(r), wantBlock{"login", 0, true, blk, 0}, 0)
		took := e.clock() - start // the block started within it
		e.blockedAfter(what+", request 4", e.take(r), wantBlock{"login", 0, false, blk - (e.clock() - start), took}, 0)
		e.blockedFor(what+", peek", r, e.peek(r), wantBlock{"login", 0, false, blk - (e.clock() - start), took})

		e.past(lifetime(r))
		e.blockedAfter(what+", after the counting window", e.take(r), wantBlock{"login", 0, false, blk - (e.clock() - start), took}, 0)
		e.blockedAfter(what+", another limit of the key", e.take(req(k, 1, other)), wantBlock{"login", -1, false, blk - (e.clock() - start), took}, 0)
		e.blockedAfter(what+", another limit first", e.take(req(k, 1, other, l)), wantBlock{"login", 1, false, blk - (e.clock() - start), took}, 0)
		e.check(what+", a limit that does not block", e.take(req(k, 1, plain)), expect{allowed: true, remaining: int64(99 - round), resetAfter: -1})
		e.endBlock(what, r, "login", 0, blk-(e.clock()-start)+took)
		e.check(what+", peek after the block", e.peek(r), expect{allowed: true, remaining: 1, resetAfter: -1})
	}
	e.check("another limit after the blocks", e.take(req(k, 1, other)), expect{allowed: true, remaining: 99, resetAfter: -1})
}

// testBlockStartedOnce: 100 concurrent takes against a fresh key of rate
// 5 with a Block admit exactly 5; every refusal is Blocked and exactly
// one reports BlockStarted, whose RetryAfter is the later of the whole
// block and the limit's own wait (at least the whole block when refusals
// count, since they change that wait). The window algorithms repeat it
// with 64 takes that CountDenied.
func testBlockStartedOnce(e *env, alg store.Algorithm) {
	blk := pick(e, time.Hour, 2*time.Second)
	l := blocking("once", alg, 5, time.Hour, blk, 0)
	e.windowRoom(alg, 2*time.Second, time.Hour)
	for _, tc := range []struct {
		name    string
		n       int
		counted bool
	}{{"100 takes", 100, false}, {"64 takes that count when refused", 64, true}} {
		if tc.counted && !windowAlg(alg) {
			continue
		}
		r := req(e.key(), 1, l)
		r.CountDenied = tc.counted
		stormed := e.clock()
		ds := e.storm(r, tc.n)
		admitted, blocked, started := tally(ds)
		if admitted != 5 || blocked != tc.n-5 || started != 1 {
			e.Errorf("%s: got %d admitted, %d blocked, %d BlockStarted, want 5, %d, 1", tc.name, admitted, blocked, started, tc.n-5)
		}
		for _, d := range ds {
			if !d.BlockStarted {
				continue
			}
			if tc.counted {
				e.blockedBy(tc.name+": the request that started the block", d, wantBlock{"once", 0, true, blk, 0})
			} else {
				// The decision came at some point of the storm: on real
				// time its wait may exceed the limits' wait now by as
				// much as has passed since the storm began.
				wait := e.limitsWait(r)
				e.blockedWithin(tc.name+": the request that started the block", d, wantBlock{"once", 0, true, blk, 0}, wait, e.clock()-stormed)
			}
		}
		if d := e.take(r); !d.Blocked || d.BlockStarted {
			e.Errorf("%s: the take after them: got %s, want Blocked without BlockStarted", tc.name, show(d))
		}
	}
}

// testThreshold (window algorithms): 100 concurrent attempts against rate
// 5 with a Block admit exactly 5, and rate 4 (the ">=" form of "5") exactly
// 4; each starts exactly one block. One by one, rate 4 reports Limit 4 and
// Remaining 3, 2, 1, 0, and the fifth attempt starts the block.
func testThreshold(e *env, alg store.Algorithm) {
	blk := pick(e, 15*time.Minute, 2*time.Second)
	for _, tc := range []struct {
		name  string
		admit int
	}{{"exceed", 5}, {"reach", 4}} {
		l := store.Limit{Name: "login", Algorithm: alg, Rate: int64(tc.admit), Period: time.Minute, Block: blk}
		e.windowRoom(alg, 2*time.Second, l.Period)
		ds := e.storm(req(e.key(), 1, l), 100)
		admitted, blocked, started := tally(ds)
		if admitted != tc.admit || blocked != 100-tc.admit || started != 1 {
			e.Errorf("%s: 100 concurrent attempts: got %d admitted, %d blocked, %d BlockStarted, want %d, %d, 1", tc.name, admitted, blocked, started, tc.admit, 100-tc.admit)
		}
		r := req(e.key(), 1, l)
		for i := 1; i <= tc.admit; i++ {
			d := e.take(r)
			if !d.Allowed || d.Capacity != int64(tc.admit) || d.Remaining != int64(tc.admit-i) {
				e.Errorf("%s: attempt %d: got %s, want allowed with Limit %d, Remaining %d", tc.name, i, show(d), tc.admit, tc.admit-i)
			}
		}
		e.blockedFor(fmt.Sprintf("%s: attempt %d", tc.name, tc.admit+1), r, e.take(r), wantBlock{"login", 0, true, blk, 0})
	}
}

// testBlockEscalation: with Block b and BlockMax 4b the blocks of one key
// last b, 2b, 4b, 4b. The strike count lasts the block plus BlockMax from
// the start of the latest block: a millisecond before that the next block
// is still 4b (exact clock); once it has passed, blocks start again at b,
// then 2b.
func testBlockEscalation(e *env, alg store.Algorithm) {
	// With real time a block of 200 ms (windows of 100 ms): a loaded
	// machine stalled a take between two of 50 ms.
	b := pick(e, time.Second, 200*time.Millisecond)
	mx := 4 * b
	l := blocking("esc", alg, 1, b/2, b, mx)
	r := req(e.key(), 1, l)
	block := func(what string, want time.Duration) {
		e.Helper()
		// With real time a take may still stall past the window's end
		// (or, for the other algorithms, a period after the first take),
		// and one more is then admitted: correct, and allowed only when
		// that moment may have passed.
		var rolled func() bool
		if !e.h.Exact {
			e.windowRoom(alg, l.Period, l.Period)
			start := e.clock()
			end := start + l.Period
			if alg == store.FixedWindow || alg == store.SlidingWindowCounter {
				end = start + e.boundary(l.Period)
			}
			rolled = func() bool { return e.clock() >= end }
		}
		n, d := e.exhaust(r, 3)
		if n != 1 && (n != 2 || rolled == nil || !rolled()) {
			e.Fatalf("%s: got %d admitted before the refusal, want 1 (the window is fresh after a block)", what, n)
		}
		e.blockedFor(what, r, d, wantBlock{"esc", 0, true, want, 0})
		e.endBlock(what, r, "esc", 0, want)
	}
	block("block 1", b)
	block("block 2", 2*b)
	block("block 3", 4*b)
	block("block 4", 4*b)
	if e.h.Exact {
		e.advance(mx - time.Millisecond)
		block("block 5, a millisecond before the strikes lapse", 4*b)
		e.advance(mx + time.Millisecond)
	} else {
		e.past(mx)
	}
	block("first block after the strikes lapsed", b)
	block("second block after the strikes lapsed", 2*b)
}

// testBlockChoice: when several refusing limits have a Block, the longest
// block wins (ties: the earliest limit), after escalation; a limit that
// admits the request starts no block even if it has one, and a refusal
// by limits without a Block blocks nothing. Strikes belong to the key:
// blocks started under one limit set escalate those of another.
func testBlockChoice(e *env, alg store.Algorithm) {
	u := pick(e, time.Second, 100*time.Millisecond)
	h := time.Hour
	e.windowRoom(alg, 5*time.Second, h)
	for _, tc := range []struct {
		name    string
		limits  []store.Limit
		limitID string
		index   int
		left    time.Duration
	}{
		{"longer second", []store.Limit{blocking("a", alg, 1, h, u, 0), blocking("b", alg, 1, h, 2*u, 0)}, "b", 1, 2 * u},
		{"longer first", []store.Limit{blocking("a", alg, 1, h, 2*u, 0), blocking("b", alg, 1, h, u, 0)}, "a", 0, 2 * u},
		{"tie", []store.Limit{blocking("a", alg, 1, h, u, 0), blocking("b", alg, 1, h, u, 0)}, "a", 0, u},
		{"only the refusing limit blocks", []store.Limit{blocking("a", alg, 1, h, u, 0), blocking("b", alg, 2, h, 2*u, 0)}, "a", 0, u},
	} {
		r := req(e.key(), 1, tc.limits...)
		e.allow(r)
		e.blockedFor(tc.name, r, e.take(r), wantBlock{tc.limitID, tc.index, true, tc.left, 0})
		// The limits' wait (an hour) hides the block's length in
		// RetryAfter: the block must end when it should.
		e.endBlock(tc.name, r, tc.limitID, tc.index, tc.left)
	}

	r := req(e.key(), 1, named("a", alg, 1, h), blocking("b", alg, 5, h, u, 0))
	e.allow(r)
	for i := 0; i < 2; i++ {
		if d := e.take(r); d.Allowed || d.Blocked || d.LimitID != "a" {
			e.Errorf("refused by a limit without a Block, the blocking one admitting: got %s, want refused by \"a\", not Blocked", show(d))
		}
	}

	k := e.key()
	first := req(k, 1, blocking("c", alg, 1, h, u, 8*u))
	e.allow(first)
	d := e.take(first)
	e.blockedFor("escalating limit, first block", first, d, wantBlock{"c", 0, true, u, 0})
	e.endBlock("escalating limit, first block", first, "c", 0, u)
	second := req(k, 1, blocking("c2", alg, 1, h, u, 8*u), blocking("d", alg, 1, h, 3*u/2, 0))
	e.allow(second)
	e.blockedFor("escalated (2×) against a longer base block (1.5×)", second, e.take(second), wantBlock{"c2", 0, true, 2 * u, 0})
	e.endBlock("escalated (2×) against a longer base block (1.5×)", second, "c2", 0, 2*u)
}

// testPeekBlocks: Peek writes nothing: where Take would start a block it
// reports the refusal without Blocked (and no block key appears); the
// Take that follows starts the block. On a blocked key a peek reports the
// block and its remaining time without extending it, records nothing even
// when the request counts refusals, and a remembered de-duplication id
// does not get past the block.
func testPeekBlocks(e *env, alg store.Algorithm) {
	blk := pick(e, 2*time.Second, time.Second)
	l := blocking("p", alg, 2, time.Hour, blk, 0)
	wide := named("wide", alg, 100, time.Hour)
	e.windowRoom(alg, 5*time.Second, time.Hour)
	k := e.key()
	r := req(k, 1, l)
	once := r
	once.DedupID = "once"
	e.check("take with a de-duplication id", e.take(once), expect{allowed: true, remaining: 1, resetAfter: -1})
	e.allow(r)
	for i := 0; i < 3; i++ {
		if d := e.peek(r); d.Allowed || d.Blocked || d.LimitID != "p" {
			e.Errorf("peek %d where a take would start a block: got %s, want refused by \"p\", not Blocked", i, show(d))
		}
	}
	if e.h.KeyTTLs != nil {
		if keys := e.storedKeys(); len(keys.Block)+len(keys.Strikes) != 0 {
			e.Errorf("after peeks: got block keys %q, strike keys %q, want none", sortedKeys(keys.Block), sortedKeys(keys.Strikes))
		}
	}
	start := e.clock()
	e.blockedFor("take after the peeks", r, e.take(r), wantBlock{"p", 0, true, blk, 0})
	took := e.clock() - start // the block started within it

	e.advance(pick(e, 500*time.Millisecond, 100*time.Millisecond))
	for i := 0; i < 3; i++ {
		e.blockedFor(fmt.Sprintf("peek %d on the blocked key", i), r, e.peek(r), wantBlock{"p", 0, false, blk - (e.clock() - start), took})
	}
	e.blockedFor("peek with the remembered id", once, e.peek(once), wantBlock{"p", 0, false, blk - (e.clock() - start), took})
	e.blockedFor("take with the remembered id", once, e.take(once), wantBlock{"p", 0, false, blk - (e.clock() - start), took})
	// The peeks did not extend the block (the limit's wait hides its end
	// in RetryAfter).
	defer e.endBlock("the block the peeks saw", r, "p", 0, blk-(e.clock()-start)+took)
	if !windowAlg(alg) {
		return
	}
	rc := counted(req(k, 1, l, wide))
	for i := 0; i < 3; i++ {
		d := e.peek(rc)
		e.blockedFor(fmt.Sprintf("counted peek %d", i), rc, d, wantBlock{"p", 0, false, blk - (e.clock() - start), took})
		if got := remainingOf(d, 1); got != 100 {
			e.Errorf("counted peek %d: got PerLimit[1] Remaining %d, want 100 (peeks record nothing)", i, got)
		}
	}
	e.take(rc)
	if got := remainingOf(e.peek(rc), 1); got != 99 {
		e.Errorf("after one counted take: got PerLimit[1] Remaining %d, want 99", got)
	}
}

// testBlockReset: Reset forgets the key's block, its strike count and its
// remembered de-duplication ids along with its limit state: the key is
// admitted at once, a remembered id counts again, and the next block
// lasts the base duration, where a twin key without the Reset escalates.
// A Reset under any limits of the key lifts its block. With KeyTTLs, no
// block, strike or de-duplication key survives.
func testBlockReset(e *env, alg store.Algorithm) {
	blk := pick(e, time.Second, 200*time.Millisecond)
	l := blocking("r", alg, 2, time.Hour, blk, 4*blk)
	other := named("other", alg, 5, time.Hour)
	e.windowRoom(alg, 5*time.Second, time.Hour)
	k := e.key()
	r := req(k, 1, l)
	once := withID(r, "once")
	e.check("id once", e.take(once), expect{allowed: true, remaining: 1, resetAfter: -1})
	if d := e.take(once); !d.Duplicate || d.Remaining != 1 {
		e.Errorf("id once again: got %s, want a Duplicate with Remaining 1", show(d))
	}
	e.allow(r)
	e.blockedFor("third request", r, e.take(r), wantBlock{"r", 0, true, blk, 0})
	e.reset(req(k, 0, l))
	d := e.take(once)
	if !d.Allowed || d.Duplicate || d.Remaining != 1 {
		e.Errorf("remembered id after Reset: got %s, want allowed, not Duplicate, Remaining 1", show(d))
	}
	e.allow(r)
	e.blockedFor("block after Reset (strikes forgotten)", r, e.take(r), wantBlock{"r", 0, true, blk, 0})
	e.endBlock("block after Reset (strikes forgotten)", r, "r", 0, blk)

	twin := req(e.key(), 1, l)
	e.allow(twin)
	e.allow(twin)
	d = e.take(twin)
	e.blockedFor("twin without Reset, first block", twin, d, wantBlock{"r", 0, true, blk, 0})
	e.endBlock("twin without Reset, first block", twin, "r", 0, blk)
	e.blockedFor("twin without Reset, second block", twin, e.take(twin), wantBlock{"r", 0, true, 2 * blk, 0})
	e.endBlock("twin without Reset, second block", twin, "r", 0, 2*blk)

	e.reset(req(k, 0, other))
	e.check("another limit after a Reset under it", e.take(req(k, 1, other)), expect{allowed: true, remaining: 4, resetAfter: -1})
	if e.h.KeyTTLs == nil {
		return
	}
	e.reset(req(k, 0, l))
	e.reset(req(twin.Key, 0, l))
	keys := e.storedKeys()
	for _, set := range []struct {
		kind string
		keys map[string]time.Duration
	}{{"block", keys.Block}, {"strikes", keys.Strikes}, {"de-duplication", keys.Dedup}} {
		if len(set.keys) != 0 {
			e.Errorf("after Reset: got %s keys %q, want none", set.kind, sortedKeys(set.keys))
		}
	}
}

// testBlockTTL (needs KeyTTLs): a block key lives as long as the block, a
// strike counter the block plus BlockMax, de-duplication ids the longest
// period, and state written by counted refusals no longer than the
// state's lifetime; once all of that has passed no key remains.
func testBlockTTL(e *env, alg store.Algorithm) {
	e.needKeyTTLs()
	const blk, mx, p = 200 * time.Millisecond, 400 * time.Millisecond, 500 * time.Millisecond
	l := blocking("t", alg, 2, p, blk, mx)
	e.windowRoom(alg, 300*time.Millisecond, p)
	r := req(e.key(), 1, l)
	r.CountDenied = windowAlg(alg)
	once := r
	once.DedupID = "once"
	start := e.clock()
	e.allow(once)
	e.allow(r)
	wait := e.limitsWait(r)
	e.blockedAfter("third request", e.take(r), wantBlock{"t", 0, true, blk, 0}, wait)
	e.take(r)
	keys := e.storedKeys()
	elapsed := e.clock() - start
	for _, tc := range []struct {
		kind string
		keys map[string]time.Duration
		life time.Duration
		low  time.Duration // the TTL is at least this; 0: unchecked
	}{
		{"block", keys.Block, blk, blk - elapsed - ttlSlack},
		{"strikes", keys.Strikes, blk + mx, blk + mx - elapsed - ttlSlack},
		{"de-duplication", keys.Dedup, p, p - elapsed - ttlSlack},
		{"limit state", keys.State, lifetime(r), 0},
	} {
		if len(tc.keys) == 0 {
			e.Errorf("after a block and a remembered id: got no %s key, want one", tc.kind)
		}
		for k, ttl := range tc.keys {
			switch {
			case ttl < 0 || (ttl == 0 && e.h.Exact):
				e.Errorf("%s key %q: got TTL %s, want > 0 (every key expires)", tc.kind, k, ttl)
			case ttl > tc.life+ttlSlack:
				e.Errorf("%s key %q: got TTL %s, want <= %s", tc.kind, k, ttl, tc.life)
			case ttl < tc.low:
				e.Errorf("%s key %q: got TTL %s, want >= %s (it still matters that long)", tc.kind, k, ttl, tc.low)
			}
		}
	}
	// Blocks and strike counters keep whole milliseconds; a strike counter
	// in its last millisecond still counts.
	e.past(max(blk+mx, p, lifetime(r)) + 2*time.Millisecond)
	if states := e.keys(); len(states) != 0 {
		e.Errorf("after every lifetime: got keys %q, want none", sortedKeys(states))
	}
}

// testRetryAfterBlockShorterThanWindow (sliding window log), the
// regression test of "Retry-After that does not admit": with a Block
// shorter than the Period, the block ends while the window is still full.
// The refusal that starts the block reports as RetryAfter (and
// ResetAfter) the window's wait, not the block's end; at the block's end
// the request is refused by the window alone, without a block; a
// microsecond before RetryAfter it is still refused (exact clock); at
// RetryAfter it is admitted and starts no block.
func testRetryAfterBlockShorterThanWindow(e *env, alg store.Algorithm) {
	p := pick(e, 3*time.Second, 1500*time.Millisecond)
	blk := pick(e, 2*time.Second, time.Second)
	l := blocking("login", alg, 2, p, blk, 0)
	r := req(e.key(), 1, l)
	start := e.clock()
	e.allow(r)
	e.allow(r)
	second := e.clock() // the second unit was logged by then
	d := e.take(r)
	third := e.clock() // RetryAfter counts from the third request, decided by then
	e.blockedAfter("third request", d, wantBlock{"login", 0, true, blk, 0}, p-(third-start))
	retry := d.RetryAfter
	if retry <= blk {
		e.Fatalf("third request: got RetryAfter %s, want later than the block's end %s (the window is full until %s)", retry, blk, p)
	}

	e.past(blk)
	if d := e.peek(r); d.Allowed || d.Blocked {
		e.Errorf("at the block's end, the window still full: got %s, want refused, not Blocked", show(d))
	} else {
		e.near("at the block's end: RetryAfter (the window's wait)", d.RetryAfter, retry-(e.clock()-third))
	}
	if e.h.Exact {
		e.advance(retry - blk - time.Microsecond)
		if d := e.peek(r); d.Allowed || d.Blocked || d.RetryAfter != time.Microsecond {
			e.Errorf("a microsecond before RetryAfter: got %s, want refused, not Blocked, with RetryAfter 1µs", show(d))
		}
		e.advance(time.Microsecond)
	} else {
		e.advance(retry - (e.clock() - third) + slack)
	}
	if d := e.take(r); !d.Allowed || d.Blocked || d.BlockStarted {
		e.Errorf("retry at RetryAfter %s: got %s, want admitted, no block", retry, show(d))
	}
	if !e.h.Exact {
		// RetryAfter is when the first unit leaves the window; on real
		// time the second was logged later (by up to the time between
		// the two calls), and until it leaves too the window is full
		// again with the retry's unit. Wait for it: a block the retry
		// started would outlast that wait by far.
		e.advance(second + p + slack - e.clock())
	}
	if d := e.peek(r); !d.Allowed || d.Blocked {
		e.Errorf("after the admitted retry: got %s, want admitted, not Blocked (no new block)", show(d))
	}
}
