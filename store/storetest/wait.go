package storetest

import (
	"slices"
	"sync"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// waiting returns r allowed to wait up to w.
func waiting(r store.Request, w time.Duration) store.Request {
	r.MaxWait = w
	return r
}

// waiter returns the store as a [store.Waiter], or skips.
func (e *env) waiter() store.Waiter {
	e.Helper()
	w, ok := e.h.Store.(store.Waiter)
	if !ok {
		e.Skip("waits instead of refusing: needs a store that implements store.Waiter")
	}
	return w
}

// cancelWait gives back the place d reserved and fails on an error.
func (e *env) cancelWait(r store.Request, d store.Decision) {
	e.Helper()
	if err := e.waiter().CancelWait(e.ctx, r, d); err != nil {
		e.Fatalf("CancelWait(%s): got error %v, want nil", describe(r), err)
	}
}

// checkWait asserts Delay and Reservation: a Delay only for an admitted
// request with MaxWait, in whole microseconds up to MaxWait; a
// Reservation exactly for a Take admitted with a Delay.
func (e *env) checkWait(op string, r store.Request, d store.Decision, fail func(string, ...any)) {
	e.Helper()
	switch {
	case d.Delay != 0 && (r.MaxWait <= 0 || !d.Allowed):
		fail("Delay: got %s, want 0 unless a request with MaxWait is admitted", d.Delay)
	case d.Delay < 0 || d.Delay > r.MaxWait.Truncate(time.Microsecond) || d.Delay%time.Microsecond != 0:
		fail("Delay: got %s, want whole microseconds in 0..%s (MaxWait)", d.Delay, r.MaxWait)
	case d.Reservation != "" && (op != "Take" || d.Delay == 0):
		fail("Reservation: got %d bytes, want one only from a Take admitted with a Delay", len(d.Reservation))
	case d.Reservation == "" && op == "Take" && d.Delay > 0:
		fail("Reservation: got none, want one for a Take admitted with a Delay")
	}
}

// testWait (GCRA and the token bucket): of 4 per period (a unit every
// quarter), on a full key requests allowed to wait half a period are
// admitted with Delays of a quarter and a half, Remaining 0 when they
// proceed and ResetAfter counted from now; the third, which would wait
// three quarters, is refused as without MaxWait (RetryAfter three
// quarters) and records nothing; a Peek allowed to wait longer reports the
// Delay a Take would get and writes nothing. With an exact clock the
// waiters hold their places: a plain request is refused until three
// quarters have passed, then admitted. A request that fits at once is
// decided exactly as without MaxWait.
func testWait(e *env, alg store.Algorithm) {
	e.waiter()
	p := pick(e, time.Hour, 800*time.Millisecond)
	q := p / 4
	l := limit(alg, 4, p)
	// Waiting takes a bucket past its capacity: the suite's bounds on
	// durations allow for it.
	e.note(req(e.key(), 1, store.Limit{Algorithm: alg, Rate: 4, Period: p, Burst: 8}))

	k, twin := e.key(), e.key()
	start := time.Now()
	d, w := e.take(waiting(req(k, 3, l), q)), e.take(req(twin, 3, l))
	e.sameDecision("fits at once", d, w)
	e.allow(req(k, 1, l))
	e.deny(req(k, 1, l))

	w1 := e.allow(waiting(req(k, 1, l), 2*q))
	e.nearSince("first waiter: Delay", w1.Delay, q, start)
	e.check("first waiter", w1, expect{allowed: true, remaining: 0, resetAfter: 5 * q, retryAfter: 0})
	w2 := e.allow(waiting(req(k, 1, l), 2*q))
	e.nearSince("second waiter: Delay", w2.Delay, 2*q, start)
	e.check("second waiter", w2, expect{allowed: true, remaining: 0, resetAfter: 6 * q, retryAfter: 0})
	e.check("third waiter, beyond MaxWait", e.deny(waiting(req(k, 1, l), 2*q)), expect{remaining: 0, resetAfter: 6 * q, retryAfter: 3 * q})
	pk := e.peek(waiting(req(k, 1, l), p))
	e.nearSince("peek allowed to wait: Delay", pk.Delay, 3*q, start)
	e.check("peek allowed to wait", pk, expect{allowed: true, remaining: 0, resetAfter: 7 * q, retryAfter: 0})
	e.check("plain request after the peek", e.deny(req(k, 1, l)), expect{remaining: 0, resetAfter: 6 * q, retryAfter: 3 * q})
	if !e.h.Exact {
		return
	}
	e.advance(q)
	e.check("when the first waiter proceeds", e.deny(req(k, 1, l)), expect{remaining: 0, resetAfter: 5 * q, retryAfter: 2 * q})
	e.advance(2*q - time.Microsecond)
	e.deny(req(k, 1, l))
	e.advance(time.Microsecond)
	e.check("after both waiters", e.allow(req(k, 1, l)), expect{allowed: true, remaining: 0, resetAfter: p})
}

// testWaitCancel (GCRA and the token bucket): of 4 per period, on a full
// key, B and C wait a quarter and a half. B gives its place back, but C
// waits behind it: the place stays taken, and D waits three quarters. D
// gives its place back as the last in line: E takes it (three quarters).
// Once E and then C give theirs back, B's is the last taken: F waits
// half a period, C's old place.
func testWaitCancel(e *env, alg store.Algorithm) {
	e.waiter()
	p := pick(e, time.Hour, 800*time.Millisecond)
	q := p / 4
	l := limit(alg, 4, p)
	e.note(req(e.key(), 1, store.Limit{Algorithm: alg, Rate: 4, Period: p, Burst: 8}))
	k := e.key()
	start := time.Now()
	e.allow(req(k, 4, l))
	r := waiting(req(k, 1, l), p)
	b := e.allow(r)
	c := e.allow(r)
	e.nearSince("C: Delay", c.Delay, 2*q, start)
	e.cancelWait(r, b)
	d := e.allow(r)
	e.nearSince("D, after B gave back with C behind: Delay", d.Delay, 3*q, start)
	e.cancelWait(r, d)
	ed := e.allow(r)
	e.nearSince("E, after D gave back: Delay", ed.Delay, 3*q, start)
	e.cancelWait(r, ed)
	e.cancelWait(r, c)
	f := e.allow(r)
	e.nearSince("F, after E and C gave back: Delay", f.Delay, 2*q, start)
}

// testWaitConcurrent (GCRA and the token bucket): 16 concurrent requests
// allowed to wait two periods, against 4 per period on a fresh key: 12
// are admitted (4 at once, 8 waiting), and no two proceed closer than a
// quarter period apart beyond the burst (exact: Delays 0, 0, 0, 0, then
// one to eight quarters).
func testWaitConcurrent(e *env, alg store.Algorithm) {
	e.waiter()
	p := pick(e, time.Hour, 800*time.Millisecond)
	q := p / 4
	l := limit(alg, 4, p)
	e.note(req(e.key(), 1, store.Limit{Algorithm: alg, Rate: 4, Period: p, Burst: 12}))
	k := e.key()
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		start = time.Now()
		at    []time.Duration // when each admitted request proceeds
	)
	for range 16 {
		wg.Go(func() {
			r := waiting(req(k, 1, l), 2*p)
			d, err := e.h.Store.Take(e.ctx, r)
			if err != nil {
				e.Errorf("Take(%s): got error %v, want nil", describe(r), err)
				return
			}
			e.checkDecision("Take", r, d)
			if d.Allowed {
				mu.Lock()
				at = append(at, pick(e, 0, time.Since(start))+d.Delay)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(at)
	if len(at) < 12 || len(at) > pick(e, 12, 13) {
		e.Fatalf("16 requests allowed to wait 2 periods, of 4 per period: got %d admitted, want 12", len(at))
	}
	for i := 4; i < len(at); i++ {
		if want := time.Duration(i-3) * q; e.h.Exact && at[i] != want {
			e.Errorf("admitted request %d proceeds after %s, want %s (Delays %v)", i, at[i], want, at)
		}
		if gap := at[i] - at[i-1]; gap < q-pick(e, 0, slack) {
			e.Errorf("admitted requests %d and %d proceed %s apart, want >= %s (times %v)", i-1, i, gap, q, at)
		}
	}
}

// testWaitBlock (GCRA and the token bucket): a limit with a Block does
// not block a request that waits instead of being refused; one that
// would wait longer than MaxWait is refused and starts the block.
func testWaitBlock(e *env, alg store.Algorithm) {
	e.waiter()
	p := pick(e, time.Hour, 800*time.Millisecond)
	l := limit(alg, 4, p)
	l.Block = 10 * p
	e.note(req(e.key(), 1, store.Limit{Algorithm: alg, Rate: 4, Period: p, Burst: 8}))
	k := e.key()
	e.allow(req(k, 4, l))
	if d := e.allow(waiting(req(k, 1, l), p/2)); d.Blocked || d.Delay <= 0 {
		e.Errorf("a waiter within MaxWait: got %s (Delay %s), want admitted with a Delay", show(d), d.Delay)
	}
	if d := e.deny(waiting(req(k, 1, l), p/4)); !d.BlockStarted {
		e.Errorf("a waiter beyond MaxWait: got %s, want refused, starting the block", show(d))
	}
	if d := e.deny(waiting(req(k, 1, l), 20*p)); !d.Blocked {
		e.Errorf("while blocked: got %s, want Blocked", show(d))
	}
}

// testWaitInvalid: MaxWait below 0, with a window algorithm, Partial, a
// DedupID or ApplyOverride, or holding more than 2³⁰ units of a limit, is
// ErrInvalidRequest; so is CancelWait of a request without MaxWait or of
// a decision that holds no reservation.
func testWaitInvalid(e *env) {
	wt := e.waiter()
	g := limit(store.GCRA, 10, time.Hour)
	k := e.key()
	withID := waiting(req(k, 1, g), time.Second)
	withID.DedupID = "id"
	withOverride := waiting(req(k, 1, g), time.Second)
	withOverride.ApplyOverride = true
	for _, tc := range []struct {
		name string
		r    store.Request
	}{
		{"negative", waiting(req(k, 1, g), -time.Second)},
		{"fixed window", waiting(req(k, 1, limit(store.FixedWindow, 10, time.Hour)), time.Second)},
		{"sliding window log", waiting(req(k, 1, limit(store.SlidingWindowLog, 10, time.Hour)), time.Second)},
		{"Partial", waiting(partial(k, 1, g), time.Second)},
		{"DedupID", withID},
		{"ApplyOverride", withOverride},
		{"more than 2³⁰ units", waiting(req(k, 1, limit(store.GCRA, 1<<30, time.Millisecond)), 2*time.Millisecond)},
	} {
		if _, err := e.h.Store.Take(e.ctx, tc.r); !isErr(err, store.ErrInvalidRequest) {
			e.Errorf("%s: Take: got error %v, want ErrInvalidRequest", tc.name, err)
		}
	}
	e.note(req(k, 1, store.Limit{Rate: 10, Period: time.Hour, Burst: 20}))
	r := waiting(req(k, 10, g), time.Hour)
	e.allow(r)
	d := e.allow(waiting(req(k, 1, g), time.Hour))
	plain := req(k, 1, g)
	if err := wt.CancelWait(e.ctx, plain, d); !isErr(err, store.ErrInvalidRequest) {
		e.Errorf("CancelWait of a request without MaxWait: got error %v, want ErrInvalidRequest", err)
	}
	if err := wt.CancelWait(e.ctx, r, store.Decision{Allowed: true, Delay: time.Second}); !isErr(err, store.ErrInvalidRequest) {
		e.Errorf("CancelWait of a decision without a reservation: got error %v, want ErrInvalidRequest", err)
	}
	e.check("after the refused calls", e.peek(req(k, 1, g)), expect{remaining: 0, resetAfter: -1, retryAfter: -1})
}
