package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// Harness is one store under test and the means to drive its clock.
type Harness struct {
	// Store is the store under test. Required.
	Store store.Store
	// Advance moves the store's clock forward by d: a manual clock's
	// Advance for stores with an injected clock, time.Sleep for stores on
	// real time (Redis). Required.
	Advance func(d time.Duration)
	// Exact reports that Advance is exact and that nothing else moves the
	// store's clock. The suite then asserts exact durations and
	// microsecond boundaries; with real time it asserts only what holds
	// under scheduling jitter.
	Exact bool
	// KeyTTLs, when set, returns every storage key this harness's store
	// holds, by kind as the store knows it, with its remaining time to
	// live (see [StoredKeys]). It must see only this harness's keys (for
	// Redis: those under a key prefix of its own), because subtests run in
	// parallel. Optional: the TTL and "peek creates nothing" assertions
	// need it.
	KeyTTLs func(ctx context.Context) (StoredKeys, error)
	// RealTimeOverrides reports that overrides ([store.OverrideStore]) expire
	// on real time although Advance drives a fake clock: a store whose
	// scripts run on a fake clock while its overrides are plain keys. The
	// override expiry test then also waits in real time.
	RealTimeOverrides bool
	// RealTimeListing reports that the blocks a [store.BlockLister] lists
	// end on real time although Advance drives a fake clock: a store whose
	// scripts run on a fake clock while its listing reads the keys' own
	// TTLs. The block listing test then checks no remaining time.
	RealTimeListing bool
	// RealTimeStacks reports that stacked decisions ([store.MultiStore])
	// run on real time although Advance drives a fake clock: a store whose
	// fake clock wraps its single-request scripts only. The subtests of
	// stacked decisions then skip.
	RealTimeStacks bool
	// Rand, when set, is the source of the random values the store under
	// test draws for the suppressed strategy (its Float64 method
	// given as the store's Rand option), so that the suite chooses each
	// draw. Optional: the suppressed subtests need it.
	Rand *FakeRand
}

// StoredKeys is what a store holds for one harness, by kind: each map
// goes from a key's name (any name that tells the store's keys apart; the
// suite only prints it) to its remaining time to live. Keys that have
// expired are omitted; a key without a TTL is reported with a negative
// duration (Redis PTTL -1). With real time a key in its last millisecond
// may show 0. A nil map holds no key.
type StoredKeys struct {
	// State holds limit state, and any key of the store that is none of
	// the kinds below.
	State map[string]time.Duration
	// Block holds blocks: a block lives as long as the block.
	Block map[string]time.Duration
	// Strikes holds strike counters, which escalate repeated blocks.
	Strikes map[string]time.Duration
	// Dedup holds remembered de-duplication ids.
	Dedup map[string]time.Duration
	// Override holds overrides ([store.OverrideStore]).
	Override map[string]time.Duration
}

// Timing constants for real-time harnesses.
const (
	// slack is added to every wait that must end after a store-side
	// deadline, and to TTL bounds (the Redis store keeps TTLs in whole
	// milliseconds, rounded up).
	slack = 50 * time.Millisecond
	// ttlSlack bounds how far a TTL may exceed the state's lifetime.
	ttlSlack = 5 * time.Millisecond
)

// env is one subtest's view of its harness.
type env struct {
	*testing.T
	h      Harness
	ctx    context.Context
	prefix string
	seq    atomic.Int64
	born   time.Time    // wall clock at the subtest's start
	moved  atomic.Int64 // total of advance, ns
	// callAt is the clock when the last take or peek was sent: with real
	// time, the decision it returned was made between then and now.
	callAt atomic.Int64
	// longestBlock is the longest block (Block, or BlockMax when larger)
	// of any request the subtest has sent: no block lasts longer, and no
	// decision may report a block before one could exist.
	longestBlock atomic.Int64

	mu sync.Mutex
	// capacity is the largest capacity the subtest has sent under each
	// algorithm and limit ID: after a limit is cut, what was used under
	// the larger one may take longer to drain than the new limit's
	// lifetime.
	capacity map[string]int64

	// suppressing is set while h.Store is the store of package
	// store/suppressed over the harness's store, and softs holds the soft
	// limit of each of its limits, by name (see suppress).
	suppressing bool
	softs       sync.Map
	base        store.Store // the harness's own store, while suppressing
}

