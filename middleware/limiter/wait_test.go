package limiter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// waitLimit admits one request per 100ms.
var waitLimit = store.Limit{Rate: 1, Period: 100 * time.Millisecond}

// slowLimit admits one request per 2s: a waiter's turn is far enough off
// that "at once" and "at its turn" stay apart by a second even when the
// test's goroutine is held up for a while (a busy CI machine).
var slowLimit = store.Limit{Rate: 1, Period: 2 * time.Second}

// TestWaitWaitsItsTurn: of one per 100ms, with two limiters of one policy
// on one store, the second request waits about 100ms and is admitted with
// Delay, nothing remaining and the reset counted from then, which the
// observer sees at the decision; Decide never waits: at that moment it
// refuses.
func TestWaitWaitsItsTurn(t *testing.T) {
	st := mustMem(t)
	var ev events
	a := mustNew(t, st, Options{Name: "api", Limits: []store.Limit{waitLimit}, MaxWait: 250 * time.Millisecond, Observer: ev.observe})
	b := mustNew(t, st, Options{Name: "api", Limits: []store.Limit{waitLimit}, MaxWait: 250 * time.Millisecond})
	ctx := context.Background()
	first := time.Now()
	if d, err := a.Wait(ctx, Request{Identity: "alice"}); err != nil || !d.Allowed || d.Delay != 0 {
		t.Fatalf("first: got %+v, %v, want admitted at once", d.Decision, err)
	}
	start := time.Now()
	d, err := b.Wait(ctx, Request{Identity: "alice"})
	took := time.Since(start)
	// The second's turn is 100ms after the first was admitted, which was
	// no earlier than first; the second asked no later than start+took.
	// So its Delay is at least what is left of those 100ms then (nearly
	// all of them, unless this goroutine was held up meanwhile).
	least := 100*time.Millisecond - start.Add(took).Sub(first) - time.Millisecond
	switch {
	case err != nil || !d.Allowed || d.Outcome != OutcomeAllowed:
		t.Fatalf("second: got %+v (%s), %v, want admitted", d.Decision, d.Outcome, err)
	case d.Delay <= 0 || d.Delay < least || d.Delay > 100*time.Millisecond || took < d.Delay:
		t.Errorf("second: got Delay %s after %s, want between %s and 100ms, waited", d.Delay, took, max(least, 0))
	case d.Remaining != 0 || d.ResetAfter > 101*time.Millisecond:
		t.Errorf("second: got Remaining %d, ResetAfter %s, want 0 and about 100ms from its turn", d.Remaining, d.ResetAfter)
	}
	if d, err := a.Decide(ctx, Request{Identity: "alice"}); err != nil || d.Allowed {
		t.Errorf("Decide at the second's turn: got %+v, %v, want refused (Decide never waits)", d.Decision, err)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.all) != 2 || ev.all[0].Delay != 0 || ev.all[1].Outcome != OutcomeLimited {
		t.Errorf("observer of the first limiter: got %d events, want the admission at once and the refusal", len(ev.all))
	}
}

// waitingFor starts a Wait of alice on l after exhausting her quota and
// returns what it answers and how long it took.
func waitingFor(t *testing.T, l *Limiter, ctx context.Context) (Decision, time.Duration, error) {
	t.Helper()
	if d, err := l.Wait(context.Background(), Request{Identity: "alice"}); err != nil || !d.Allowed {
		t.Fatalf("first: got %+v, %v, want admitted", d.Decision, err)
	}
	start := time.Now()
	d, err := l.Wait(ctx, Request{Identity: "alice"})
	return d, time.Since(start), err
}

