package storetest

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// partial returns a partial request for up to cost units.
func partial(key string, cost int64, limits ...store.Limit) store.Request {
	r := req(key, cost, limits...)
	r.Partial = true
	return r
}

// checkGranted asserts Granted: 0 for a request that is not Partial, 1 to
// its cost for an admitted partial request, 0 for a refused one.
func (e *env) checkGranted(r store.Request, d store.Decision, fail func(string, ...any)) {
	e.Helper()
	switch c := contract.Cost(&r); {
	case !r.Partial && d.Granted != 0:
		fail("Granted: got %d, want 0 for a request that is not Partial", d.Granted)
	case r.Partial && d.Allowed && (d.Granted < 1 || d.Granted > c):
		fail("Granted: got %d, want 1..%d for an admitted partial request", d.Granted, c)
	case r.Partial && !d.Allowed && d.Granted != 0:
		fail("Granted: got %d, want 0 for a refused partial request", d.Granted)
	}
}

// twin takes the partial request r on its key and a plain request of its
// grant's cost (1 when it was refused) on twin, a key with the same
// history, and asserts that the two are decided alike: the partial
// request is decided as a request of cost Granted. When it was granted
// less than it asked, the deciding limit has nothing left: no larger
// grant fitted. It returns the partial decision.
func (e *env) twin(what string, r store.Request, twin string) store.Decision {
	e.Helper()
	d := e.take(r)
	p := r
	p.Key, p.Partial, p.Cost = twin, false, max(d.Granted, 1)
	w := e.take(p)
	switch {
	case d.Allowed != w.Allowed || d.Remaining != w.Remaining || d.LimitID != w.LimitID || d.Index != w.Index || d.Blocked != w.Blocked:
		e.Errorf("%s: partial %s, plain request of cost %d %s: want the same decision", what, show(d), p.Cost, show(w))
	case e.h.Exact && (d.ResetAfter != w.ResetAfter || d.RetryAfter != w.RetryAfter):
		e.Errorf("%s: partial %s, plain request of cost %d %s: want the same durations", what, show(d), p.Cost, show(w))
	case d.Allowed && d.Granted < contract.Cost(&r) && d.Remaining != 0:
		e.Errorf("%s: got %s granted %d of %d, want Remaining 0 (a larger grant would fit)", what, show(d), d.Granted, contract.Cost(&r))
	}
	for i := range d.PerLimit {
		if d.PerLimit[i].Remaining != w.PerLimit[i].Remaining || e.h.Exact && d.PerLimit[i] != w.PerLimit[i] {
			e.Errorf("%s: PerLimit[%d]: partial %v, plain %v, want the same", what, i, d.PerLimit[i], w.PerLimit[i])
		}
	}
	return d
}

// granted asserts a decision's grant.
func (e *env) granted(what string, d store.Decision, want int64) {
	e.Helper()
	if d.Granted != want {
		e.Errorf("%s: got %s granted %d, want %d", what, show(d), d.Granted, want)
	}
}

// testPartial: a partial request takes as many of its units as fit. Of
// 5/h, requests for 3, 4 and 4 units are granted 3, 2 and none; a Peek
// reports the grant a Take would make and writes nothing; a refusal's
// RetryAfter is the time until one unit fits (exact: a fifth of the
// period for a bucket, the period for the log and the fixed window, and
// the period and a fifth for the sliding counter, whose previous window
// then weighs 4); a request for more than the capacity is granted the
// capacity. Each is decided exactly as a plain request of its grant's cost
// on a key with the same history. With an exact clock, once time frees
// units a grant takes what was freed.
func testPartial(e *env, alg store.Algorithm) {
	const p = time.Hour
	e.windowRoom(alg, 10*time.Second, p)
	l := limit(alg, 5, p)
	k, t := e.key(), e.key()
	e.granted("fresh key, 3 of 5/h", e.twin("fresh key, 3 of 5/h", partial(k, 3, l), t), 3)
	d := e.peek(partial(k, 4, l))
	e.check("3 used, peek 4", d, expect{allowed: true, remaining: 0, resetAfter: -1})
	e.granted("3 used, peek 4", d, 2)
	e.granted("3 used, 4", e.twin("3 used, 4", partial(k, 4, l), t), 2)
	d = e.twin("5 used, 4", partial(k, 4, l), t)
	e.check("5 used, 4", d, expect{remaining: 0, resetAfter: -1, retryAfter: byAlg(alg, p/5, p, p+p/5, p)})
	e.granted("5 used, 4", d, 0)
	e.granted("5 used, peek 1", e.peek(partial(k, 1, l)), 0)

	k, t = e.key(), e.key()
	d = e.twin("fresh key, 100 of 5/h", partial(k, 100, l), t)
	e.check("fresh key, 100 of 5/h", d, expect{allowed: true, remaining: 0, resetAfter: -1})
	e.granted("fresh key, 100 of 5/h", d, 5)

	if e.h.Exact {
		e.advance(byAlg(alg, 2*p/5, p, p+2*p/5, p))
		d = e.twin("5 used, after time freed units", partial(k, 100, l), t)
		e.granted("5 used, after time freed units", d, byAlg[int64](alg, 2, 5, 2, 5))
	}
}