// note records what a request may cause, before it is sent.
func (e *env) note(r store.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.capacity == nil {
		e.capacity = map[string]int64{}
	}
	for _, l := range r.Limits {
		id := l.Algorithm.String() + "/" + l.ID()
		e.capacity[id] = max(e.capacity[id], l.Capacity())
		b := int64(max(l.Block, l.BlockMax))
		for {
			cur := e.longestBlock.Load()
			if b <= cur || e.longestBlock.CompareAndSwap(cur, b) {
				break
			}
		}
	}
}

// lifetime returns the longest time the state of limits can matter in
// this subtest: their lifetime (see the function lifetime), with GCRA and
// the token bucket draining the largest capacity sent under their ID.
func (e *env) lifetime(limits []store.Limit) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	ls := make([]store.Limit, len(limits))
	for i, l := range limits {
		ls[i] = l
		if c := e.capacity[l.Algorithm.String()+"/"+l.ID()]; bucketLike(l.Algorithm) && c > l.Capacity() {
			ls[i].Burst = c
		}
	}
	return lifetime(store.Request{Limits: ls})
}

func newEnv(t *testing.T, newHarness func(t *testing.T) Harness) *env {
	t.Helper()
	t.Parallel()
	h := newHarness(t)
	if h.Store == nil || h.Advance == nil {
		t.Fatal("storetest: Harness.Store and Harness.Advance are required")
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("storetest: random key prefix: %v", err)
	}
	return &env{T: t, h: h, ctx: context.Background(), prefix: "st-" + hex.EncodeToString(b[:]) + "-", born: time.Now()}
}

// key returns a key no other subtest uses.
func (e *env) key() string {
	return fmt.Sprintf("%sk%d", e.prefix, e.seq.Add(1))
}

// needExact skips subtests that assert microsecond boundaries.
func (e *env) needExact() {
	e.Helper()
	if !e.h.Exact {
		e.Skip("asserts microsecond boundaries: needs a harness with an exact clock (Exact)")
	}
}

// needKeyTTLs skips subtests that inspect storage keys.
func (e *env) needKeyTTLs() {
	e.Helper()
	if e.h.KeyTTLs == nil {
		e.Skip("inspects storage keys: needs a harness with KeyTTLs")
	}
}

// advance moves the store's clock by d (nothing for d <= 0).
func (e *env) advance(d time.Duration) {
	if d > 0 {
		e.h.Advance(d)
		e.moved.Add(int64(d))
	}
}

// clock returns the time since the subtest started: the total of advance
// with an exact clock, the wall clock's with real time.
func (e *env) clock() time.Duration {
	if e.h.Exact {
		return time.Duration(e.moved.Load())
	}
	return time.Since(e.born)
}

// pick returns exact with an exact clock and real with real time: real
// time wants short periods and blocks, since the suite sleeps through
// them.
func pick[T any](e *env, exact, real T) T {
	if e.h.Exact {
		return exact
	}
	return real
}

// near asserts a duration: equal to want with an exact clock, within slack
// of it with real time.
func (e *env) near(what string, got, want time.Duration) {
	e.Helper()
	switch {
	case e.h.Exact && got != want:
		e.Errorf("%s: got %s, want %s", what, got, want)
	case !e.h.Exact && (got < want-slack || got > want+slack):
		e.Errorf("%s: got %s, want %s ± %s", what, got, want, slack)
	}
}

// nearSince asserts a duration that counts down in the store's time from
// a moment at or after start (a wait, a time until a reset): as near does,
// except that with real time it may also be short of want by the time
// that has passed since start, which a loaded machine makes longer than
// slack.
func (e *env) nearSince(what string, got, want time.Duration, start time.Time) {
	e.Helper()
	if e.h.Exact {
		e.near(what, got, want)
		return
	}
	if low := want - time.Since(start) - slack; got < low || got > want+slack {
		e.Errorf("%s: got %s, want %s - %s (time passed since the key was filled) ± %s", what, got, want, time.Since(start), slack)
	}
}

// past moves the store's clock beyond a store-side deadline d from now:
// exactly d with an exact clock, d plus a margin with real time.
func (e *env) past(d time.Duration) {
	if !e.h.Exact {
		d += slack
	}
	e.advance(d)
}

