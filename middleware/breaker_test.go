package middleware

import (
	"context"
	"errors"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

var errDown = &store.BackendError{Op: "take", Kind: "connection", Err: errors.New("down")}

// A request deadline that runs out is not a client that went away: the
// failure mode must still answer, and the store is not blamed.
func TestRequestDeadlineDoesNotOpenBreaker(t *testing.T) {
	s := &funcStore{take: func(ctx context.Context, _ store.Request) (store.Decision, error) {
		<-ctx.Done()
		return store.Decision{}, &store.BackendError{Op: "take", Kind: "timeout", Err: ctx.Err()}
	}}
	lim := mustNew(t, s, constKey("k"), store.PerMinute(1), Options{
		FailureMode:      limiter.FailClosed,
		BreakerThreshold: 1,
		BreakerCooldown:  time.Hour,
	})
	h := lim.Handler(okHandler)
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil).WithContext(ctx))
		cancel()
		if rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("status: got %d, want 503 from the failure mode", rec.Code)
		}
	}
	if got := s.calls.Load(); got != 3 {
		t.Fatalf("store calls: got %d, want 3 (request deadlines must not open the breaker)", got)
	}
}

// A cancelled client gets nothing written and does not count as a store
// failure.
func TestCanceledClientDoesNotTripBreaker(t *testing.T) {
	s := &funcStore{take: func(ctx context.Context, _ store.Request) (store.Decision, error) {
		<-ctx.Done()
		return store.Decision{}, ctx.Err()
	}}
	obs := &recObserver{}
	lim := mustNew(t, s, constKey("k"), store.PerMinute(1), Options{
		BreakerThreshold: 1,
		BreakerCooldown:  time.Hour,
		Observer:         obs.Observe,
	})
	h := lim.Handler(okHandler)
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(5 * time.Millisecond); cancel() }()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil).WithContext(ctx))
	}
	if got := s.calls.Load(); got != 3 {
		t.Fatalf("store calls: got %d, want 3", got)
	}
	for _, o := range obs.outcomes() {
		if o != limiter.OutcomeCanceled {
			t.Fatalf("outcome: got %s, want canceled", o)
		}
	}
}

// Regression: a panicking probe left the breaker half-open forever.
func TestBreakerProbePanicReleasesProbe(t *testing.T) {
	var mode atomic.Int32 // 0 fail, 1 panic, 2 ok
	s := &funcStore{take: func(context.Context, store.Request) (store.Decision, error) {
		switch mode.Load() {
		case 0:
			return store.Decision{}, errDown
		case 1:
			panic("store bug")
		}
		return store.Decision{Allowed: true, Capacity: 1, Remaining: 1}, nil
	}}
	clock := time.Unix(1000, 0)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	lim := mustNew(t, s, constKey("k"), store.PerMinute(100), Options{
		BreakerThreshold: 1,
		BreakerCooldown:  time.Second,
		Clock:            now,
	})
	h := lim.Handler(okHandler)
	do(h) // opens
	advance(2 * time.Second)
	mode.Store(1)
	func() {
		defer func() { _ = recover() }()
		do(h) // the probe panics
	}()
	mode.Store(2)
	before := s.calls.Load()
	rec := do(h)
	if s.calls.Load() != before+1 || rec.Header().Get("X-Ratelimit-Limit") != "1" {
		t.Fatalf("after a panicking probe the next request did not probe the store (calls %d -> %d)", before, s.calls.Load())
	}
}

// Regression: an old request's outcome released the probe slot, letting a
// second probe run concurrently.
func TestBreakerSingleProbe(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	gate := make(chan struct{})
	var inFlight, maxInFlight atomic.Int32
	s := &funcStore{take: func(ctx context.Context, _ store.Request) (store.Decision, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		if failing.Load() {
			return store.Decision{}, errDown
		}
		<-gate
		return store.Decision{Allowed: true, Capacity: 1, Remaining: 1}, nil
	}}
	clock := time.Unix(1000, 0)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	lim := mustNew(t, s, constKey("k"), store.PerMinute(100), Options{
		BreakerThreshold: 1,
		BreakerCooldown:  time.Second,
		Clock:            now,
	})
	h := lim.Handler(okHandler)
	do(h) // opens
	mu.Lock()
	clock = clock.Add(2 * time.Second)
	mu.Unlock()
	failing.Store(false)
	maxInFlight.Store(0)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { do(h) })
	}
	time.Sleep(50 * time.Millisecond)
	close(gate)
	wg.Wait()
	if got := maxInFlight.Load(); got != 1 {
		t.Fatalf("concurrent store calls in half-open: got %d, want 1 probe", got)
	}
}

