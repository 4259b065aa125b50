package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// overrides returns the harness's store as a [store.OverrideStore], or skips
// the subtest when the store keeps no overrides.
func (e *env) overrides() store.OverrideStore {
	e.Helper()
	o, ok := e.h.Store.(store.OverrideStore)
	if !ok {
		e.Skipf("%T does not implement store.OverrideStore", e.h.Store)
	}
	return o
}

// setOverride sets key's override and fails on an error.
func (e *env) setOverride(key string, o store.Override) {
	e.Helper()
	if err := e.overrides().SetOverride(e.ctx, key, o); err != nil {
		e.Fatalf("SetOverride(%q, %+v): got error %v, want nil", key, o, err)
	}
}

// overridden takes (or peeks, when peek is set) r, which reads the key's
// override, and checks what holds for a decision under override kind:
// the Override field; for a scale, the deciding limit's scaled capacity;
// for exempt, an admission with full capacity; for suspend, a refusal
// until the override ends, no later than within.
func (e *env) overridden(what string, r store.Request, peek bool, kind store.OverrideKind, scale float64, within time.Duration) store.Decision {
	e.Helper()
	r.ApplyOverride = true
	if kind == store.OverrideScale {
		// What the scaled limit records may outlast the configured one.
		sr := r
		sr.Limits = make([]store.Limit, len(r.Limits))
		for i, l := range r.Limits {
			sr.Limits[i] = contract.ScaleLimit(l, scale, contract.Cost(&r))
		}
		e.note(sr)
	}
	op, call := "Take", e.h.Store.Take
	if peek {
		op, call = "Peek", e.h.Store.Peek
	}
	d, err := call(e.ctx, r)
	if err != nil {
		e.Fatalf("%s: %s(%s): got error %v, want nil", what, op, describe(r), err)
	}
	fail := func(format string, args ...any) {
		e.Helper()
		e.Errorf("%s: %s(%s) = %s, Override %s: %s", what, op, describe(r), show(d), d.Override, fmt.Sprintf(format, args...))
	}
	if d.Override != kind {
		fail("got Override %s, want %s", d.Override, kind)
		return d
	}
	l := r.Limits[0]
	switch kind {
	case store.OverrideNone:
		if d.Capacity != l.Capacity() {
			fail("Limit: got %d, want the unscaled capacity %d", d.Capacity, l.Capacity())
		}
	case store.OverrideScale:
		want := contract.ScaleLimit(l, scale, contract.Cost(&r)).Capacity()
		if d.Capacity != want || d.Remaining > want {
			fail("Limit: got %d (remaining %d), want the scaled capacity %d", d.Capacity, d.Remaining, want)
		}
	case store.OverrideExempt:
		if !d.Allowed || d.Remaining != l.Capacity() || d.RetryAfter != 0 || d.Blocked {
			fail("want an admission with the full capacity %d remaining", l.Capacity())
		}
	case store.OverrideSuspend:
		if d.Allowed || d.Blocked || d.RetryAfter <= 0 || d.RetryAfter > within+time.Millisecond {
			fail("want a refusal until the override ends, within %s", within)
		}
	}
	return d
}

// testOverrideScale: a scale override raises one client's capacity (the
// decisions report the scaled Limit), a later cut lowers it with the units
// already used still counted, clearing it restores the limit, and another
// client keeps the configured limit throughout. A request that does not
// ask for overrides ignores it.
func testOverrideScale(e *env, alg store.Algorithm) {
	const rate = 4
	l := limit(alg, rate, time.Hour)
	e.windowRoom(alg, 10*time.Second, l.Period)
	vip, other := e.key(), e.key()
	e.setOverride(vip, store.Override{Kind: store.OverrideScale, Scale: 2.5, TTL: time.Hour})
	for i := 1; i <= 10; i++ {
		d := e.overridden(fmt.Sprintf("raised, request %d", i), req(vip, 1, l), false, store.OverrideScale, 2.5, 0)
		if !d.Allowed || d.Remaining != int64(10-i) {
			e.Errorf("raised, request %d: got %s, want admitted with %d remaining", i, show(d), 10-i)
		}
	}
	if d := e.overridden("raised, request 11", req(vip, 1, l), false, store.OverrideScale, 2.5, 0); d.Allowed {
		e.Errorf("raised, request 11: got %s, want refused: 10 units is the raised capacity", show(d))
	}
	// The other client, asking for overrides, has none.
	for i := 1; i <= rate; i++ {
		if d := e.overridden(fmt.Sprintf("other client, request %d", i), req(other, 1, l), false, store.OverrideNone, 0, 0); !d.Allowed {
			e.Errorf("other client, request %d: got %s, want admitted", i, show(d))
		}
	}
	if d := e.overridden("other client, request 5", req(other, 1, l), false, store.OverrideNone, 0, 0); d.Allowed {
		e.Errorf("other client, request %d: got %s, want refused at the configured limit", rate+1, show(d))
	}
	// Without Overrides the store does not read it: the configured limit.
	if d := e.peek(req(vip, 1, l)); d.Allowed || d.Capacity != rate || d.Override != store.OverrideNone {
		e.Errorf("not asking for overrides: got %s, Override %s, want refused under the configured limit %d", show(d), d.Override, rate)
	}
	// A cut: 10 used of 2 is still over.
	e.setOverride(vip, store.Override{Kind: store.OverrideScale, Scale: 0.5, TTL: time.Hour})
	if d := e.overridden("cut", req(vip, 1, l), false, store.OverrideScale, 0.5, 0); d.Allowed || d.Capacity != 2 {
		e.Errorf("cut: got %s, want refused with Limit 2", show(d))
	}
	if err := e.overrides().ClearOverride(e.ctx, vip); err != nil {
		e.Fatalf("ClearOverride: got error %v, want nil", err)
	}
	if err := e.overrides().ClearOverride(e.ctx, vip); !isErr(err, store.ErrNotFound) {
		e.Errorf("second ClearOverride: got error %v, want ErrNotFound", err)
	}
	if d := e.overridden("cleared", req(vip, 1, l), false, store.OverrideNone, 0, 0); d.Allowed || d.Capacity != rate {
		e.Errorf("cleared: got %s, want refused under the configured limit %d", show(d), rate)
	}
}