func (e *env) take(r store.Request) store.Decision {
	e.Helper()
	e.note(r)
	e.callAt.Store(int64(e.clock()))
	d, err := e.h.Store.Take(e.ctx, r)
	if err != nil {
		e.Fatalf("Take(%s): got error %v, want nil", describe(r), err)
	}
	e.checkDecision("Take", r, d)
	return d
}

func (e *env) peek(r store.Request) store.Decision {
	e.Helper()
	e.note(r)
	e.callAt.Store(int64(e.clock()))
	d, err := e.h.Store.Peek(e.ctx, r)
	if err != nil {
		e.Fatalf("Peek(%s): got error %v, want nil", describe(r), err)
	}
	e.checkDecision("Peek", r, d)
	return d
}

// reset resets r and fails unless Reset found state to forget.
func (e *env) reset(r store.Request) {
	e.Helper()
	if err := e.h.Store.Reset(e.ctx, r); err != nil {
		e.Fatalf("Reset(%s): got error %v, want nil", describe(r), err)
	}
}

// resetNotFound resets r and fails unless Reset reports that nothing was
// stored: an error matching store.ErrNotFound, and not a backend failure.
func (e *env) resetNotFound(what string, r store.Request) {
	e.Helper()
	if err := e.h.Store.Reset(e.ctx, r); !isErr(err, store.ErrNotFound) {
		e.Errorf("%s: Reset(%s): got error %v, want ErrNotFound", what, describe(r), err)
	}
}

// allow takes r and fails unless it is admitted.
func (e *env) allow(r store.Request) store.Decision {
	e.Helper()
	d := e.take(r)
	if !d.Allowed {
		e.Fatalf("Take(%s): got denied (%s), want allowed", describe(r), show(d))
	}
	return d
}

// deny takes r and fails unless it is denied.
func (e *env) deny(r store.Request) store.Decision {
	e.Helper()
	d := e.take(r)
	if d.Allowed {
		e.Fatalf("Take(%s): got allowed (%s), want denied", describe(r), show(d))
	}
	return d
}

// exhaust takes r until it is denied and returns the number admitted and
// the denial. It fails after max admissions.
func (e *env) exhaust(r store.Request, max int) (int, store.Decision) {
	e.Helper()
	for n := 0; n <= max; n++ {
		if d := e.take(r); !d.Allowed {
			return n, d
		}
	}
	e.Fatalf("Take(%s): still admitted after %d requests, want a denial", describe(r), max+1)
	return 0, store.Decision{}
}

// boundary returns the time to the end of the current window of period p,
// as a fixed-window Peek on a fresh key of the harness's store reveals.
func (e *env) boundary(p time.Duration) time.Duration {
	e.Helper()
	st := e.h.Store
	if e.base != nil {
		st = e.base
	}
	r := req(e.key(), 1, limit(store.FixedWindow, 1, p))
	e.note(r)
	d, err := st.Peek(e.ctx, r)
	if err != nil {
		e.Fatalf("Peek(%s): got error %v, want nil", describe(r), err)
	}
	e.checkDecision("Peek", r, d)
	return d.ResetAfter
}

// windowRoom prepares a window algorithm's test: with an exact clock it
// moves to the start of a window of the longest period, which must be a
// multiple of the others, so that durations are predictable; with real
// time it waits, shortest period first, for the next window of each period
// whose current window ends within need (at most half the period), so that
// the test does not straddle a window boundary. Windows are aligned at
// multiples of their period, which a fixed-window Peek on a fresh key
// reveals.
func (e *env) windowRoom(alg store.Algorithm, need time.Duration, periods ...time.Duration) {
	e.Helper()
	if alg != store.FixedWindow && alg != store.SlidingWindowCounter {
		return
	}
	ps := append([]time.Duration(nil), periods...)
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	if e.h.Exact {
		ps = ps[len(ps)-1:]
	}
	for _, p := range ps {
		left := e.boundary(p)
		switch {
		case e.h.Exact:
			e.advance(left)
		case left < min(need, p/2):
			e.advance(left + slack)
		}
	}
}

