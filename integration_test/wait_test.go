package integration

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

// waitLimiters returns n limiters of the policy "wait", each on its own
// Redis client and store, sharing one key prefix: 5 per 500ms (a unit
// every 100ms), waiting up to a second for a turn.
func waitLimiters(t *testing.T, n int) []*limiter.Limiter {
	t.Helper()
	srv := sharedRedis(t)
	prefix := randomPrefix(t)
	out := make([]*limiter.Limiter, n)
	for i := range out {
		s := newStore(t, newClient(t, srv), prefix)
		l, err := limiter.New(s, limiter.Options{Name: "wait", Limits: []store.Limit{{Rate: 5, Period: 500 * time.Millisecond}}, MaxWait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = l
	}
	return out
}

// TestWaitersAcrossInstances: 40 callers of one client wait for their
// turn at once through 4 limiters on one Redis, under 5 per 500ms with a
// MaxWait of a second: 15 are admitted (5 at once, 10 in turn; 16 if the
// burst outlasts a unit), the rest refused, and the admitted ones proceed
// as the limit allows: no 5+k of them within less than k·100ms after the
// first of them (to a scheduling slack).
func TestWaitersAcrossInstances(t *testing.T) {
	ls := waitLimiters(t, 4)
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		proceed  []time.Time
		refusals int
	)
	for i := range 40 {
		wg.Go(func() {
			d, err := ls[i%len(ls)].Wait(context.Background(), limiter.Request{Identity: "client-1"})
			at := time.Now()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("Wait: %v", err)
			case d.Allowed:
				proceed = append(proceed, at)
			default:
				refusals++
			}
		})
	}
	wg.Wait()
	if len(proceed) < 15 || len(proceed) > 16 || len(proceed)+refusals != 40 {
		t.Fatalf("got %d admitted and %d refused, want 15 (or 16) and the rest", len(proceed), refusals)
	}
	slices.SortFunc(proceed, func(a, b time.Time) int { return a.Compare(b) })
	const unit, slack = 100 * time.Millisecond, 30 * time.Millisecond
	for i := range proceed {
		for j := i + 5; j < len(proceed); j++ {
			if span, want := proceed[j].Sub(proceed[i]), time.Duration(j-i-4)*unit; span < want-slack {
				t.Errorf("admitted callers %d to %d (%d) proceeded within %s, want >= %s", i, j, j-i+1, span, want)
			}
		}
	}
}

// TestCanceledWaitAcrossInstances: a caller that stops waiting on one
// instance gives its place back: another instance's next caller gets the
// turn it had.
func TestCanceledWaitAcrossInstances(t *testing.T) {
	ls := waitLimiters(t, 3)
	ctx := context.Background()
	for range 5 {
		if d, err := ls[0].Wait(ctx, limiter.Request{Identity: "client-2"}); err != nil || !d.Allowed || d.Delay != 0 {
			t.Fatalf("burst: got %+v, %v, want admitted at once", d.Decision, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, cancel)
	if d, err := ls[1].Wait(cctx, limiter.Request{Identity: "client-2"}); !errors.Is(err, context.Canceled) || d.Outcome != limiter.OutcomeCanceled {
		t.Fatalf("canceled waiter: got %+v (%s), %v, want canceled", d.Decision, d.Outcome, err)
	}
	start := time.Now()
	d, err := ls[2].Wait(ctx, limiter.Request{Identity: "client-2"})
	if err != nil || !d.Allowed || d.Delay > 90*time.Millisecond || time.Since(start) < d.Delay {
		t.Errorf("next caller on another instance: got Delay %s, %+v, %v, want admitted after at most 80ms (the canceled caller's turn), not 180ms", d.Delay, d.Decision, err)
	}
}
