package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// step is one call in a scripted scenario on the fake clock.
type step struct {
	at        time.Duration // clock offset from the scenario start
	op        string        // "take" (default) or "peek"
	cost      int64
	allowed   bool
	remaining int64
	reset     time.Duration
	retry     time.Duration
}

// runSteps plays steps against a clocked store and checks every decision.
func runSteps(t *testing.T, start int64, limits []store.Limit, steps []step) {
	t.Helper()
	s, clock := newClockedStore(t, start, false)
	ctx := context.Background()
	for i, st := range steps {
		clock.set(start + st.at.Microseconds())
		req := store.Request{Key: "scenario", Limits: limits, Cost: st.cost}
		var d store.Decision
		var err error
		if st.op == "peek" {
			d, err = s.Peek(ctx, req)
		} else {
			d, err = s.Take(ctx, req)
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if d.Allowed != st.allowed || d.Remaining != st.remaining || d.ResetAfter != st.reset || d.RetryAfter != st.retry {
			t.Fatalf("step %d at %s: got allowed %v remaining %d reset %s retry %s, want %v %d %s %s",
				i, st.at, d.Allowed, d.Remaining, d.ResetAfter, d.RetryAfter,
				st.allowed, st.remaining, st.reset, st.retry)
		}
		if d.Capacity != limits[d.Index].Capacity() || d.LimitID != limits[d.Index].ID() {
			t.Fatalf("step %d: got limit %d policy %q index %d, want the deciding limit's capacity and ID", i, d.Capacity, d.LimitID, d.Index)
		}
	}
}

// aligned is a fake start time on a boundary of every period used below.
const aligned = 1_767_225_600_000_000 // 2026-01-01T00:00:00Z

func TestAlgorithmScenarios(t *testing.T) {
	requireServer(t)
	const us = time.Microsecond
	min := time.Minute
	bucket := []step{
		{at: 0, allowed: true, remaining: 2, reset: 20 * time.Second},
		{at: 0, allowed: true, remaining: 1, reset: 40 * time.Second},
		{at: 0, op: "peek", allowed: true, remaining: 0, reset: min},
		{at: 0, allowed: true, remaining: 0, reset: min},
		{at: 0, allowed: false, remaining: 0, reset: min, retry: 20 * time.Second},
		// RetryAfter is exact to the microsecond; ResetAfter is rounded up
		// from float64 arithmetic, here one microsecond above the exact
		// 40.000001s.
		{at: 20*time.Second - us, allowed: false, remaining: 0, reset: 40*time.Second + 2*us, retry: us},
		{at: 20 * time.Second, allowed: true, remaining: 0, reset: min},
		{at: 20 * time.Second, cost: 2, allowed: false, remaining: 0, reset: min, retry: 40 * time.Second},
		{at: 30 * time.Second, allowed: false, remaining: 0, reset: 50 * time.Second, retry: 10 * time.Second},
		{at: 10 * min, cost: 3, allowed: true, remaining: 0, reset: min},
	}
	tests := []struct {
		name   string
		limits []store.Limit
		start  int64
		steps  []step
	}{
		{"gcra", []store.Limit{{Algorithm: store.GCRA, Rate: 3, Period: min}}, aligned + 1234, bucket},
		{"token bucket", []store.Limit{{Algorithm: store.TokenBucket, Rate: 3, Period: min}}, aligned + 1234, bucket},
		{"gcra burst", []store.Limit{{Algorithm: store.GCRA, Rate: 1, Period: time.Second, Burst: 3}}, aligned, []step{
			{at: 0, cost: 3, allowed: true, remaining: 0, reset: 3 * time.Second},
			{at: 500 * time.Millisecond, allowed: false, remaining: 0, reset: 2500 * time.Millisecond, retry: 500 * time.Millisecond},
			{at: time.Second, allowed: true, remaining: 0, reset: 3 * time.Second},
		}},
		{"token bucket with 6 per second keeps the whole burst", []store.Limit{{Algorithm: store.TokenBucket, Rate: 6, Period: time.Second}}, aligned + 7, []step{
			{allowed: true, remaining: 5, reset: 166667 * us},
			{allowed: true, remaining: 4, reset: 333334 * us},
			{allowed: true, remaining: 3, reset: 500000 * us},
			{allowed: true, remaining: 2, reset: 666667 * us},
			{allowed: true, remaining: 1, reset: 833334 * us},
			{allowed: true, remaining: 0, reset: time.Second},
			{allowed: false, remaining: 0, reset: time.Second, retry: 166667 * us},
		}},
		{"sliding window log", []store.Limit{{Algorithm: store.SlidingWindowLog, Rate: 3, Period: min}}, aligned, []step{
			{at: 0, allowed: true, remaining: 2, reset: min},
			{at: 10 * time.Second, allowed: true, remaining: 1, reset: min},
			{at: 20 * time.Second, allowed: true, remaining: 0, reset: min},
			// Oldest at 0 leaves the window at 60s; the newest at 80s.
			{at: 30 * time.Second, allowed: false, remaining: 0, reset: 50 * time.Second, retry: 30 * time.Second},
			// Cost 2 needs the second oldest (10s) gone: k = 3 + 2 - 3.
			{at: 30 * time.Second, cost: 2, allowed: false, remaining: 0, reset: 50 * time.Second, retry: 40 * time.Second},
			// The window excludes its lower bound: at exactly 60s the unit at 0 is out.
			{at: min - us, allowed: false, remaining: 0, reset: 20*time.Second + us, retry: us},
			{at: min, allowed: true, remaining: 0, reset: min},
			{at: 70*time.Second - us, op: "peek", allowed: false, remaining: 0, reset: 50*time.Second + us, retry: us},
			{at: 70 * time.Second, op: "peek", allowed: true, remaining: 0, reset: min},
		}},
		{"sliding window counter", []store.Limit{{Algorithm: store.SlidingWindowCounter, Rate: 10, Period: min}}, aligned, []step{
			{at: 30 * time.Second, cost: 5, allowed: true, remaining: 5, reset: 90 * time.Second},
			{at: 30 * time.Second, allowed: true, remaining: 4, reset: 90 * time.Second},
			// Next window, 15s in: est = 6·45/60 = 4.5.
			{at: 75 * time.Second, allowed: true, remaining: 4, reset: 105 * time.Second},
			// est = 5.5, cost 5 is over; prev's weight must fall to 4: e = 20s.
			{at: 75 * time.Second, cost: 5, allowed: false, remaining: 4, reset: 105 * time.Second, retry: 5 * time.Second},
			{at: 80*time.Second - us, cost: 5, op: "peek", allowed: false, remaining: 4, reset: 100*time.Second + us, retry: us},
			{at: 80 * time.Second, cost: 5, allowed: true, remaining: 0, reset: 100 * time.Second},
			// cur = 6 now: beyond this window; in the next one 6·(60-e)/60 + 10 <= 10 needs e = 60s.
			{at: 80 * time.Second, cost: 10, allowed: false, remaining: 0, reset: 100 * time.Second, retry: 100 * time.Second},
			{at: 180 * time.Second, cost: 10, allowed: true, remaining: 0, reset: 120 * time.Second},
		}},
		{"fixed window", []store.Limit{{Algorithm: store.FixedWindow, Rate: 3, Period: min}}, aligned, []step{
			{at: 10 * time.Second, allowed: true, remaining: 2, reset: 50 * time.Second},
			{at: 10 * time.Second, cost: 2, allowed: true, remaining: 0, reset: 50 * time.Second},
			{at: 20 * time.Second, allowed: false, remaining: 0, reset: 40 * time.Second, retry: 40 * time.Second},
			{at: min - us, allowed: false, remaining: 0, reset: us, retry: us},
			{at: min, cost: 3, allowed: true, remaining: 0, reset: min},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runSteps(t, tt.start, tt.limits, tt.steps) })
	}
}

func TestMultiLimit(t *testing.T) {
	requireServer(t)
	ctx := context.Background()
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, _ := newClockedStore(t, aligned, false)
			limits := []store.Limit{
				{Name: "wide", Algorithm: alg, Rate: 5, Period: time.Minute},
				{Name: "narrow", Algorithm: alg, Rate: 2, Period: time.Minute},
			}
			req := store.Request{Key: "multi", Limits: limits}
			wantRemaining := [][2]int64{{4, 1}, {3, 0}}
			for i, w := range wantRemaining {
				d, err := s.Take(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed || d.LimitID != "narrow" || d.Index != 1 {
					t.Fatalf("take %d: got allowed %v policy %q index %d, want the narrow limit deciding an admission", i, d.Allowed, d.LimitID, d.Index)
				}
				if len(d.PerLimit) != 2 || d.PerLimit[0].Remaining != w[0] || d.PerLimit[1].Remaining != w[1] {
					t.Fatalf("take %d: got per-limit %+v, want remaining %v", i, d.PerLimit, w)
				}
			}
			d, err := s.Take(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed || d.LimitID != "narrow" || d.Index != 1 || d.RetryAfter <= 0 {
				t.Fatalf("got %s, want a refusal by narrow", fmtDecision(d))
			}
			// All or nothing: the wide limit still has its 3 units.
			if d.PerLimit[0].Remaining != 3 {
				t.Fatalf("wide limit after a refused take: got remaining %d, want 3", d.PerLimit[0].Remaining)
			}
			p, err := s.Peek(ctx, store.Request{Key: "multi", Limits: limits, Cost: 1})
			if err != nil {
				t.Fatal(err)
			}
			if p.PerLimit[0].Remaining != 3 || p.PerLimit[1].Remaining != 0 {
				t.Fatalf("peek after refusal: got per-limit %+v, want 3 and 0", p.PerLimit)
			}
		})
	}
}

