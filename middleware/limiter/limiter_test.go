package limiter

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func mustMem(t *testing.T) store.Store {
	t.Helper()
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func mustNew(t *testing.T, s store.Store, o Options) *Limiter {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quiet
	}
	l, err := New(s, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// events records what an observer is told.
type events struct {
	mu  sync.Mutex
	all []Event
	// ctxs holds the value of each event's context under ctxKey{}.
	ctxs []any
}

// ctxKey marks the context a test decides with, so that the observer's
// can be recognized.
type ctxKey struct{}

func (e *events) observe(ctx context.Context, ev Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.ctxs = append(e.ctxs, ctx.Value(ctxKey{}))
	e.mu.Unlock()
}

func (e *events) outcomes() []Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Outcome
	for _, ev := range e.all {
		out = append(out, ev.Outcome)
	}
	return out
}

// failingStore fails every call as a dead backend does.
type failingStore struct{}

func (failingStore) fail() error {
	return &store.BackendError{Op: "take", Kind: "connection", Err: errors.New("connection refused")}
}
func (s failingStore) Take(context.Context, store.Request) (store.Decision, error) {
	return store.Decision{}, s.fail()
}
func (s failingStore) Peek(context.Context, store.Request) (store.Decision, error) {
	return store.Decision{}, s.fail()
}
func (s failingStore) Reset(context.Context, store.Request) error { return s.fail() }

// The decision core must serve a gRPC interceptor or a queue consumer
// without pulling in net/http or the HTTP packages of this module.
func TestCoreDoesNotImportHTTP(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case dep == "net/http",
			dep == "github.com/ratekeeper/ratekeeper/middleware",
			dep == "github.com/ratekeeper/ratekeeper/keyfunc",
			strings.HasPrefix(dep, "net/http/"):
			t.Errorf("package limiter depends on %s", dep)
		}
	}
	if !strings.Contains(string(out), "github.com/ratekeeper/ratekeeper/store\n") {
		t.Fatalf("go list -deps lists no store package; got:\n%s", out)
	}
}

// Decide answers every case with a Decision whose Outcome says what
// happened, the same Outcome the observer is told.
func TestDecideOutcomes(t *testing.T) {
	var ev events
	l := mustNew(t, mustMem(t), Options{Name: "api", Observer: ev.observe, Tiers: []Tier{
		{Name: "free", Limits: []store.Limit{store.PerMinute(2)}},
		{Name: "vip", Unlimited: true},
		{Name: "banned", Suspended: true},
	}})
	ctx := context.WithValue(context.Background(), ctxKey{}, "request")
	for i, want := range []struct {
		allowed bool
		outcome Outcome
		left    int64
	}{{true, OutcomeAllowed, 1}, {true, OutcomeAllowed, 0}, {false, OutcomeLimited, 0}} {
		d, err := l.Decide(ctx, Request{Tier: "free", Identity: "alice"})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if d.Allowed != want.allowed || d.Outcome != want.outcome || d.Remaining != want.left || d.Capacity != 2 {
			t.Fatalf("request %d: got allowed %v outcome %s remaining %d capacity %d, want %v %s %d 2", i, d.Allowed, d.Outcome, d.Remaining, d.Capacity, want.allowed, want.outcome, want.left)
		}
		if d.Policy != "api/free" || d.Tier != "free" || d.Headers == nil || len(d.Limits) != 1 || d.Reset.IsZero() {
			t.Fatalf("request %d: got policy %q tier %q headers %v limits %v reset %v", i, d.Policy, d.Tier, d.Headers, d.Limits, d.Reset)
		}
		if !d.Allowed && d.RetryAfter <= 0 {
			t.Fatalf("refusal: RetryAfter %s, want > 0", d.RetryAfter)
		}
	}
	if d, err := l.Decide(ctx, Request{Tier: "vip", Identity: "bob"}); err != nil || !d.Allowed || d.Outcome != OutcomeUnlimited || d.Limits != nil {
		t.Fatalf("unlimited tier: got %+v, %v", d, err)
	}
	if d, err := l.Decide(ctx, Request{Tier: "banned", Identity: "eve"}); err != nil || d.Allowed || d.Outcome != OutcomeSuspended {
		t.Fatalf("suspended tier: got %+v, %v", d, err)
	}
	if d, err := l.Decide(ctx, Request{Exempt: true}); err != nil || !d.Allowed || d.Outcome != OutcomeExempt {
		t.Fatalf("exempt: got %+v, %v", d, err)
	}
	if d, err := l.Decide(ctx, Request{Tier: "free", Identity: "carol", Cost: 3}); !errors.Is(err, store.ErrCostExceedsCapacity) || d.Allowed || d.Outcome != OutcomeLimited || d.Capacity != 2 || d.Cost != 3 || d.RetryAfter != 0 {
		t.Fatalf("cost above capacity: got %+v, %v; want a refusal with capacity 2 below cost 3 and no retry", d, err)
	}
	if d, err := l.Decide(ctx, Request{Tier: "gold", Identity: "dan"}); err == nil || d.Allowed || d.Outcome != OutcomeRejected {
		t.Fatalf("unknown tier: got %+v, %v; want a rejection with an error", d, err)
	}
	if d, err := l.Decide(ctx, Request{Tier: "free", Identity: "alice", Cost: 2, Charged: 2}); err != nil || !d.Allowed || d.Outcome != "" {
		t.Fatalf("charged in full by an enclosing decision: got %+v, %v; want an admission without an outcome", d, err)
	}
	if _, err := l.Decide(ctx, Request{Tier: "free"}); err == nil {
		t.Fatal("empty identity: got nil error")
	}
	if d, err := l.Decide(ctx, Request{Tier: "free", Identity: "alice", Peek: true}); err != nil || d.Allowed || d.Outcome != OutcomeLimited {
		t.Fatalf("peek: got %+v, %v", d, err)
	}
	want := []Outcome{OutcomeAllowed, OutcomeAllowed, OutcomeLimited, OutcomeUnlimited, OutcomeSuspended, OutcomeExempt, OutcomeLimited, OutcomeRejected}
	if got := ev.outcomes(); !slicesEqual(got, want) {
		t.Fatalf("observed outcomes: got %v, want %v (nothing for the charged request, the empty identity and the peek)", got, want)
	}
	for i, v := range ev.ctxs {
		if v != "request" {
			t.Errorf("event %d: the observer got a context without the request's value (got %v)", i, v)
		}
	}
}

