package hybrid_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/hybrid"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
	"github.com/ratekeeper/ratekeeper/store/internal/fakeclock"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// frozenMem returns a memory store whose clock never moves, so that no
// capacity refills during a test and admitted counts are exact.
func frozenMem(t testing.TB) (store.Store, *fakeclock.Clock) {
	t.Helper()
	clock := fakeclock.New(time.Time{})
	m, err := memstore.New(memstore.Options{Clock: clock.Now})
	if err != nil {
		t.Fatalf("memstore.New: %v", err)
	}
	return m, clock
}

// newHybrid returns a hybrid store over backend, closed when the test ends.
func newHybrid(t testing.TB, backend store.Store, opts hybrid.Options) hybrid.Store {
	t.Helper()
	s, err := hybrid.New(backend, opts)
	if err != nil {
		t.Fatalf("hybrid.New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func req(key string, lim store.Limit) store.Request {
	return store.Request{Key: key, Limits: []store.Limit{lim}}
}

// hammer sends requests for r from workers goroutines per store until
// each worker has seen stop consecutive refusals, and returns the
// admissions.
func hammer(t testing.TB, stores []hybrid.Store, r store.Request, workers, stop int) int64 {
	t.Helper()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for _, s := range stores {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				refused := 0
				for refused < stop {
					d, err := s.Take(context.Background(), r)
					if err != nil {
						t.Errorf("take: %v", err)
						return
					}
					if d.Allowed {
						admitted.Add(1)
						refused = 0
					} else {
						refused++
					}
				}
			}()
		}
	}
	wg.Wait()
	return admitted.Load()
}

func TestNewValidates(t *testing.T) {
	m, _ := frozenMem(t)
	for _, tc := range []struct {
		name    string
		backend store.Store
		opts    hybrid.Options
	}{
		{"nil backend", nil, hybrid.Options{}},
		{"sync interval below 1ms", m, hybrid.Options{SyncInterval: time.Microsecond}},
		{"negative timeout", m, hybrid.Options{Timeout: -1}},
		{"negative close timeout", m, hybrid.Options{CloseTimeout: -1}},
		{"negative idle timeout", m, hybrid.Options{IdleTimeout: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := hybrid.New(tc.backend, tc.opts)
			if err == nil {
				_ = s.Close()
				t.Fatalf("got nil error, want one")
			}
		})
	}
}

// One instance never admits more than the limit and refuses only what the
// backend refuses: exactly the capacity is admitted, and after Close the
// backend has recorded every admission.
func TestOneInstanceExact(t *testing.T) {
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			m, _ := frozenMem(t)
			s := newHybrid(t, m, hybrid.Options{SyncInterval: 2 * time.Millisecond})
			lim := store.Limit{Algorithm: alg, Rate: 3000, Period: time.Second} // L = 6
			r := req("k", lim)
			got := hammer(t, []hybrid.Store{s}, r, 8, 3)
			if got != 3000 {
				t.Errorf("admitted %d, want 3000", got)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			d, err := m.Peek(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			if d.Remaining != 0 || d.Allowed {
				t.Errorf("backend after close: allowed=%t remaining %d, want false 0", d.Allowed, d.Remaining)
			}
			if st := s.Stats(); st.Overadmitted != 0 || st.Unconfirmed != 0 {
				t.Errorf("stats %+v, want no overadmitted or unconfirmed units", st)
			}
		})
	}
}