func TestDenyingLimitWithLongestRetry(t *testing.T) {
	requireServer(t)
	ctx := context.Background()
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, _ := newClockedStore(t, aligned+time.Minute.Microseconds()/2, false)
			req := store.Request{Key: "longest", Limits: []store.Limit{
				{Name: "minute", Algorithm: alg, Rate: 1, Period: time.Minute},
				{Name: "hour", Algorithm: alg, Rate: 1, Period: time.Hour},
				{Name: "second", Algorithm: alg, Rate: 1, Period: time.Second},
			}}
			if d, err := s.Take(ctx, req); err != nil || !d.Allowed || d.Index != 0 {
				t.Fatalf("first take: got %s, %v; want admitted, ties to the earliest limit", fmtDecision(d), err)
			}
			d, err := s.Take(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed || d.LimitID != "hour" || d.Index != 1 {
				t.Fatalf("got %s, want a refusal decided by hour", fmtDecision(d))
			}
			for i, l := range d.PerLimit {
				if l.Remaining != 0 {
					t.Fatalf("limit %d: got remaining %d, want 0", i, l.Remaining)
				}
			}
		})
	}
}

func TestRealClock(t *testing.T) {
	// The production scripts with Redis TIME: a refused client that waits
	// RetryAfter is admitted. The buckets refill one unit every 200 ms, so
	// their third take is refused unless the three took that long; the
	// windows are aligned to the clock, so a client takes until refused:
	// seven takes within one 400 ms period see at most one boundary, and
	// one of its sides then holds more than the limit of 2.
	s, _ := newStore(t, Options{})
	ctx := context.Background()
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			req := store.Request{Key: "real", Limits: []store.Limit{{Algorithm: alg, Rate: 2, Period: 400 * time.Millisecond}}}
			window := alg == store.SlidingWindowCounter || alg == store.FixedWindow
			takes := 3
			if window {
				takes = 7
			}
			var d store.Decision
			var err error
			for i := 0; i < takes; i++ {
				if d, err = s.Take(ctx, req); err != nil {
					t.Fatal(err)
				}
				if !window && d.Allowed != (i < 2) {
					t.Fatalf("take %d: got allowed %v, want %v", i, d.Allowed, i < 2)
				}
				if !d.Allowed {
					break
				}
			}
			if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 800*time.Millisecond {
				t.Fatalf("got %s, want a refusal with 0 < RetryAfter <= 800ms", fmtDecision(d))
			}
			time.Sleep(d.RetryAfter)
			if d, err = s.Take(ctx, req); err != nil || !d.Allowed {
				t.Fatalf("after waiting RetryAfter: got %s, %v; want admitted", fmtDecision(d), err)
			}
		})
	}
}