func slicesEqual(a, b []Outcome) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A store failure is an error, and the Decision says what the failure
// mode made of it: admitted (fail open), or refused with the breaker's
// cooldown as the wait (fail closed).
func TestDecideFailureModes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		mode    FailureMode
		allowed bool
		outcome Outcome
		retry   time.Duration
	}{
		{FailOpen, true, OutcomeFailedOpen, 0},
		{FailClosed, false, OutcomeFailedClosed, 7 * time.Second},
	} {
		t.Run(tc.mode.name(), func(t *testing.T) {
			l := mustNew(t, failingStore{}, Options{Name: "api", Limits: []store.Limit{store.PerMinute(5)}, FailureMode: tc.mode, BreakerCooldown: 7 * time.Second})
			d, err := l.Decide(ctx, Request{Identity: "alice"})
			if !errors.Is(err, store.ErrStoreUnavailable) {
				t.Fatalf("error: got %v, want one wrapping store.ErrStoreUnavailable", err)
			}
			if d.Allowed != tc.allowed || d.Outcome != tc.outcome || d.RetryAfter != tc.retry {
				t.Fatalf("got allowed %v outcome %s retry %s, want %v %s %s", d.Allowed, d.Outcome, d.RetryAfter, tc.allowed, tc.outcome, tc.retry)
			}
		})
	}
	fb := mustNew(t, failingStore{}, Options{Name: "fb", Limits: []store.Limit{store.PerMinute(1)}, FailureMode: FailClosed, Fallback: mustMem(t)})
	if d, err := fb.Decide(ctx, Request{Identity: "alice"}); err != nil || !d.Allowed || d.Outcome != OutcomeAllowed {
		t.Fatalf("with a fallback store: got %+v, %v; want the fallback's admission", d, err)
	}
	if d, err := fb.Decide(ctx, Request{Identity: "alice"}); err != nil || d.Allowed || d.Outcome != OutcomeLimited {
		t.Fatalf("with a fallback store, second request: got %+v, %v; want the fallback's refusal", d, err)
	}
}

// Regression: two limiters built on one store without a name were both
// "default" and silently shared one quota.
func TestSecondUnnamedLimiterIsRefused(t *testing.T) {
	st := mustMem(t)
	first := mustNew(t, st, Options{Limits: []store.Limit{store.PerMinute(5)}})
	_, err := New(st, Options{Limits: []store.Limit{store.PerMinute(5)}, Logger: quiet})
	if !errors.Is(err, errUnnamedShared) {
		t.Fatalf("got %v, want %v", err, errUnnamedShared)
	}
	runtime.KeepAlive(first)
}