// testOverrideCut: a cut below the request's cost keeps the capacity at
// the cost, so the request can still be admitted once (never a capacity
// no request fits in), and a cut to a fraction admits floor(rate·scale).
func testOverrideCut(e *env, alg store.Algorithm) {
	l := limit(alg, 10, time.Hour)
	e.windowRoom(alg, 10*time.Second, l.Period)
	k := e.key()
	e.setOverride(k, store.Override{Kind: store.OverrideScale, Scale: 0.3, TTL: time.Hour})
	for i := 1; i <= 3; i++ {
		if d := e.overridden(fmt.Sprintf("cut to 3, request %d", i), req(k, 1, l), false, store.OverrideScale, 0.3, 0); !d.Allowed {
			e.Errorf("cut to 3, request %d: got %s, want admitted", i, show(d))
		}
	}
	if d := e.overridden("cut to 3, request 4", req(k, 1, l), false, store.OverrideScale, 0.3, 0); d.Allowed {
		e.Errorf("cut to 3, request 4: got %s, want refused", show(d))
	}
	k2 := e.key()
	e.setOverride(k2, store.Override{Kind: store.OverrideScale, Scale: 0.01, TTL: time.Hour})
	if d := e.overridden("cut below the cost", req(k2, 5, l), false, store.OverrideScale, 0.01, 0); !d.Allowed || d.Capacity != 5 {
		e.Errorf("cut below the cost: got %s, want admitted with Limit 5 (the cost)", show(d))
	}
	if d := e.overridden("cut below the cost, again", req(k2, 5, l), false, store.OverrideScale, 0.01, 0); d.Allowed {
		e.Errorf("cut below the cost, again: got %s, want refused", show(d))
	}
}

// testOverrideExemptSuspend: an exempt client is admitted beyond its limit
// and nothing is recorded; a suspended client is refused until the
// override ends and nothing is recorded either; both take precedence over
// a block; a peek reports them and writes nothing.
func testOverrideExemptSuspend(e *env, alg store.Algorithm) {
	const rate = 3
	l := limit(alg, rate, time.Hour)
	l.Block = time.Hour
	e.windowRoom(alg, 10*time.Second, l.Period)
	k := e.key()
	e.setOverride(k, store.Override{Kind: store.OverrideExempt, TTL: time.Hour})
	e.overridden("exempt peek", req(k, 1, l), true, store.OverrideExempt, 0, 0)
	for i := 1; i <= 3*rate; i++ {
		e.overridden(fmt.Sprintf("exempt, request %d", i), req(k, 1, l), false, store.OverrideExempt, 0, 0)
	}
	e.setOverride(k, store.Override{Kind: store.OverrideSuspend, TTL: time.Hour})
	e.overridden("suspended peek", req(k, 1, l), true, store.OverrideSuspend, 0, time.Hour)
	for i := 1; i <= 3; i++ {
		e.overridden(fmt.Sprintf("suspended, request %d", i), req(k, 1, l), false, store.OverrideSuspend, 0, time.Hour)
	}
	if err := e.overrides().ClearOverride(e.ctx, k); err != nil {
		e.Fatalf("ClearOverride: got error %v, want nil", err)
	}
	// Nothing was recorded: the full limit is there, then a block starts.
	for i := 1; i <= rate; i++ {
		if d := e.take(req(k, 1, l)); !d.Allowed || d.Remaining != int64(rate-i) {
			e.Errorf("after the overrides, request %d: got %s, want admitted with %d remaining", i, show(d), rate-i)
		}
	}
	if d := e.take(req(k, 1, l)); !d.Blocked {
		e.Errorf("after the overrides, request %d: got %s, want a block to start", rate+1, show(d))
	}
	// An override beats the block.
	e.setOverride(k, store.Override{Kind: store.OverrideExempt, TTL: time.Hour})
	e.overridden("exempt while blocked", req(k, 1, l), false, store.OverrideExempt, 0, 0)
	if d := e.take(req(k, 1, l)); !d.Blocked {
		e.Errorf("not asking for overrides while blocked: got %s, want blocked", show(d))
	}
}