// TestWaitCanceledGivesPlaceBack: a waiter whose context is canceled
// returns at once with OutcomeCanceled and the context's error, and its
// place is given back: the next request's turn is the one it had.
func TestWaitCanceledGivesPlaceBack(t *testing.T) {
	l := mustNew(t, mustMem(t), Options{Limits: []store.Limit{slowLimit}, MaxWait: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	// The cancellation comes 20ms after now, which is before the waiter
	// starts (waitingFor first admits a request): its wait is shorter.
	canceledAt := time.Now().Add(20 * time.Millisecond)
	time.AfterFunc(20*time.Millisecond, cancel)
	d, took, err := waitingFor(t, l, ctx)
	if !errors.Is(err, context.Canceled) || d.Allowed || d.Outcome != OutcomeCanceled || time.Now().Before(canceledAt) || took > time.Second {
		t.Fatalf("canceled waiter: got %+v (%s), %v after %s, want refused, canceled, at the cancellation (its turn was 2s off)", d.Decision, d.Outcome, err, took)
	}
	p, err := l.Decide(context.Background(), Request{Identity: "alice", Peek: true})
	if err != nil || p.Allowed || p.RetryAfter > 2*time.Second {
		t.Errorf("after the canceled wait: got %+v, %v, want the first's refusal, RetryAfter at most 2s, not 4s (the place given back)", p.Decision, err)
	}
}

// TestWaitDeadlineBeforeTurn: a waiter whose deadline falls before its
// turn gives its place back at once.
func TestWaitDeadlineBeforeTurn(t *testing.T) {
	l := mustNew(t, mustMem(t), Options{Limits: []store.Limit{slowLimit}, MaxWait: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	d, took, err := waitingFor(t, l, ctx)
	if !errors.Is(err, context.DeadlineExceeded) || d.Allowed || d.Outcome != OutcomeCanceled || took > 500*time.Millisecond {
		t.Fatalf("waiter with a deadline 1s off and its turn 2s off: got %+v (%s), %v after %s, want canceled at once, not at the deadline", d.Decision, d.Outcome, err, took)
	}
	p, err := l.Decide(context.Background(), Request{Identity: "alice", Peek: true})
	if err != nil || p.RetryAfter > 2*time.Second {
		t.Errorf("after it: got %+v, %v, want RetryAfter at most 2s, not 4s (the place given back)", p.Decision, err)
	}
}

// TestWaitWithoutMaxWaitIsDecide: without MaxWait, Wait refuses at once.
func TestWaitWithoutMaxWaitIsDecide(t *testing.T) {
	l := mustNew(t, mustMem(t), Options{Limits: []store.Limit{slowLimit}})
	d, took, err := waitingFor(t, l, context.Background())
	if err != nil || d.Allowed || d.Outcome != OutcomeLimited || took > time.Second {
		t.Errorf("got %+v (%s), %v after %s, want refused at once", d.Decision, d.Outcome, err, took)
	}
}

// plainStore hides every capability of the store it wraps.
type plainStore struct{ store.Store }

// TestMaxWaitOptions: a negative MaxWait, window limits, overrides or a
// store that cannot wait are refused at construction, naming the field.
func TestMaxWaitOptions(t *testing.T) {
	st := mustMem(t)
	fixed := store.Limit{Algorithm: store.FixedWindow, Rate: 1, Period: time.Second}
	for _, tc := range []struct {
		name string
		s    store.Store
		o    Options
		want string
	}{
		{"negative", st, Options{Limits: []store.Limit{waitLimit}, MaxWait: -time.Second}, "Options.MaxWait must be >= 0"},
		{"fixed window", st, Options{Limits: []store.Limit{fixed}, MaxWait: time.Second}, "Options.Limits[0] is fixed_window"},
		{"tier", st, Options{Tiers: []Tier{{Name: "a", Limits: []store.Limit{waitLimit}}, {Name: "b", Limits: []store.Limit{fixed}}}, MaxWait: time.Second}, "Options.Tiers[1].Limits[0] is fixed_window"},
		{"overrides", st, Options{Limits: []store.Limit{waitLimit}, MaxWait: time.Second, Overrides: true}, "Options.MaxWait cannot be combined with Options.Overrides"},
		{"store", plainStore{st}, Options{Name: "p", Limits: []store.Limit{waitLimit}, MaxWait: time.Second}, "store.Waiter"},
		{"fallback", st, Options{Name: "f", Limits: []store.Limit{waitLimit}, MaxWait: time.Second, Fallback: plainStore{mustMem(t)}}, "store.Waiter"},
	} {
		_, err := New(tc.s, tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