// testPartialMulti: with several limits a grant is what every limit
// admits: 4 units against 5/h and 3/h are granted 3, decided by the
// smaller limit, and the next request gets none.
func testPartialMulti(e *env, alg store.Algorithm) {
	const p = time.Hour
	e.windowRoom(alg, 10*time.Second, p)
	limits := []store.Limit{named("a", alg, 5, p), named("b", alg, 3, p)}
	k, t := e.key(), e.key()
	d := e.twin("fresh key, 4 of 5/h and 3/h", partial(k, 4, limits...), t)
	e.check("fresh key, 4 of 5/h and 3/h", d, expect{allowed: true, remaining: 0, resetAfter: -1, limitID: "b"})
	e.granted("fresh key, 4 of 5/h and 3/h", d, 3)
	if len(d.PerLimit) == 2 && d.PerLimit[0].Remaining != 2 {
		e.Errorf("fresh key, 4 of 5/h and 3/h: PerLimit[0]: got %d remaining, want 2", d.PerLimit[0].Remaining)
	}
	d = e.twin("3 used, 4 of 5/h and 3/h", partial(k, 4, limits...), t)
	e.check("3 used, 4 of 5/h and 3/h", d, expect{remaining: 0, resetAfter: -1, retryAfter: -1, limitID: "b"})
	e.granted("3 used, 4 of 5/h and 3/h", d, 0)
}

// testPartialBlock: a partial request that gets nothing is refused as a
// request of one unit, so a limit with a Block blocks the key, and while
// the block lasts partial requests are refused with it.
func testPartialBlock(e *env, alg store.Algorithm) {
	const p = time.Hour
	e.windowRoom(alg, 10*time.Second, p)
	l := limit(alg, 2, p)
	l.Block = pick(e, 10*time.Minute, time.Second)
	k := e.key()
	e.granted("fresh key, 5 of 2/h", e.allow(partial(k, 5, l)), 2)
	d := e.take(partial(k, 5, l))
	if !d.Blocked || !d.BlockStarted {
		e.Errorf("2 used, 5 of 2/h: got %s, want the refusal to start a block", show(d))
	}
	e.granted("2 used, 5 of 2/h", d, 0)
	d = e.peek(partial(k, 1, l))
	if !d.Blocked || d.BlockStarted {
		e.Errorf("blocked, peek: got %s, want Blocked without BlockStarted", show(d))
	}
	e.granted("blocked, peek", d, 0)
}

// testPartialConcurrent: concurrent partial requests never grant more
// than the limit holds in total, and grant all of it: 24 requests for 3
// units against 10/h are granted 10 units between them.
func testPartialConcurrent(e *env, alg store.Algorithm) {
	e.windowRoom(alg, 10*time.Second, time.Hour)
	r := partial(e.key(), 3, limit(alg, 10, time.Hour))
	var total atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := 0; g < 24; g++ {
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
			total.Add(d.Granted)
		}()
	}
	close(start)
	wg.Wait()
	if got := total.Load(); got != 10 {
		e.Errorf("24 concurrent partial takes of 3 against 10/h: got %d units granted, want 10", got)
	}
}

// testPartialInvalid: a Partial request with CountDenied, a DedupID or
// ApplyOverride is refused with
// ErrInvalidRequest, and so is a stack with a Partial part.
func testPartialInvalid(e *env) {
	w := limit(store.FixedWindow, 5, time.Hour)
	for _, tc := range []struct {
		name string
		edit func(*store.Request)
	}{
		{"CountDenied", func(r *store.Request) { r.CountDenied = true }},
		{"DedupID", func(r *store.Request) { r.DedupID = "id" }},
		{"ApplyOverride", func(r *store.Request) { r.ApplyOverride = true }},
	} {
		r := partial(e.key(), 2, w)
		tc.edit(&r)
		if _, err := e.h.Store.Take(e.ctx, r); !isErr(err, store.ErrInvalidRequest) {
			e.Errorf("Partial with %s: Take: got error %v, want ErrInvalidRequest", tc.name, err)
		}
		if _, err := e.h.Store.Peek(e.ctx, r); !isErr(err, store.ErrInvalidRequest) {
			e.Errorf("Partial with %s: Peek: got error %v, want ErrInvalidRequest", tc.name, err)
		}
	}
	if ms, ok := e.h.Store.(store.MultiStore); ok {
		parts := []store.Request{req(e.key(), 1, w), partial(e.key(), 2, w)}
		if _, err := ms.TakeMulti(e.ctx, parts); !isErr(err, store.ErrInvalidRequest) {
			e.Errorf("stack with a Partial part: got error %v, want ErrInvalidRequest", err)
		}
	}
	// The request itself is fine: the check above is not vacuous.
	if d := e.take(partial(e.key(), 7, w)); d.Granted != 5 {
		e.Errorf("valid Partial request: got %s granted %d, want 5", show(d), d.Granted)
	}
}