// Several instances over one backend admit at most (N−1)·L beyond the
// capacity, L = ⌈Rate·SyncInterval/Period⌉, and every unit beyond it is
// counted in Stats.Overadmitted.
func TestOvershootBound(t *testing.T) {
	for _, tc := range []struct {
		instances int
		sync      time.Duration
		rate      int64
	}{
		{2, 10 * time.Millisecond, 1000},
		{4, 10 * time.Millisecond, 1000},
		{4, 5 * time.Millisecond, 4000},
		{8, 10 * time.Millisecond, 2000},
	} {
		lease := (tc.rate*int64(tc.sync) + int64(time.Second) - 1) / int64(time.Second)
		bound := tc.rate + int64(tc.instances-1)*lease
		t.Run(fmt.Sprintf("N=%d/sync=%s/rate=%d", tc.instances, tc.sync, tc.rate), func(t *testing.T) {
			m, _ := frozenMem(t)
			stores := make([]hybrid.Store, tc.instances)
			for i := range stores {
				stores[i] = newHybrid(t, m, hybrid.Options{SyncInterval: tc.sync})
			}
			r := req("k", store.Limit{Rate: tc.rate, Period: time.Second})
			got := hammer(t, stores, r, 4, 3)
			var over uint64
			for _, s := range stores {
				_ = s.Close() // refused debt is an expected error here
				st := s.Stats()
				over += st.Overadmitted
				if st.Unconfirmed != 0 {
					t.Errorf("unconfirmed %d, want 0", st.Unconfirmed)
				}
			}
			t.Logf("N=%d sync=%s rate=%d/s L=%d: admitted %d, capacity %d, bound %d, overshoot %d",
				tc.instances, tc.sync, tc.rate, lease, got, tc.rate, bound, got-tc.rate)
			if got < tc.rate || got > bound {
				t.Errorf("admitted %d, want within [%d, %d]", got, tc.rate, bound)
			}
			if int64(over) != got-tc.rate {
				t.Errorf("overadmitted %d, want %d (admitted minus capacity)", over, got-tc.rate)
			}
		})
	}
}

// A refusal is cached until its RetryAfter: the backend is not asked again
// before, and is after.
func TestDenyCache(t *testing.T) {
	m, clock := frozenMem(t)
	cb := &countingStore{Store: m}
	s := newHybrid(t, cb, hybrid.Options{SyncInterval: time.Hour, Clock: clock.Now})
	r := req("k", store.Limit{Rate: 2, Period: time.Second})
	ctx := context.Background()
	for range 2 {
		if d, err := s.Take(ctx, r); err != nil || !d.Allowed {
			t.Fatalf("take: %+v, %v; want admitted", d, err)
		}
	}
	d, err := s.Take(ctx, r)
	if err != nil || d.Allowed || d.Cached || d.RetryAfter != 500*time.Millisecond {
		t.Fatalf("third take: %+v, %v; want a backend refusal with RetryAfter 500ms", d, err)
	}
	calls := cb.takes.Load()
	clock.Advance(200 * time.Millisecond)
	d, err = s.Take(ctx, r)
	if err != nil || d.Allowed || !d.Cached || d.RetryAfter != 300*time.Millisecond {
		t.Fatalf("cached take: %+v, %v; want a cached refusal with RetryAfter 300ms", d, err)
	}
	if n := cb.takes.Load(); n != calls {
		t.Errorf("backend takes %d, want %d (answered from the cache)", n, calls)
	}
	clock.Advance(300 * time.Millisecond)
	d, err = s.Take(ctx, r)
	if err != nil || !d.Allowed || d.Cached {
		t.Fatalf("take after RetryAfter: %+v, %v; want admitted", d, err)
	}
}

// TestDenyCacheWaitsEndWhenTheBackendAdmits: a backend call that travels
// 20 ms before the backend decides and 10 ms back. A cached refusal's
// wait counts from the answer, so that the backend admits the request once
// it has passed (counted from the sending, it ended 20 ms early), and it
// is never longer than the backend answered.
func TestDenyCacheWaitsEndWhenTheBackendAdmits(t *testing.T) {
	m, clock := frozenMem(t)
	b := &travellingStore{Store: m, clock: clock, out: 20 * time.Millisecond, back: 10 * time.Millisecond, later: time.Second}
	s := newHybrid(t, b, hybrid.Options{SyncInterval: time.Hour, Clock: clock.Now})
	r := req("k", store.Limit{Rate: 2, Period: time.Second})
	ctx := context.Background()
	var refused store.Decision
	for refused.RetryAfter == 0 {
		d, err := s.Take(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			refused = d
		}
	}
	if refused.Cached {
		t.Fatalf("first refusal %+v: want the backend's", refused)
	}
	clock.Advance(5 * time.Millisecond)
	d, err := s.Take(ctx, r)
	if err != nil || d.Allowed || !d.Cached {
		t.Fatalf("take after the refusal: %+v, %v; want the cached refusal", d, err)
	}
	// 5 ms after the answer came back: both waits 5 ms shorter than the
	// backend answered (counted from the sending, they were 35 ms shorter).
	if d.RetryAfter != refused.RetryAfter-5*time.Millisecond || d.ResetAfter != refused.ResetAfter-5*time.Millisecond {
		t.Fatalf("cached refusal %+v 5ms after the backend's %+v: want RetryAfter and ResetAfter 5ms shorter", d, refused)
	}
	clock.Advance(d.RetryAfter)
	if p, err := m.Peek(ctx, r); err != nil || !p.Allowed {
		t.Fatalf("after the cached RetryAfter %s the backend answers %+v, %v; want admitted", d.RetryAfter, p, err)
	}
}