// The breaker reports the store down for as long as it skips it.
func TestStoreDownWhileSkipping(t *testing.T) {
	s := &funcStore{take: func(context.Context, store.Request) (store.Decision, error) { return store.Decision{}, errDown }}
	obs := &recObserver{}
	clock := time.Unix(1000, 0)
	lim := mustNew(t, s, constKey("k"), store.PerMinute(1), Options{
		BreakerThreshold: 1,
		BreakerCooldown:  time.Second,
		Observer:         obs.Observe,
		Clock:            func() time.Time { return clock },
	})
	h := lim.Handler(okHandler)
	do(h)
	clock = clock.Add(10 * time.Second) // past the cooldown
	do(h)                               // the probe fails
	do(h)                               // skipped
	for i, e := range obs.events {
		if !e.StoreDown {
			t.Errorf("event %d (%s, skipped %v): StoreDown false, want true", i, e.Outcome, e.Skipped)
		}
	}
	if last := obs.events[len(obs.events)-1]; !last.Skipped || !errors.Is(last.Err, store.ErrStoreUnavailable) {
		t.Errorf("skipped event: got skipped %v err %v, want a skip wrapping ErrStoreUnavailable", last.Skipped, last.Err)
	}
}

func TestBreakerThresholdBounded(t *testing.T) {
	_, err := New(&funcStore{}, constKey("k"), store.PerMinute(1), Options{BreakerThreshold: 1 << 31, BreakerCooldown: time.Second})
	if err == nil {
		t.Fatal("got nil error for a threshold that overflows, want one")
	}
}

func TestLocalFallback(t *testing.T) {
	var down atomic.Bool
	mem := mustMem(t)
	s := &funcStore{take: func(ctx context.Context, req store.Request) (store.Decision, error) {
		if down.Load() {
			return store.Decision{}, errDown
		}
		return mem.Take(ctx, req)
	}}
	obs := &recObserver{}
	lim := mustNew(t, s, constKey("k"), store.PerMinute(2), Options{
		Fallback:    mustMem(t),
		FailureMode: limiter.FailClosed,
		Observer:    obs.Observe,
	})
	h := lim.Handler(okHandler)
	down.Store(true)
	var got []int
	for range 3 {
		got = append(got, do(h).Code)
	}
	if got[0] != 200 || got[1] != 200 || got[2] != 429 {
		t.Fatalf("statuses with the store down: got %v, want [200 200 429] from the local fallback", got)
	}
	for _, e := range obs.events {
		if !e.Fallback || !errors.Is(e.Err, errDown) {
			t.Fatalf("event %+v: want Fallback with the main store's error", e)
		}
	}
}

// Regression: a bounded store refusing new keys (a capacity error) opened
// the breaker, so a flood of new keys switched limiting off for every
// client, including those already limited.
func TestCapacityErrorsDoNotOpenBreaker(t *testing.T) {
	mem := mustMem(t)
	s := &funcStore{take: func(ctx context.Context, req store.Request) (store.Decision, error) {
		if strings.Contains(req.Key, "flood-") {
			return store.Decision{}, &store.BackendError{Op: "take", Kind: "capacity", Err: store.ErrTooManyKeys}
		}
		return mem.Take(ctx, req)
	}}
	key := func(r *http.Request) (string, error) { return r.Header.Get("X-Client"), nil }
	lim := mustNew(t, s, key, store.PerMinute(1), Options{BreakerThreshold: 2, BreakerCooldown: time.Hour})
	h := lim.Handler(okHandler)
	send := func(client string) int {
		return serveReq(h, request("GET", "/", "192.0.2.1:1", "X-Client", client)).Code
	}
	send("victim-of-its-own-limit")
	if code := send("victim-of-its-own-limit"); code != 429 {
		t.Fatalf("second request: got %d, want 429", code)
	}
	for i := range 40 {
		send("flood-" + strconv.Itoa(i))
	}
	if code := send("victim-of-its-own-limit"); code != 429 {
		t.Fatalf("after a key flood: got %d, want 429 (limiting must go on for existing keys)", code)
	}
}
