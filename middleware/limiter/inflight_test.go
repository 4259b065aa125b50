package limiter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// noSlots is a store that keeps no in-flight caps.
type noSlots struct{ store.Store }

func TestInFlightOptionsNameTheField(t *testing.T) {
	mem := mustMem(t)
	lim := []store.Limit{{Rate: 10, Period: time.Second}}
	cases := []struct {
		name string
		s    store.Store
		o    Options
		want string
	}{
		{"negative max", mem, Options{InFlight: InFlight{Max: -1}}, "Options.InFlight.Max must be 1 to"},
		{"max above MaxSlots", mem, Options{InFlight: InFlight{Max: store.MaxSlots + 1}}, "Options.InFlight.Max must be 1 to"},
		{"lease without max", mem, Options{Limits: lim, InFlight: InFlight{Lease: time.Minute}}, "Options.InFlight.Max must be 1 to"},
		{"short lease", mem, Options{InFlight: InFlight{Max: 1, Lease: 500 * time.Millisecond}}, "Options.InFlight.Lease must be 1s to 24h0m0s"},
		{"long lease", mem, Options{InFlight: InFlight{Max: 1, Lease: 25 * time.Hour}}, "Options.InFlight.Lease must be"},
		{"store without caps", noSlots{mem}, Options{InFlight: InFlight{Max: 1}}, "Options.InFlight needs a store that keeps in-flight caps"},
		{"nothing to limit", mem, Options{}, "Options.Limits, Options.Tiers or Options.InFlight is required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.Name = "p"
			_, err := New(c.s, c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestInFlightCapAndRelease(t *testing.T) {
	var ev events
	var hooked []Outcome
	l := mustNew(t, mustMem(t), Options{Name: "p", Limits: []store.Limit{{Rate: 100, Period: time.Second}},
		InFlight: InFlight{Max: 2}, Observer: ev.observe,
		RefusalHook: func(_ context.Context, d Decision, _ string) { hooked = append(hooked, d.Outcome) }})
	ctx := context.Background()
	req := Request{Identity: "alice"}
	r1, d, err := l.Acquire(ctx, req)
	if err != nil || !d.Allowed || d.Remaining != 1 || d.Capacity != 2 {
		t.Fatalf("first: got %+v, %v; want admitted with 1 of 2 left", d, err)
	}
	r2, _, _ := l.Acquire(ctx, req)
	_, d, err = l.Acquire(ctx, req)
	if err != nil || d.Allowed || d.Outcome != OutcomeInFlight || d.RetryAfter != time.Second || d.Capacity != 2 || d.Remaining != 0 {
		t.Fatalf("third: got %+v, %v; want refused in flight, retry after 1s", d, err)
	}
	if len(ev.all) != 1 || ev.all[0].Outcome != OutcomeInFlight || len(hooked) != 1 {
		t.Fatalf("got events %v and hook calls %v, want one in_flight refusal each (admissions are reported by Decide)", ev.all, hooked)
	}
	if _, d, _ = l.Acquire(ctx, Request{Identity: "bob"}); !d.Allowed {
		t.Fatalf("another identity: got %+v, want admitted", d)
	}
	r1()
	r1() // a second release gives back nothing more
	r3, d, _ := l.Acquire(ctx, req)
	if !d.Allowed {
		t.Fatalf("after a release: got %+v, want admitted", d)
	}
	if _, d, _ = l.Acquire(ctx, req); d.Allowed {
		t.Fatalf("after a double release: got %+v, want refused", d)
	}
	r2()
	r3()
}

func TestInFlightAlone(t *testing.T) {
	var ev events
	l := mustNew(t, mustMem(t), Options{Name: "p", InFlight: InFlight{Max: 1}, Observer: ev.observe})
	ctx := context.Background()
	release, d, err := l.Acquire(ctx, Request{Identity: "a"})
	if err != nil || d.Outcome != OutcomeAllowed {
		t.Fatalf("got %+v, %v; want allowed", d, err)
	}
	defer release()
	if d, err := l.Decide(ctx, Request{Identity: "a"}); err != nil || d.Outcome != OutcomeUnlimited {
		t.Fatalf("Decide of a cap alone: got %+v, %v; want unlimited", d, err)
	}
	if len(ev.all) != 2 || ev.all[0].Outcome != OutcomeAllowed {
		t.Fatalf("got events %v, want the admission reported by Acquire", ev.all)
	}
}

func TestInFlightWithoutCapAdmits(t *testing.T) {
	l := mustNew(t, mustMem(t), Options{Name: "p", Limits: []store.Limit{{Rate: 1, Period: time.Second}}})
	release, d, err := l.Acquire(context.Background(), Request{Identity: "a"})
	release()
	if err != nil || !d.Allowed || d.Outcome != "" {
		t.Fatalf("got %+v, %v; want admitted without an outcome", d, err)
	}
	if _, _, err := l.Acquire(context.Background(), Request{}); err == nil {
		t.Fatal("empty identity: got nil error")
	}
}

// TestInFlightRetryAfterFollowsHoldTimes: the estimate is the average
// hold time, at least a second, at most the lease.
func TestInFlightRetryAfterFollowsHoldTimes(t *testing.T) {
	sc := newSlots(InFlight{Max: 1, Lease: 10 * time.Second}, false)
	if got := sc.retryAfter(); got != time.Second {
		t.Fatalf("nothing observed: got %s, want 1s", got)
	}
	sc.observeHold(4 * time.Second)
	if got := sc.retryAfter(); got != 4*time.Second {
		t.Fatalf("one hold of 4s: got %s, want 4s", got)
	}
	sc.observeHold(12 * time.Second)
	if got := sc.retryAfter(); got != 5*time.Second {
		t.Fatalf("then 12s: got %s, want 5s", got)
	}
	for range 100 {
		sc.observeHold(time.Hour)
	}
	if got := sc.retryAfter(); got != 10*time.Second {
		t.Fatalf("long holds: got %s, want the lease, 10s", got)
	}
}

// TestInFlightRenewalKeepsSlot: a request held past its lease keeps its
// slot because the limiter renews it; once it is released, the renewer
// stops.
func TestInFlightRenewalKeepsSlot(t *testing.T) {
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := mustNew(t, st, Options{Name: "p", InFlight: InFlight{Max: 1, Lease: time.Second}})
	ctx := context.Background()
	release, _, _ := l.Acquire(ctx, Request{Identity: "a"})
	time.Sleep(1600 * time.Millisecond)
	ok, _, err := st.(store.SlotStore).Acquire(ctx, store.Slot{Key: StoreKey("p", "", "a"), ID: "other"}, 1, time.Second)
	if err != nil || ok {
		t.Fatalf("after 1.6 leases: got acquired %t, %v; want the renewed slot still held", ok, err)
	}
	release()
	if _, d, _ := l.Acquire(ctx, Request{Identity: "a"}); !d.Allowed {
		t.Fatalf("after the release: got %+v, want admitted", d)
	}
}

func TestInFlightNotStacked(t *testing.T) {
	mem := mustMem(t)
	lim := []store.Limit{{Rate: 10, Period: time.Second}}
	a := mustNew(t, mem, Options{Name: "a", Limits: lim})
	b := mustNew(t, mem, Options{Name: "b", Limits: lim, InFlight: InFlight{Max: 2}})
	if _, err := NewStack(a, b); err == nil || !strings.Contains(err.Error(), `limiter 1 ("b") has an in-flight cap`) {
		t.Fatalf("got %v, want the stack refused naming limiter 1", err)
	}
}

// unsupportedSlots keeps caps in name only, as a hybrid store over a
// backend without them does.
type unsupportedSlots struct{ store.Store }

func (unsupportedSlots) Acquire(context.Context, store.Slot, int64, time.Duration) (bool, int64, error) {
	return false, 0, errors.ErrUnsupported
}
func (unsupportedSlots) Release(context.Context, store.Slot) error { return errors.ErrUnsupported }
func (unsupportedSlots) Renew(context.Context, []store.Slot, time.Duration) (int, error) {
	return 0, errors.ErrUnsupported
}

// TestInFlightUnsupportedIsAMistake: a store that turns out to keep no
// caps is a configuration mistake (rejected), never a store failure that
// would open the breaker and fail open.
func TestInFlightUnsupportedIsAMistake(t *testing.T) {
	l := mustNew(t, unsupportedSlots{mustMem(t)}, Options{Name: "p", InFlight: InFlight{Max: 1}, BreakerThreshold: 1})
	for range 3 {
		_, d, err := l.Acquire(context.Background(), Request{Identity: "a"})
		if d.Outcome != OutcomeRejected || !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("got %s, %v; want rejected wrapping ErrUnsupported", d.Outcome, err)
		}
	}
	if l.breaker.down() {
		t.Fatal("the breaker opened on a configuration mistake")
	}
}