// A limits function that returns the same limits every time costs no
// validation or header formatting per request: each distinct result is
// compiled once.
func TestLimitsFuncCompiledOncePerResult(t *testing.T) {
	type planKey struct{}
	l := mustNew(t, mustMem(t), Options{Name: "plans", Limits: []store.Limit{store.PerMinute(1)}, LimitsFunc: func(ctx context.Context, _ string) ([]store.Limit, error) {
		n := int64(1000)
		if ctx.Value(planKey{}) == "pro" {
			n = 5000
		}
		return []store.Limit{{Rate: n, Period: time.Minute}}, nil // a fresh slice each time
	}})
	for i := range 20 {
		ctx := context.WithValue(context.Background(), planKey{}, []string{"free", "pro"}[i%2])
		d, err := l.Decide(ctx, Request{Identity: "client"})
		if err != nil {
			t.Fatal(err)
		}
		if want := []int64{1000, 5000}[i%2]; d.Capacity != want {
			t.Fatalf("request %d: capacity %d, want %d", i, d.Capacity, want)
		}
	}
	if sets := l.tiers[0].sets(); len(sets) != 3 {
		t.Fatalf("compiled limit sets: got %d, want 3 (the configured one and two distinct results)", len(sets))
	}
}

// A stack admits only what every limiter admits, charges none on a
// refusal, and names the deciding limiter.
func TestStackDecide(t *testing.T) {
	st := mustMem(t)
	perClient := mustNew(t, st, Options{Name: "client", Limits: []store.Limit{store.PerMinute(5)}})
	route := mustNew(t, st, Options{Name: "route", Limits: []store.Limit{store.PerMinute(2)}})
	s, err := NewStack(perClient, route)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	reqs := func() []Request { return []Request{{Identity: "alice"}, {Identity: "/search"}} }
	for i := range 2 {
		ds, k, err := s.Decide(ctx, reqs())
		if err != nil || k != 1 || !ds[k].Allowed || ds[0].Outcome != OutcomeAllowed {
			t.Fatalf("request %d: got %+v, deciding %d, %v; want the route limiter deciding an admission", i, ds, k, err)
		}
	}
	ds, k, err := s.Decide(ctx, reqs())
	if err != nil || k != 1 || ds[k].Allowed || ds[k].Outcome != OutcomeLimited {
		t.Fatalf("third request: got %+v, deciding %d, %v; want the route limiter's refusal", ds, k, err)
	}
	if d, _ := perClient.Decide(ctx, Request{Identity: "alice", Peek: true}); d.Remaining != 2 {
		t.Fatalf("per-client remaining after the refusal: got %d, want 2 (a peek after 2 charged of 5; the refusal charged nothing)", d.Remaining)
	}
	if _, err := NewStack(perClient, perClient); err == nil {
		t.Fatal("NewStack with one limiter twice: got nil error")
	}
}

// A counted refusal's wait counts the attempt it recorded: the third login
// attempt within ten seconds, refused by the per-ten-seconds limit (2),
// fills the daily one (3), so the wait is the daily limit's, alone and in
// a stack.
func TestCountedRefusalWaitCountsTheAttempt(t *testing.T) {
	login := func(st store.Store) *Limiter {
		return mustNew(t, st, Options{Name: "login", CountDenied: true, Limits: []store.Limit{
			{Name: "short", Algorithm: store.SlidingWindowLog, Rate: 2, Period: 10 * time.Second},
			{Name: "day", Algorithm: store.SlidingWindowLog, Rate: 3, Period: 24 * time.Hour},
		}})
	}
	check := func(what string, d Decision) {
		t.Helper()
		if d.Allowed || d.LimitID != "day" || d.RetryAfter < 23*time.Hour || d.Outcome != OutcomeLimited {
			t.Errorf("%s: got %s, allowed %t, RetryAfter %s; want refused by \"day\" for about 24h", what, d.LimitID, d.Allowed, d.RetryAfter)
		}
	}
	ctx := context.Background()
	l := login(mustMem(t))
	var d Decision
	for range 3 {
		d, _ = l.Decide(ctx, Request{Identity: "alice"})
	}
	check("alone", d)

	st := mustMem(t)
	s, err := NewStack(login(st), mustNew(t, st, Options{Name: "route", Limits: []store.Limit{store.PerMinute(100)}}))
	if err != nil {
		t.Fatal(err)
	}
	var ds []Decision
	k := -1
	for range 3 {
		if ds, k, err = s.Decide(ctx, []Request{{Identity: "alice"}, {Identity: "/login"}}); err != nil {
			t.Fatal(err)
		}
	}
	if k != 0 {
		t.Fatalf("stack: deciding part %d, want 0 (login)", k)
	}
	check("stacked", ds[0])
}