// keys returns the harness's storage keys of every kind but overrides:
// limit state, blocks, strike counters and de-duplication ids.
func (e *env) keys() map[string]time.Duration {
	e.Helper()
	all := e.storedKeys()
	states := map[string]time.Duration{}
	for _, keys := range []map[string]time.Duration{all.State, all.Block, all.Strikes, all.Dedup} {
		for k, ttl := range keys {
			states[k] = ttl
		}
	}
	return states
}

// storedKeys returns the harness's storage keys by kind.
func (e *env) storedKeys() StoredKeys {
	e.Helper()
	keys, err := e.h.KeyTTLs(e.ctx)
	if err != nil {
		e.Fatalf("KeyTTLs: got error %v, want nil", err)
	}
	return keys
}

// limit returns an unnamed limit.
func limit(alg store.Algorithm, rate int64, period time.Duration) store.Limit {
	return store.Limit{Algorithm: alg, Rate: rate, Period: period}
}

// named returns a named limit.
func named(name string, alg store.Algorithm, rate int64, period time.Duration) store.Limit {
	return store.Limit{Name: name, Algorithm: alg, Rate: rate, Period: period}
}

func req(key string, cost int64, limits ...store.Limit) store.Request {
	return store.Request{Key: key, Cost: cost, Limits: limits}
}

// bucketLike reports whether alg has a burst and refills continuously.
func bucketLike(alg store.Algorithm) bool {
	return alg == store.GCRA || alg == store.TokenBucket
}

// lifetime returns the longest time a request's state can matter: the
// time to refill from empty for GCRA and the token bucket, two windows for
// the sliding window counter, one (the longest) period otherwise. No TTL,
// ResetAfter or RetryAfter may exceed it.
func lifetime(r store.Request) time.Duration {
	var m time.Duration
	for _, l := range r.Limits {
		d := contract.Span(l)
		switch l.Algorithm {
		case store.GCRA, store.TokenBucket:
			d = ceilDiv(l.Period, l.Capacity(), l.Rate)
		case store.SlidingWindowCounter:
			d = 2 * l.Period
		}
		m = max(m, d)
	}
	return m
}

// ceilDiv returns p·n/d rounded up to the microsecond.
func ceilDiv(p time.Duration, n, d int64) time.Duration {
	us := float64(p.Microseconds()) * float64(n) / float64(d)
	if us >= math.MaxInt64/1000 {
		return math.MaxInt64
	}
	return time.Duration(math.Ceil(us)) * time.Microsecond
}

// checkDecision asserts what holds for every decision. It is safe for
// concurrent use.
func (e *env) checkDecision(op string, r store.Request, d store.Decision) {
	e.Helper()
	e.note(r)
	fail := func(format string, args ...any) {
		e.Helper()
		e.Errorf("%s(%s) = %s: %s", op, describe(r), show(d), fmt.Sprintf(format, args...))
	}
	e.checkFlags(op, r, d, fail)
	e.checkGranted(r, d, fail)
	e.checkWait(op, r, d, fail)
	e.checkPerLimit(r, d, fail)
	e.checkNext(r, d, fail)
	if d.Blocked {
		e.checkBlockedDecision(r, d, fail)
		return
	}
	if e.checkDecidingLimit(r, d, fail) {
		e.checkDurations(r, d, fail)
	}
}

// checkFlags asserts when Blocked, BlockStarted, Duplicate and Override
// may be reported.
func (e *env) checkFlags(op string, r store.Request, d store.Decision, fail func(string, ...any)) {
	e.Helper()
	blocks := false
	for _, l := range r.Limits {
		blocks = blocks || l.Block > 0
	}
	switch {
	case d.Blocked && e.longestBlock.Load() == 0:
		fail("got Blocked, want false: no request of this test has a Block")
	case d.BlockStarted && (op != "Take" || !d.Blocked || !blocks):
		fail("got BlockStarted, want it only from a Take that is Blocked and has a limit with a Block")
	case d.Duplicate && (r.DedupID == "" || !d.Allowed):
		fail("got Duplicate, want it only for an admitted request with a DedupID")
	case d.Override != store.OverrideNone && !r.ApplyOverride:
		fail("got Override %s, want none for a request that does not read overrides", d.Override)
	}
}