// testOverrideExpiry: an override ends with its TTL: GetOverride reports
// the time left and then ErrNotFound, and requests are decided under the
// configured limit again. The override's storage key carries a TTL no
// longer than the override's.
func testOverrideExpiry(e *env, alg store.Algorithm) {
	const ttl = 300 * time.Millisecond
	l := limit(alg, 2, time.Hour)
	e.windowRoom(alg, 10*time.Second, l.Period)
	k := e.key()
	e.setOverride(k, store.Override{Kind: store.OverrideScale, Scale: 3, TTL: ttl})
	got, err := e.overrides().GetOverride(e.ctx, k)
	if err != nil || got.Kind != store.OverrideScale || got.Scale != 3 || got.TTL <= 0 || got.TTL > ttl {
		e.Errorf("GetOverride: got %+v, %v, want scale 3 with at most %s left", got, err, ttl)
	}
	if e.h.KeyTTLs != nil {
		overrides := e.storedKeys().Override
		if len(overrides) != 1 {
			e.Errorf("override keys: got %v, want one", overrides)
		}
		for key, left := range overrides {
			if left <= 0 || left > ttl {
				e.Errorf("override key %q: got TTL %s, want in (0, %s]", key, left, ttl)
			}
		}
	}
	for i := 1; i <= 6; i++ {
		if d := e.overridden(fmt.Sprintf("raised, request %d", i), req(k, 1, l), false, store.OverrideScale, 3, 0); !d.Allowed {
			e.Errorf("raised, request %d: got %s, want admitted", i, show(d))
		}
	}
	e.advance(ttl + slack)
	if e.h.RealTimeOverrides {
		time.Sleep(ttl + slack)
	}
	if _, err := e.overrides().GetOverride(e.ctx, k); !isErr(err, store.ErrNotFound) {
		e.Errorf("GetOverride after the TTL: got error %v, want ErrNotFound", err)
	}
	if d := e.overridden("expired", req(k, 1, l), false, store.OverrideNone, 0, 0); d.Allowed || d.Capacity != 2 {
		e.Errorf("expired: got %s, want refused under the configured limit 2", show(d))
	}
}

// testOverrideConcurrent: under a raise, concurrent takes admit exactly the
// raised capacity.
func testOverrideConcurrent(e *env, alg store.Algorithm) {
	l := limit(alg, 5, time.Hour)
	e.windowRoom(alg, 10*time.Second, l.Period)
	k := e.key()
	e.setOverride(k, store.Override{Kind: store.OverrideScale, Scale: 4, TTL: time.Hour})
	r := req(k, 1, l)
	r.ApplyOverride = true
	admitted := e.concurrentTakes(r, 60)
	if admitted != 20 {
		e.Errorf("60 concurrent takes under a 4× raise of 5: got %d admitted, want 20", admitted)
	}
}

// testOverrideInvalid: invalid overrides and empty keys are refused with
// ErrInvalidRequest; reading or clearing a missing override is
// ErrNotFound.
func testOverrideInvalid(e *env) {
	ov := e.overrides()
	k := e.key()
	for _, o := range []store.Override{
		{},
		{Kind: store.OverrideScale, TTL: time.Hour},
		{Kind: store.OverrideScale, Scale: -1, TTL: time.Hour},
		{Kind: store.OverrideScale, Scale: 1 << 21, TTL: time.Hour},
		{Kind: store.OverrideExempt, Scale: 2, TTL: time.Hour},
		{Kind: store.OverrideSuspend},
		{Kind: store.OverrideSuspend, TTL: time.Microsecond},
		{Kind: store.OverrideSuspend, TTL: 400 * 24 * time.Hour},
		{Kind: 9, TTL: time.Hour},
	} {
		if err := ov.SetOverride(e.ctx, k, o); !isErr(err, store.ErrInvalidRequest) {
			e.Errorf("SetOverride(%+v): got error %v, want ErrInvalidRequest", o, err)
		}
	}
	if err := ov.SetOverride(e.ctx, "", store.Override{Kind: store.OverrideExempt, TTL: time.Hour}); !isErr(err, store.ErrInvalidRequest) {
		e.Errorf("SetOverride with an empty key: got error %v, want ErrInvalidRequest", err)
	}
	if _, err := ov.GetOverride(e.ctx, k); !isErr(err, store.ErrNotFound) {
		e.Errorf("GetOverride of a key without override: got error %v, want ErrNotFound", err)
	}
	if err := ov.ClearOverride(e.ctx, k); !isErr(err, store.ErrNotFound) {
		e.Errorf("ClearOverride of a key without override: got error %v, want ErrNotFound", err)
	}
}