// TestBackendsCachedRefusalNotKept: a refusal the backend answered from
// its own cache is not cached again. Its waits count from when the
// backend's call came back, so counting them from this call's sending
// could refuse past the backend's end; the backend's cache answers the
// next request anyway.
func TestBackendsCachedRefusalNotKept(t *testing.T) {
	m, clock := frozenMem(t)
	b := &cachingStore{countingStore: countingStore{Store: m}}
	s := newHybrid(t, b, hybrid.Options{SyncInterval: time.Hour, Clock: clock.Now})
	r := req("k", store.Limit{Rate: 2, Period: time.Second})
	ctx := context.Background()
	for range 2 {
		if d, err := s.Take(ctx, r); err != nil || !d.Allowed {
			t.Fatalf("take: %+v, %v; want admitted", d, err)
		}
	}
	for i := range 3 {
		before := b.takes.Load()
		d, err := s.Take(ctx, r)
		if err != nil || d.Allowed || !d.Cached {
			t.Fatalf("refused take %d: %+v, %v; want the backend's cached refusal", i, d, err)
		}
		if b.takes.Load() == before {
			t.Fatalf("refused take %d answered without the backend: want the backend asked (its cached refusal is not kept)", i)
		}
	}
}

// TestDurationsInWholeMicroseconds: every duration the hybrid store reports
// is a whole number of microseconds, as every store's are, also those it
// works out from its own clock (local admissions under a rate whose unit is
// not whole, cached refusals read at odd times); they used to carry
// nanoseconds.
func TestDurationsInWholeMicroseconds(t *testing.T) {
	m, clock := frozenMem(t)
	b := &travellingStore{Store: m, clock: clock, out: 3*time.Millisecond + 333, back: time.Millisecond + 77}
	s := newHybrid(t, b, hybrid.Options{SyncInterval: time.Hour, Clock: clock.Now})
	r := req("k", store.Limit{Rate: 3, Burst: 7, Period: time.Second})
	ctx := context.Background()
	refused := 0 // from the cache
	for i := range 40 {
		d, err := s.Take(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []time.Duration{d.RetryAfter, d.ResetAfter, d.NextAfter} {
			if w%time.Microsecond != 0 {
				t.Fatalf("take %d: %+v reports %d ns, want whole microseconds", i, d, w)
			}
		}
		if d.Cached {
			refused++
		}
		clock.Advance(time.Duration(1 + 7919*i))
	}
	if refused == 0 {
		t.Fatal("no refusal was cached: the check saw none")
	}
}

// cachingStore reports every refusal as answered from a cache.
type cachingStore struct {
	countingStore
}

func (c *cachingStore) Take(ctx context.Context, r store.Request) (store.Decision, error) {
	d, err := c.countingStore.Take(ctx, r)
	if err == nil && !d.Allowed {
		d.Cached = true
	}
	return d, err
}

// travellingStore moves a fake clock by out before each Take reaches the
// store and by back after it answers: a distant backend. It moves a
// refusal's ResetAfter later by later, so that it differs from its
// RetryAfter.
type travellingStore struct {
	store.Store
	clock            *fakeclock.Clock
	out, back, later time.Duration
}

func (s *travellingStore) Take(ctx context.Context, r store.Request) (store.Decision, error) {
	s.clock.Advance(s.out)
	d, err := s.Store.Take(ctx, r)
	s.clock.Advance(s.back)
	if err == nil && !d.Allowed {
		d.ResetAfter += s.later
	}
	return d, err
}

// Requests the fast path does not support go to the backend unchanged.
func TestPassThrough(t *testing.T) {
	lim := store.Limit{Rate: 100, Period: time.Minute}
	for _, tc := range []struct {
		name string
		r    store.Request
	}{
		{"two limits", store.Request{Key: "k", Limits: []store.Limit{lim, {Name: "b", Rate: 5, Period: time.Second}}}},
		{"dedup id", store.Request{Key: "k", Limits: []store.Limit{lim}, DedupID: "x"}},
		{"count denied", store.Request{Key: "k", Limits: []store.Limit{{Algorithm: store.FixedWindow, Rate: 5, Period: time.Second}}, CountDenied: true}},
		{"block", store.Request{Key: "k", Limits: []store.Limit{{Rate: 5, Period: time.Second, Block: time.Second}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := frozenMem(t)
			cb := &countingStore{Store: m}
			s := newHybrid(t, cb, hybrid.Options{SyncInterval: time.Hour})
			for i := range 3 {
				if _, err := s.Take(context.Background(), tc.r); err != nil {
					t.Fatalf("take: %v", err)
				}
				if n := cb.takes.Load(); n != int64(i+1) {
					t.Fatalf("backend takes %d, want %d", n, i+1)
				}
			}
		})
	}
}

// An invalid request gets the backend's validation error.
func TestInvalidRequest(t *testing.T) {
	m, _ := frozenMem(t)
	s := newHybrid(t, m, hybrid.Options{})
	_, err := s.Take(context.Background(), store.Request{Key: "k", Limits: []store.Limit{{Rate: 2, Period: time.Second}}, Cost: 3})
	if !errors.Is(err, store.ErrCostExceedsCapacity) {
		t.Errorf("got %v, want ErrCostExceedsCapacity", err)
	}
	_, err = s.Take(context.Background(), req("", store.PerSecond(1)))
	if !errors.Is(err, store.ErrInvalidRequest) {
		t.Errorf("got %v, want ErrInvalidRequest", err)
	}
}

// Reset forgets the local lease and pending units as well as the backend.
func TestReset(t *testing.T) {
	m, _ := frozenMem(t)
	s := newHybrid(t, m, hybrid.Options{SyncInterval: time.Hour})
	r := req("k", store.Limit{Rate: 1_000_000, Period: time.Hour})
	ctx := context.Background()
	for range 3 {
		if _, err := s.Take(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Reset(ctx, r); err != nil {
		t.Fatalf("reset: %v", err)
	}
	if err := s.Reset(ctx, r); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second reset: %v, want ErrNotFound", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := m.Peek(ctx, r)
	if err != nil || d.Remaining != 1_000_000-1 {
		t.Errorf("backend remaining %d (%v), want %d (none used; Peek counts the peeked request): nothing committed after the reset", d.Remaining, err, 1_000_000-1)
	}
}

// A backend outage degrades to the known remaining, counts failures,
// returns errors once that is spent, and commits the pending units once
// the backend is back, each exactly once: whether the failed calls were
// applied (outcome unknown, counted as applied) or not sent at all
// (refused connection, sent again).
func TestOutage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		applied bool
	}{
		{"applied", true},
		{"not sent", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := frozenMem(t)
			fb := &faultyStore{Store: m, applied: tc.applied}
			s := newHybrid(t, fb, hybrid.Options{SyncInterval: time.Millisecond})
			lim := store.Limit{Rate: 100, Period: time.Second} // L = 1
			r := req("k", lim)
			ctx := context.Background()
			if d, err := s.Take(ctx, r); err != nil || !d.Allowed {
				t.Fatalf("first take: %+v, %v", d, err)
			}
			fb.failing.Store(true)
			var admitted int64 = 1
			var failed int
			for range 200 {
				d, err := s.Take(ctx, r)
				switch {
				case err != nil:
					if !errors.Is(err, store.ErrStoreUnavailable) {
						t.Fatalf("take error %v, want ErrStoreUnavailable", err)
					}
					failed++
				case d.Allowed:
					admitted++
				}
			}
			if admitted > 100 || failed == 0 {
				t.Fatalf("during the outage: admitted %d (want at most 100), %d errors (want some)", admitted, failed)
			}
			if st := s.Stats(); st.Failures == 0 {
				t.Errorf("failures %d, want > 0", st.Failures)
			}
			fb.failing.Store(false)
			// Once the pending units are committed, the backend holds every
			// admitted unit except those of failed calls whose outcome is
			// unknown (Stats.Unconfirmed) and that the fault did not apply,
			// plus those the fault applied although their request failed.
			// The fault applies a failed call only when the backend admits
			// it, so a call can be unconfirmed and not applied.
			applied := func() int64 { return fb.appliedUnits.Load() }
			used := func() int64 { return fb.recorded.Load() }
			waitFor(t, func() bool {
				return used()+int64(s.Stats().Unconfirmed)-applied() >= admitted
			})
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			st := s.Stats()
			t.Logf("admitted %d, backend recorded %d, failures %d, unconfirmed %d, applied by failed calls %d", admitted, used(), st.Failures, st.Unconfirmed, applied())
			switch {
			case !tc.applied && (st.Unconfirmed != 0 || used() != admitted):
				t.Errorf("nothing sent: backend recorded %d with %d unconfirmed, want %d and 0", used(), st.Unconfirmed, admitted)
			case tc.applied && uint64(applied()) > st.Unconfirmed:
				t.Errorf("unconfirmed %d, want at least the %d units applied by failed calls", st.Unconfirmed, applied())
			case used() > admitted+applied() || used() < admitted-(int64(st.Unconfirmed)-applied()):
				t.Errorf("backend recorded %d, want between %d and %d", used(), admitted-(int64(st.Unconfirmed)-applied()), admitted+applied())
			}
		})
	}
}

// Close commits pending units, stops every goroutine, and is idempotent.
func TestCloseFlushesAndStops(t *testing.T) {
	before := runtime.NumGoroutine()
	m, _ := frozenMem(t)
	s, err := hybrid.New(m, hybrid.Options{SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r := req("k", store.Limit{Rate: 1_000_000, Period: time.Hour})
	for range 50 {
		if _, err := s.Take(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	// Peek reports the remaining after the peeked request.
	d, err := m.Peek(context.Background(), r)
	if err != nil || d.Remaining != 1_000_000-51 {
		t.Errorf("backend remaining %d (%v), want %d", d.Remaining, err, 1_000_000-51)
	}
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before })
	// After Close, requests go to the backend.
	if d, err := s.Take(context.Background(), r); err != nil || d.Remaining != 1_000_000-51 {
		t.Errorf("take after close: %+v, %v; want the backend's answer", d, err)
	}
}

// Close gives up after CloseTimeout when the backend hangs, and still
// stops its goroutines.
func TestCloseTimeout(t *testing.T) {
	before := runtime.NumGoroutine()
	m, _ := frozenMem(t)
	hb := &hangingStore{Store: m}
	s, err := hybrid.New(hb, hybrid.Options{SyncInterval: time.Hour, CloseTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r := req("k", store.Limit{Rate: 1_000_000, Period: time.Hour})
	for range 5 {
		if _, err := s.Take(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	hb.hang.Store(true)
	start := time.Now()
	err = s.Close()
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("close: %v after %s, want an error within about 50ms", err, time.Since(start))
	}
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before })
}

// The fast path allocates nothing, admitted or refused from the cache.
func TestFastPathAllocs(t *testing.T) {
	m, _ := frozenMem(t)
	s := newHybrid(t, m, hybrid.Options{SyncInterval: time.Hour})
	ctx := context.Background()
	hot := req("hot", store.Limit{Rate: 1 << 30, Period: time.Hour})
	cold := req("cold", store.Limit{Rate: 1, Period: time.Hour})
	for _, r := range []store.Request{hot, cold, cold} {
		if _, err := s.Take(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for name, r := range map[string]store.Request{"admitted": hot, "refused": cold} {
		if n := testing.AllocsPerRun(1000, func() { _, _ = s.Take(ctx, r) }); n != 0 {
			t.Errorf("%s: %v allocations per Take, want 0", name, n)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// countingStore counts the backend Takes.
type countingStore struct {
	store.Store
	takes atomic.Int64
}

func (c *countingStore) Take(ctx context.Context, r store.Request) (store.Decision, error) {
	c.takes.Add(1)
	return c.Store.Take(ctx, r)
}

// faultyStore fails every call while failing is set. With applied, a
// failing Take is applied before it fails (its outcome unknown to the
// caller); without, it fails as a refused connection and applies nothing.
type faultyStore struct {
	store.Store
	applied      bool
	failing      atomic.Bool
	appliedUnits atomic.Int64 // units applied by failed Takes
	recorded     atomic.Int64 // units the backend recorded, failed Takes included
}

func (f *faultyStore) Take(ctx context.Context, r store.Request) (store.Decision, error) {
	if !f.failing.Load() {
		d, err := f.Store.Take(ctx, r)
		if err == nil && d.Allowed {
			f.recorded.Add(contract.Cost(&r))
		}
		return d, err
	}
	if f.applied {
		d, err := f.Store.Take(ctx, r)
		if err == nil && d.Allowed {
			f.appliedUnits.Add(contract.Cost(&r))
			f.recorded.Add(contract.Cost(&r))
		}
		return store.Decision{}, &store.BackendError{Op: "take", Kind: "timeout", Err: context.DeadlineExceeded}
	}
	return store.Decision{}, &store.BackendError{Op: "take", Kind: "connection", Err: syscall.ECONNREFUSED}
}

func (f *faultyStore) Peek(ctx context.Context, r store.Request) (store.Decision, error) {
	if f.failing.Load() {
		return store.Decision{}, &store.BackendError{Op: "peek", Kind: "connection", Err: syscall.ECONNREFUSED}
	}
	return f.Store.Peek(ctx, r)
}

// hangingStore blocks every call while hang is set, until its context ends.
type hangingStore struct {
	store.Store
	hang atomic.Bool
}

func (h *hangingStore) Take(ctx context.Context, r store.Request) (store.Decision, error) {
	if h.hang.Load() {
		<-ctx.Done()
		return store.Decision{}, &store.BackendError{Op: "take", Kind: "timeout", Err: ctx.Err()}
	}
	return h.Store.Take(ctx, r)
}

// TestResetReachesCachedRefusal pins the reset that did not reach another
// instance: a client reset through instance a (the admin API, the CLI)
// was still refused by instance b from its cached refusal until that
// refusal's RetryAfter had passed (30 s here). b now asks the backend
// again once the refusal has been cached for 250 ms, and admits.
func TestResetReachesCachedRefusal(t *testing.T) {
	m, clock := frozenMem(t)
	cb := &countingStore{Store: m}
	a := newHybrid(t, cb, hybrid.Options{SyncInterval: time.Hour, Clock: clock.Now})
	b := newHybrid(t, cb, hybrid.Options{SyncInterval: time.Hour, Clock: clock.Now})
	r := req("k", store.Limit{Rate: 2, Period: time.Minute})
	ctx := context.Background()
	for range 2 {
		if d, err := b.Take(ctx, r); err != nil || !d.Allowed {
			t.Fatalf("take: %+v, %v; want admitted", d, err)
		}
	}
	if d, err := b.Take(ctx, r); err != nil || d.Allowed || d.RetryAfter != 30*time.Second {
		t.Fatalf("third take: %+v, %v; want refused for 30s", d, err)
	}
	if err := a.Reset(ctx, r); err != nil {
		t.Fatalf("reset through a: %v", err)
	}
	clock.Advance(100 * time.Millisecond)
	calls := cb.takes.Load()
	if d, err := b.Take(ctx, r); err != nil || d.Allowed || !d.Cached {
		t.Fatalf("take 100ms after the reset: %+v, %v; want b's cached refusal", d, err)
	}
	if n := cb.takes.Load(); n != calls {
		t.Errorf("backend takes %d, want %d (answered from the cache)", n, calls)
	}
	clock.Advance(150 * time.Millisecond)
	if d, err := b.Take(ctx, r); err != nil || !d.Allowed || d.Cached {
		t.Fatalf("take 250ms after the refusal: %+v, %v; want admitted (the backend was reset)", d, err)
	}
	// Without a reset, a refusal checked again is refused and cached anew.
	for {
		d, err := b.Take(ctx, r)
		if err != nil || d.Cached {
			t.Fatalf("until refused: %+v, %v; want admissions, then a backend refusal", d, err)
		}
		if !d.Allowed {
			break
		}
	}
	clock.Advance(250 * time.Millisecond)
	calls = cb.takes.Load()
	if d, err := b.Take(ctx, r); err != nil || d.Allowed || d.Cached {
		t.Fatalf("checked again: %+v, %v; want the backend's refusal", d, err)
	}
	if d, err := b.Take(ctx, r); err != nil || d.Allowed || !d.Cached {
		t.Fatalf("right after: %+v, %v; want the new cached refusal", d, err)
	}
	if n := cb.takes.Load(); n != calls+1 {
		t.Errorf("backend takes %d, want %d (one check)", n, calls+1)
	}
}

// A refusal cached for one cost answers that cost alone: a costlier
// request waits longer, so the backend decides it, and a client that
// waits the RetryAfter it was told is admitted. A cost above the
// capacity meets the backend's error, not a cached refusal.
func TestCachedRefusalAnswersItsCostAlone(t *testing.T) {
	m, clock := frozenMem(t)
	s := newHybrid(t, m, hybrid.Options{SyncInterval: time.Hour, Clock: clock.Now})
	lim := store.Limit{Rate: 10, Period: time.Second}
	ctx := context.Background()
	one := store.Request{Key: "k", Limits: []store.Limit{lim}, Cost: 1}
	five := store.Request{Key: "k", Limits: []store.Limit{lim}, Cost: 5}
	for i := 0; ; i++ {
		d, err := s.Take(ctx, one)
		if err != nil || i > 20 {
			t.Fatalf("take %d: %+v, %v", i, d, err)
		}
		if !d.Allowed {
			break
		}
	}
	d, err := s.Take(ctx, five)
	if err != nil || d.Allowed || d.Cached || d.RetryAfter < 500*time.Millisecond {
		t.Fatalf("cost 5 after a cached refusal of cost 1: %+v, %v; want the backend's refusal, at least 500ms", d, err)
	}
	clock.Advance(d.RetryAfter)
	if d, err := s.Take(ctx, five); err != nil || !d.Allowed {
		t.Errorf("cost 5 after waiting its RetryAfter: %+v, %v; want admitted", d, err)
	}
	if _, err := s.Take(ctx, store.Request{Key: "k", Limits: []store.Limit{lim}, Cost: 1000}); !errors.Is(err, store.ErrCostExceedsCapacity) {
		t.Errorf("cost 1000 of a capacity of 10: %v; want ErrCostExceedsCapacity", err)
	}
}

// During an outage, requests the lease does not cover are admitted from
// the remaining the key last learned, and the lease is part of it: one
// instance admits at most that remaining, whatever the mix of costs.
func TestOutageAdmitsAtMostTheRemaining(t *testing.T) {
	m, _ := frozenMem(t)
	fb := &faultyStore{Store: m}
	hclock := fakeclock.New(time.Time{})
	s := newHybrid(t, fb, hybrid.Options{SyncInterval: 300 * time.Millisecond, Clock: hclock.Now})
	lim := store.Limit{Rate: 10, Period: time.Second}
	ctx := context.Background()
	if d, err := s.Take(ctx, store.Request{Key: "k", Limits: []store.Limit{lim}, Cost: 1}); err != nil || !d.Allowed || d.Remaining != 9 {
		t.Fatalf("first take: %+v, %v", d, err)
	}
	fb.failing.Store(true)
	admitted := int64(0)
	for _, cost := range []int64{5, 4, 1, 1, 1, 1} {
		if d, err := s.Take(ctx, store.Request{Key: "k", Limits: []store.Limit{lim}, Cost: cost}); err == nil && d.Allowed {
			admitted += cost
		}
	}
	if admitted != 9 {
		t.Errorf("admitted %d units during the outage, want the 9 the key last learned", admitted)
	}
}