// checkPerLimit asserts PerLimit: nil for a single-limit request, else one
// valid entry per limit, none with fewer remaining than an admitted
// decision reports.
func (e *env) checkPerLimit(r store.Request, d store.Decision, fail func(string, ...any)) {
	e.Helper()
	switch {
	case len(r.Limits) == 1 && d.PerLimit != nil:
		fail("PerLimit: got %d entries, want nil for a single-limit request", len(d.PerLimit))
	case len(r.Limits) > 1 && len(d.PerLimit) != len(r.Limits):
		fail("PerLimit: got %d entries, want %d (one per limit)", len(d.PerLimit), len(r.Limits))
	case len(r.Limits) > 1:
		for i, p := range d.PerLimit {
			lt := e.lifetime(r.Limits[i:i+1]) + time.Microsecond
			if p.Remaining < 0 || p.Remaining > r.Limits[i].Capacity() || p.ResetAfter < 0 || p.ResetAfter > lt || p.ResetAfter%time.Microsecond != 0 {
				fail("PerLimit[%d]: got {%d %s}, want Remaining in 0..%d and ResetAfter in whole microseconds in 0..%s", i, p.Remaining, p.ResetAfter, r.Limits[i].Capacity(), lt)
			}
			if d.Allowed && p.Remaining < d.Remaining {
				fail("PerLimit[%d]: got Remaining %d, want >= %d: an admitted request reports the limit with the fewest remaining", i, p.Remaining, d.Remaining)
			}
		}
	}
}

// checkDecidingLimit asserts that a decision that is not Blocked names
// one of the request's limits (Index, LimitID, Limit, its PerLimit entry)
// and a Remaining that fits it. It reports whether Index is valid.
func (e *env) checkDecidingLimit(r store.Request, d store.Decision, fail func(string, ...any)) bool {
	e.Helper()
	if d.Index < 0 || d.Index >= len(r.Limits) {
		fail("Index: got %d, want 0..%d", d.Index, len(r.Limits)-1)
		return false
	}
	l := r.Limits[d.Index]
	if len(r.Limits) > 1 {
		if p := d.PerLimit[d.Index]; p.Remaining != d.Remaining || p.ResetAfter != d.ResetAfter {
			fail("PerLimit[%d]: got {%d %s}, want the deciding limit's Remaining and ResetAfter", d.Index, p.Remaining, p.ResetAfter)
		}
	}
	if d.LimitID != l.ID() {
		fail("LimitID: got %q, want %q (the ID of Limits[%d])", d.LimitID, l.ID(), d.Index)
	}
	if d.Capacity != l.Capacity() {
		fail("Limit: got %d, want %d (the capacity of Limits[%d])", d.Capacity, l.Capacity(), d.Index)
	}
	if d.Remaining < 0 || d.Remaining > d.Capacity {
		fail("Remaining: got %d, want 0..%d", d.Remaining, d.Capacity)
	}
	return true
}

// checkDurations asserts RetryAfter, ResetAfter and the suppression
// fields of a decision that is not Blocked.
func (e *env) checkDurations(r store.Request, d store.Decision, fail func(string, ...any)) {
	e.Helper()
	if d.Allowed && d.RetryAfter != 0 {
		fail("RetryAfter: got %s, want 0 when allowed", d.RetryAfter)
	}
	if !d.Allowed && d.RetryAfter <= 0 {
		fail("RetryAfter: got %s, want > 0 when denied", d.RetryAfter)
	}
	if !d.Allowed && !d.Suppressed && d.Remaining >= contract.Cost(&r) {
		fail("Remaining: got %d, want < cost %d when denied (and not Suppressed)", d.Remaining, contract.Cost(&r))
	}
	suppressed := e.suppressing
	switch {
	case !(d.Suppression >= 0 && d.Suppression <= 1):
		fail("Suppression: got %v, want 0..1", d.Suppression)
	case !suppressed && (d.Suppression != 0 || d.Suppressed):
		fail("Suppression, Suppressed: got %v, %t, want 0, false for %s", d.Suppression, d.Suppressed, r.Limits[0].Algorithm)
	case d.Suppressed && (d.Allowed || d.Suppression == 0):
		fail("Suppressed: got true, want it only for a refusal by a draw against a factor above 0")
	}
	if d.Allowed && !d.Duplicate && d.ResetAfter <= 0 {
		fail("ResetAfter: got %s, want > 0 after an admitted request", d.ResetAfter)
	}
	if d.ResetAfter < 0 {
		fail("ResetAfter: got %s, want >= 0", d.ResetAfter)
	}
	if d.RetryAfter%time.Microsecond != 0 || d.ResetAfter%time.Microsecond != 0 {
		fail("durations: got RetryAfter %s, ResetAfter %s, want whole microseconds", d.RetryAfter, d.ResetAfter)
	}
	if lt := e.lifetime(r.Limits) + time.Microsecond; d.RetryAfter > lt || d.ResetAfter > lt {
		fail("durations: got RetryAfter %s, ResetAfter %s, want <= %s (the state's lifetime)", d.RetryAfter, d.ResetAfter, lt)
	}
}