// concurrentTakes sends n takes of r at once and returns how many were
// admitted; each must be decided under a scale override.
func (e *env) concurrentTakes(r store.Request, n int) int64 {
	e.Helper()
	var admitted atomic.Int64
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
			if d.Override != store.OverrideScale {
				e.Errorf("Take(%s): got Override %s, want scale", describe(r), d.Override)
			}
			if d.Allowed {
				admitted.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	return admitted.Load()
}

// testOverrideCost: a request that reads overrides may carry a cost above
// the configured capacity: without an override it is refused with
// ErrCostExceedsCapacity (by the store, not by Validate), under a scale
// the scaled limit holds it, an exempt client is admitted and a
// suspended one refused as suspended.
func testOverrideCost(e *env, alg store.Algorithm) {
	l := limit(alg, 3, time.Hour)
	e.windowRoom(alg, 10*time.Second, l.Period)
	r := req(e.key(), 5, l)
	r.ApplyOverride = true
	if err := r.Validate(); err != nil {
		e.Fatalf("Validate of a request with Overrides and a cost above capacity: got %v, want nil (the store checks it)", err)
	}
	if _, err := e.h.Store.Take(e.ctx, r); !isErr(err, store.ErrCostExceedsCapacity) {
		e.Errorf("cost 5 of 3 without an override: got error %v, want ErrCostExceedsCapacity", err)
	}
	if _, err := e.h.Store.Peek(e.ctx, r); !isErr(err, store.ErrCostExceedsCapacity) {
		e.Errorf("peek, cost 5 of 3 without an override: got error %v, want ErrCostExceedsCapacity", err)
	}
	e.setOverride(r.Key, store.Override{Kind: store.OverrideScale, Scale: 2, TTL: time.Hour})
	if d := e.overridden("cost 5 under a 2× raise", r, false, store.OverrideScale, 2, 0); !d.Allowed || d.Capacity != 6 || d.Remaining != 1 {
		e.Errorf("cost 5 under a 2× raise: got %s, want admitted with 1 of 6 left", show(d))
	}
	// A cost the scaled limit does not hold is refused as such: a raise
	// that is not enough, or a cut.
	big := r
	big.Cost = 7
	if _, err := e.h.Store.Take(e.ctx, big); !isErr(err, store.ErrCostExceedsCapacity) {
		e.Errorf("cost 7 under a 2× raise of 3: got error %v, want ErrCostExceedsCapacity", err)
	}
	e.setOverride(r.Key, store.Override{Kind: store.OverrideScale, Scale: 0.5, TTL: time.Hour})
	if _, err := e.h.Store.Take(e.ctx, r); !isErr(err, store.ErrCostExceedsCapacity) {
		e.Errorf("cost 5 under a cut of 3: got error %v, want ErrCostExceedsCapacity", err)
	}
	// A cost the configured limit holds stays possible under a cut.
	k3 := e.key()
	e.setOverride(k3, store.Override{Kind: store.OverrideScale, Scale: 0.1, TTL: time.Hour})
	r3 := req(k3, 3, l)
	if d := e.overridden("cost 3 of 3 under a 0.1× cut", r3, false, store.OverrideScale, 0.1, 0); !d.Allowed || d.Capacity != 3 {
		e.Errorf("cost 3 of 3 under a 0.1× cut: got %s, want admitted with Limit 3 (the cost)", show(d))
	}
	if _, err := e.h.Store.Take(e.ctx, store.Request{Key: k3, Limits: []store.Limit{l}, Cost: 1 << 31, ApplyOverride: true}); !isErr(err, store.ErrCostExceedsCapacity) {
		e.Errorf("cost 2³¹: got error %v, want ErrCostExceedsCapacity (no limit holds it)", err)
	}
	e.setOverride(r.Key, store.Override{Kind: store.OverrideExempt, TTL: time.Hour})
	e.overridden("cost 5, exempt", r, false, store.OverrideExempt, 0, 0)
	e.setOverride(r.Key, store.Override{Kind: store.OverrideSuspend, TTL: time.Hour})
	e.overridden("cost 5, suspended", r, false, store.OverrideSuspend, 0, time.Hour)
}
