package limiter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// TestPartial: a partial request takes what fits and reports it in
// Granted, is refused once nothing fits, and is refused as misused with
// options it cannot take.
func TestPartial(t *testing.T) {
	ctx := context.Background()
	l := mustNew(t, mustMem(t), Options{Name: "p", Limits: []store.Limit{{Algorithm: store.FixedWindow, Rate: 10, Period: time.Hour}}})
	d, err := l.Decide(ctx, Request{Identity: "a", Cost: 7, Partial: true})
	if err != nil || !d.Allowed || d.Granted != 7 {
		t.Fatalf("first: got allowed %t granted %d err %v, want 7", d.Allowed, d.Granted, err)
	}
	d, err = l.Decide(ctx, Request{Identity: "a", Cost: 7, Partial: true})
	if err != nil || !d.Allowed || d.Granted != 3 || d.Outcome != OutcomeAllowed {
		t.Fatalf("second: got allowed %t granted %d outcome %v err %v, want 3", d.Allowed, d.Granted, d.Outcome, err)
	}
	d, err = l.Decide(ctx, Request{Identity: "a", Cost: 7, Partial: true})
	if err != nil || d.Allowed || d.Outcome != OutcomeLimited || d.RetryAfter <= 0 {
		t.Fatalf("third: got allowed %t outcome %v retry %v err %v, want a refusal with a RetryAfter", d.Allowed, d.Outcome, d.RetryAfter, err)
	}
	for name, o := range map[string]Options{
		"CountDenied": {Name: "c", Limits: []store.Limit{{Algorithm: store.FixedWindow, Rate: 10, Period: time.Hour}}, CountDenied: true},
		"Overrides":   {Name: "o", Limits: []store.Limit{{Rate: 10, Period: time.Hour}}, Overrides: true},
	} {
		l := mustNew(t, mustMem(t), o)
		if _, err := l.Decide(ctx, Request{Identity: "a", Cost: 2, Partial: true}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Partial with %s: got %v, want an error naming it", name, err)
		}
	}
	if _, err := l.Decide(ctx, Request{Identity: "b", Cost: 2, Charged: 1, Partial: true}); err == nil || !strings.Contains(err.Error(), "Charged") {
		t.Errorf("Partial with Charged: got %v, want an error naming it", err)
	}
}

// TestSettle: an estimate reserved by Decide is corrected by Settle in
// both directions, once, also with a canceled context; a refusal settles
// nothing.
func TestSettle(t *testing.T) {
	l := mustNew(t, mustMem(t), Options{Name: "s", Limits: []store.Limit{{Algorithm: store.TokenBucket, Rate: 100, Period: time.Hour}}})
	ctx := context.Background()
	remaining := func() int64 {
		t.Helper()
		d, err := l.Decide(ctx, Request{Identity: "a", Peek: true})
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining + 1 // a peek of cost 1 reports what is left after it
	}
	d, err := l.Decide(ctx, Request{Identity: "a", Cost: 10})
	if err != nil || !d.Allowed {
		t.Fatalf("Decide: %v", err)
	}
	if err := l.Settle(ctx, &d, 25); err != nil {
		t.Fatalf("Settle 25: %v", err)
	}
	if got := remaining(); got != 75 {
		t.Fatalf("after an estimate of 10 settled at 25: remaining %d, want 75", got)
	}
	if err := l.Settle(ctx, &d, 0); err != nil {
		t.Fatalf("second Settle: %v", err)
	}
	if got := remaining(); got != 75 {
		t.Fatalf("a decision settles once: remaining %d, want 75", got)
	}
	// A client gone: the canceled context does not stop the refund.
	d, _ = l.Decide(ctx, Request{Identity: "a", Cost: 20})
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Settle(gone, &d, 5); err != nil {
		t.Fatalf("Settle with a canceled context: %v", err)
	}
	if got := remaining(); got != 70 {
		t.Fatalf("after an estimate of 20 settled at 5: remaining %d, want 70", got)
	}
	// A partial grant settles against the units granted.
	d, _ = l.Decide(ctx, Request{Identity: "a", Cost: 90, Partial: true})
	if d.Granted != 70 {
		t.Fatalf("partial: granted %d, want 70", d.Granted)
	}
	if err := l.Settle(ctx, &d, 60); err != nil {
		t.Fatal(err)
	}
	if got := remaining(); got != 10 {
		t.Fatalf("after a grant of 70 settled at 60: remaining %d, want 10", got)
	}
	// A refusal took nothing and settles nothing.
	d, _ = l.Decide(ctx, Request{Identity: "a", Cost: 50})
	if d.Allowed {
		t.Fatal("cost 50 with 10 left: admitted")
	}
	if err := l.Settle(ctx, &d, 0); err != nil || remaining() != 10 {
		t.Fatalf("settling a refusal: err %v remaining %d, want nil and 10", err, remaining())
	}
	if err := l.Settle(ctx, &d, -1); !errors.Is(err, store.ErrInvalidRequest) {
		t.Fatalf("negative actual cost: got %v, want ErrInvalidRequest", err)
	}
}

// TestSettleWindow: a window algorithm's decision settles when it was a
// reservation (Request.Reserve), in both directions; without Reserve,
// Settle refuses it with ErrInvalidRequest and the estimate stands.
func TestSettleWindow(t *testing.T) {
	for _, alg := range []store.Algorithm{store.FixedWindow, store.SlidingWindowCounter, store.SlidingWindowLog} {
		t.Run(alg.String(), func(t *testing.T) {
			l := mustNew(t, mustMem(t), Options{Name: "w", Limits: []store.Limit{{Algorithm: alg, Rate: 100, Period: time.Hour}}})
			ctx := context.Background()
			left := func() int64 {
				t.Helper()
				d, err := l.Decide(ctx, Request{Identity: "a", Peek: true})
				if err != nil {
					t.Fatal(err)
				}
				return d.Remaining + 1
			}
			d, err := l.Decide(ctx, Request{Identity: "a", Cost: 10, Reserve: true})
			if err != nil || !d.Allowed || d.Taken.IsZero() {
				t.Fatalf("Decide with Reserve: got allowed %t taken %v err %v, want an admission with its time", d.Allowed, d.Taken, err)
			}
			if err := l.Settle(ctx, &d, 25); err != nil {
				t.Fatalf("Settle 25: %v", err)
			}
			d, _ = l.Decide(ctx, Request{Identity: "a", Cost: 10, Reserve: true})
			if err := l.Settle(ctx, &d, 4); err != nil {
				t.Fatalf("Settle 4: %v", err)
			}
			if got := left(); got != 71 {
				t.Fatalf("after estimates of 10 settled at 25 and 4: %d left, want 71", got)
			}
			d, _ = l.Decide(ctx, Request{Identity: "a", Cost: 10})
			if err := l.Settle(ctx, &d, 0); !errors.Is(err, store.ErrInvalidRequest) {
				t.Fatalf("Settle without Reserve: got %v, want ErrInvalidRequest", err)
			}
			if got := left(); got != 61 {
				t.Fatalf("after a refused settlement: %d left, want 61", got)
			}
		})
	}
}