// checkBlockedDecision asserts what holds for a refusal because of a
// block: it names the limit that started the block (Index -1 when that
// limit is not in the request, and then Limit is the first limit's
// capacity), reports no unit remaining and, as RetryAfter and ResetAfter,
// the later of the block's remaining time and the refusing limits' own
// wait: no longer than the longest block or the limits' lifetime.
func (e *env) checkBlockedDecision(r store.Request, d store.Decision, fail func(string, ...any)) {
	e.Helper()
	switch {
	case d.Allowed || d.Duplicate:
		fail("got Allowed %t, Duplicate %t, want false for a blocked request", d.Allowed, d.Duplicate)
	case d.Remaining != 0:
		fail("Remaining: got %d, want 0 for a blocked request", d.Remaining)
	case d.RetryAfter <= 0 || d.RetryAfter%time.Microsecond != 0:
		fail("RetryAfter: got %s, want > 0 and whole microseconds", d.RetryAfter)
	case d.RetryAfter > max(time.Duration(e.longestBlock.Load()), e.lifetime(r.Limits)+time.Microsecond):
		fail("RetryAfter: got %s, want <= %s (the longest block of this test) or <= %s (the limits' lifetime)", d.RetryAfter, time.Duration(e.longestBlock.Load()), e.lifetime(r.Limits))
	case d.ResetAfter != d.RetryAfter:
		fail("ResetAfter: got %s, want RetryAfter %s for a blocked request", d.ResetAfter, d.RetryAfter)
	case d.LimitID == "":
		fail("LimitID: got \"\", want the ID of the limit that started the block")
	case d.Index < -1 || d.Index >= len(r.Limits):
		fail("Index: got %d, want -1..%d", d.Index, len(r.Limits)-1)
	case d.Index >= 0 && (d.LimitID != r.Limits[d.Index].ID() || d.Capacity != r.Limits[d.Index].Capacity()):
		fail("LimitID, Limit: got %q, %d, want %q, %d (Limits[%d])", d.LimitID, d.Capacity, r.Limits[d.Index].ID(), r.Limits[d.Index].Capacity(), d.Index)
	case d.Index == -1 && d.Capacity != r.Limits[0].Capacity():
		fail("Limit: got %d, want %d (the first limit's capacity, the blocking limit not being in the request)", d.Capacity, r.Limits[0].Capacity())
	case d.Index == -1:
		for i, l := range r.Limits {
			if l.ID() == d.LimitID {
				fail("Index: got -1, want %d: LimitID %q is the ID of Limits[%d]", i, d.LimitID, i)
			}
		}
	}
}

// describe renders a request for messages, shortening long keys.
func describe(r store.Request) string {
	k := r.Key
	if len(k) > 48 {
		k = fmt.Sprintf("%s...(%d bytes)", k[:32], len(k))
	}
	ls := make([]string, len(r.Limits))
	for i, l := range r.Limits {
		ls[i] = fmt.Sprintf("%s %d/%s", l.ID(), l.Rate, l.Period)
		if l.Burst != 0 {
			ls[i] += fmt.Sprintf(" burst %d", l.Burst)
		}
		if l.Block != 0 {
			ls[i] += fmt.Sprintf(" block %s", l.Block)
		}
		if l.BlockMax != 0 {
			ls[i] += fmt.Sprintf(" max %s", l.BlockMax)
		}
	}
	s := fmt.Sprintf("key %q, cost %d, limits [%s]", k, r.Cost, strings.Join(ls, ", "))
	if r.CountDenied {
		s += ", count denied"
	}
	if r.DedupID != "" {
		id := r.DedupID
		if len(id) > 24 {
			id = fmt.Sprintf("%s...(%d bytes)", id[:16], len(id))
		}
		s += fmt.Sprintf(", dedup %q", id)
	}
	return s
}

// show renders a decision for messages.
func show(d store.Decision) string {
	s := fmt.Sprintf("{Allowed:%t Limit:%d Remaining:%d ResetAfter:%s NextAfter:%s RetryAfter:%s LimitID:%q Index:%d",
		d.Allowed, d.Capacity, d.Remaining, d.ResetAfter, d.NextAfter, d.RetryAfter, d.LimitID, d.Index)
	if d.Blocked || d.BlockStarted || d.Duplicate {
		s += fmt.Sprintf(" Blocked:%t BlockStarted:%t Duplicate:%t", d.Blocked, d.BlockStarted, d.Duplicate)
	}
	if d.Suppression != 0 || d.Suppressed {
		s += fmt.Sprintf(" Suppression:%v Suppressed:%t", d.Suppression, d.Suppressed)
	}
	for i, l := range d.PerLimit {
		s += fmt.Sprintf(" PerLimit[%d]:{%d %s %s}", i, l.Remaining, l.ResetAfter, l.NextAfter)
	}
	return s + "}"
}

// sameDecision compares two decisions that should be equal: every field
// with an exact clock; all but the durations with real time.
func (e *env) sameDecision(what string, got, want store.Decision) {
	e.Helper()
	if !e.h.Exact {
		got.ResetAfter, got.RetryAfter, got.NextAfter = want.ResetAfter, want.RetryAfter, want.NextAfter
	}
	same := scalars(got) == scalars(want) && len(got.PerLimit) == len(want.PerLimit)
	for i := 0; same && i < len(got.PerLimit); i++ {
		g, w := got.PerLimit[i], want.PerLimit[i]
		same = g.Remaining == w.Remaining && (!e.h.Exact || g.ResetAfter == w.ResetAfter && g.NextAfter == w.NextAfter)
	}
	if !same {
		note := ""
		if !e.h.Exact {
			note = " (durations not compared)"
		}
		e.Errorf("%s: got %s, want %s%s", what, show(got), show(want), note)
	}
}

// decisionScalars is a Decision without PerLimit, which makes it
// comparable.
type decisionScalars struct {
	allowed, blocked, blockStarted, duplicate bool
	limit, remaining                          int64
	resetAfter, nextAfter, retryAfter         time.Duration
	limitID                                   string
	index                                     int
	suppression                               float64
	suppressed                                bool
}

func scalars(d store.Decision) decisionScalars {
	return decisionScalars{d.Allowed, d.Blocked, d.BlockStarted, d.Duplicate,
		d.Capacity, d.Remaining, d.ResetAfter, d.NextAfter, d.RetryAfter, d.LimitID, d.Index,
		d.Suppression, d.Suppressed}
}

// expect compares selected fields of a decision; durations are compared
// only with an exact clock, and only when the want value is >= 0.
type expect struct {
	allowed    bool
	remaining  int64
	resetAfter time.Duration
	retryAfter time.Duration
	limitID    string // "" = not checked
}

func (e *env) check(what string, d store.Decision, w expect) {
	e.Helper()
	switch {
	case d.Allowed != w.allowed:
		e.Errorf("%s: got %s, want Allowed %t", what, show(d), w.allowed)
	case d.Remaining != w.remaining:
		e.Errorf("%s: got %s, want Remaining %d", what, show(d), w.remaining)
	case w.limitID != "" && d.LimitID != w.limitID:
		e.Errorf("%s: got %s, want LimitID %q", what, show(d), w.limitID)
	case !e.h.Exact:
	case w.resetAfter >= 0 && d.ResetAfter != w.resetAfter:
		e.Errorf("%s: got %s, want ResetAfter %s", what, show(d), w.resetAfter)
	case w.retryAfter >= 0 && d.RetryAfter != w.retryAfter:
		e.Errorf("%s: got %s, want RetryAfter %s", what, show(d), w.retryAfter)
	}
}

// sortedKeys returns m's keys in order, for stable messages.
func sortedKeys(m map[string]time.Duration) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// isErr reports whether err matches want and is not a backend failure.
func isErr(err, want error) bool {
	return errors.Is(err, want) && !errors.Is(err, store.ErrStoreUnavailable)
}
