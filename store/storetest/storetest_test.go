package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
	"github.com/ratekeeper/ratekeeper/store/internal/fakeclock"
	"github.com/ratekeeper/ratekeeper/store/memstore"
	"github.com/ratekeeper/ratekeeper/store/storetest"
)

// mutantEnv names the broken store a child process runs the suite against.
const mutantEnv = "STORETEST_MUTANT"

// broken wraps a correct store and breaks one promise.
type broken struct {
	store.Store
	take  func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error)
	peek  func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error)
	reset func(s store.Store, ctx context.Context, r store.Request) error
	key   func(string) string
	// limit, when set, rewrites every limit of every request.
	limit func(store.Limit) store.Limit
	// request, when set, rewrites every request.
	request func(store.Request) store.Request
	// cancel, when set, replaces the wrapped store's CancelWait.
	cancel func(s store.Store, ctx context.Context, r store.Request, d store.Decision) error
}

// CancelWait forwards to the wrapped store's (a [store.Waiter]), or to
// cancel.
func (b broken) CancelWait(ctx context.Context, r store.Request, d store.Decision) error {
	if b.cancel != nil {
		return b.cancel(b.Store, ctx, b.fix(r), d)
	}
	return b.Store.(store.Waiter).CancelWait(ctx, b.fix(r), d)
}

func (b broken) fix(r store.Request) store.Request {
	if b.key != nil {
		r.Key = b.key(r.Key)
	}
	if b.limit != nil {
		ls := make([]store.Limit, len(r.Limits))
		for i, l := range r.Limits {
			ls[i] = b.limit(l)
		}
		r.Limits = ls
	}
	if b.request != nil {
		r = b.request(r)
	}
	return r
}

func (b broken) Take(ctx context.Context, r store.Request) (store.Decision, error) {
	if b.take != nil {
		return b.take(b.Store, ctx, b.fix(r))
	}
	return b.Store.Take(ctx, b.fix(r))
}

func (b broken) Peek(ctx context.Context, r store.Request) (store.Decision, error) {
	if b.peek != nil {
		return b.peek(b.Store, ctx, b.fix(r))
	}
	return b.Store.Peek(ctx, b.fix(r))
}

func (b broken) Reset(ctx context.Context, r store.Request) error {
	if b.reset != nil {
		return b.reset(b.Store, ctx, b.fix(r))
	}
	return b.Store.Reset(ctx, b.fix(r))
}

// Suppress is the stores' entry point for the suppressed strategy (package
// store/suppressed decides through it), broken as Take, Peek and Reset
// are, so that the suppressed subtests run against the broken store too.
func (b broken) Suppress(ctx context.Context, r store.Request, mode contract.Mode) (store.Decision, error) {
	inner := suppressing{b.Store.(contract.Suppressor)}
	r = b.fix(r)
	switch {
	case mode == contract.Take && b.take != nil:
		return b.take(inner, ctx, r)
	case mode == contract.Peek && b.peek != nil:
		return b.peek(inner, ctx, r)
	case mode == contract.Reset && b.reset != nil:
		return store.Decision{}, b.reset(inner, ctx, r)
	}
	return inner.s.Suppress(ctx, r, mode)
}

// suppressing is a store's suppressed-strategy entry point as a
// store.Store, for the broken operations to call.
type suppressing struct{ s contract.Suppressor }

func (s suppressing) Take(ctx context.Context, r store.Request) (store.Decision, error) {
	return s.s.Suppress(ctx, r, contract.Take)
}

func (s suppressing) Peek(ctx context.Context, r store.Request) (store.Decision, error) {
	return s.s.Suppress(ctx, r, contract.Peek)
}

func (s suppressing) Reset(ctx context.Context, r store.Request) error {
	_, err := s.s.Suppress(ctx, r, contract.Reset)
	return err
}

// mutants are stores that each break one promise, with subtests that must
// fail because of it.
var mutants = map[string]struct {
	store     broken
	mustCatch []string
}{
	"MaxWait ignored": {
		broken{request: func(r store.Request) store.Request { r.MaxWait = 0; return r }},
		[]string{"gcra/wait", "token_bucket/wait-cancel", "gcra/wait-concurrent"},
	},
	"places given back with waiters behind them": {
		broken{cancel: func(s store.Store, ctx context.Context, r store.Request, d store.Decision) error {
			return s.(store.Refunder).Settle(ctx, r, d, 0) // the cost off the end of the line
		}},
		[]string{"gcra/wait-cancel", "token_bucket/wait-cancel"},
	},
	"suppressed: hard limit ignored": {
		broken{take: func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error) {
			d, err := s.Take(ctx, r)
			if suppressedReq(r) && !d.Allowed && !d.Suppressed {
				d.Allowed, d.RetryAfter = true, 0
			}
			return d, err
		}},
		[]string{"suppressed/regimes"},
	},
	"suppressed: refusals not counted as offered": {
		broken{take: func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error) {
			if suppressedReq(r) {
				if d, err := s.Peek(ctx, r); err != nil || !d.Allowed {
					return d, err
				}
			}
			return s.Take(ctx, r)
		}},
		[]string{"suppressed/factor-follows-offered-load"},
	},
	"suppressed: factor not reported": {
		broken{take: func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error) {
			d, err := s.Take(ctx, r)
			d.Suppression = 0
			return d, err
		}},
		[]string{"suppressed/regimes", "suppressed/cost-above-soft-limit"},
	},
	"partial grant all or nothing": {
		broken{request: func(r store.Request) store.Request {
			if r.Partial {
				r.Partial = false
				r.Cost = min(r.Cost, r.Limits[0].Capacity())
			}
			return r
		}, take: func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error) {
			d, err := s.Take(ctx, r)
			if d.Allowed {
				d.Granted = r.Cost
			}
			return d, err
		}},
		[]string{"gcra/partial", "fixed_window/partial-multi", "sliding_window_log/partial-concurrent"},
	},
	"partial grant one unit short": {
		broken{take: func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error) {
			if !r.Partial {
				return s.Take(ctx, r)
			}
			d, err := s.Peek(ctx, r)
			if err != nil || d.Granted < 2 {
				return s.Take(ctx, r)
			}
			r.Cost = d.Granted - 1
			return s.Take(ctx, r)
		}},
		[]string{"token_bucket/partial", "sliding_window_counter/partial-multi", "fixed_window/partial-block"},
	},
	"calendar zone ignored": {
		broken{limit: func(l store.Limit) store.Limit {
			l.Location = nil
			return l
		}},
		[]string{"calendar-zones"},
	},
	"calendar month as 30 days": {
		broken{limit: func(l store.Limit) store.Limit {
			if l.Calendar == "month" {
				// Named as the month was, so that only its windows differ.
				l.Name, l.Calendar, l.Location, l.Period = l.ID(), "", nil, 30*24*time.Hour
			}
			return l
		}},
		[]string{"calendar-months"},
	},
	"peek records": {
		broken{peek: func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error) {
			return s.Take(ctx, r)
		}},
		[]string{"gcra/peek", "fixed_window/peek", "sliding_window_log/exact"},
	},
	"retry after a millisecond short": {
		broken{take: func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error) {
			d, err := s.Take(ctx, r)
			if !d.Allowed && d.RetryAfter > time.Millisecond {
				d.RetryAfter -= time.Millisecond
			}
			return d, err
		}},
		[]string{"gcra/retry-after-cost-1", "sliding_window_counter/retry-after-cost-3", "sliding_window_log/exact"},
	},
	"remaining one too many": {
		broken{take: func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error) {
			d, err := s.Take(ctx, r)
			if d.Remaining < d.Capacity {
				d.Remaining++
			}
			return d, err
		}},
		[]string{"token_bucket/limit", "fixed_window/cost"},
	},
	"keys cut short": {
		broken{key: func(k string) string { return k[:min(len(k), 17)] }},
		[]string{"gcra/isolation", "sliding_window_counter/hostile-keys"},
	},
	"reset forgets nothing": {
		broken{reset: func(store.Store, context.Context, store.Request) error { return nil }},
		[]string{"gcra/reset", "sliding_window_log/reset", "reset-ignores-cost", "fixed_window/block-reset"},
	},
	"reset never reports not found": {
		broken{reset: func(s store.Store, ctx context.Context, r store.Request) error {
			s.Reset(ctx, r)
			return nil
		}},
		[]string{"gcra/reset-not-found", "token_bucket/reset-not-found", "sliding_window_log/reset-not-found",
			"sliding_window_counter/reset-not-found", "fixed_window/reset-not-found"},
	},
	"keeps the first limit seen under an ID": {
		broken{take: firstLimitSeen(store.Store.Take), peek: firstLimitSeen(store.Store.Peek)},
		[]string{"gcra/limit-change", "token_bucket/limit-change", "sliding_window_log/limit-change",
			"sliding_window_counter/limit-change", "fixed_window/limit-change"},
	},
	"records each limit on its own": {
		broken{take: func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error) {
			d, err := s.Take(ctx, r)
			if err == nil && !d.Allowed && len(r.Limits) > 1 {
				for _, l := range r.Limits {
					one := r
					one.Limits = []store.Limit{l}
					s.Take(ctx, one)
				}
			}
			return d, err
		}},
		[]string{"gcra/multi-all-or-nothing", "fixed_window/multi-all-or-nothing"},
	},
	"denies instead of refusing a cost above capacity": {
		broken{take: func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error) {
			d, err := s.Take(ctx, r)
			if err != nil && strings.Contains(err.Error(), "cost exceeds") {
				return store.Decision{Capacity: r.Limits[0].Capacity(), RetryAfter: time.Second, LimitID: r.Limits[0].ID()}, nil
			}
			return d, err
		}},
		[]string{"invalid-requests", "gcra/cost"},
	},
	"not atomic": {
		broken{take: func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error) {
			d, err := s.Peek(ctx, r)
			if err != nil || !d.Allowed {
				return d, err
			}
			time.Sleep(time.Millisecond) // check, then act
			return s.Take(ctx, store.Request{Key: r.Key, Limits: r.Limits, Cost: 1})
		}},
		[]string{"gcra/concurrent", "fixed_window/concurrent"},
	},
	"ignores blocks": {
		broken{limit: func(l store.Limit) store.Limit { l.Block, l.BlockMax = 0, 0; return l }},
		[]string{"gcra/block", "token_bucket/block-escalation", "sliding_window_log/block-started-once",
			"sliding_window_log/threshold", "fixed_window/block-choice", "sliding_window_counter/peek-blocks",
			"fixed_window/count-denied"},
	},
	"never escalates": {
		broken{limit: func(l store.Limit) store.Limit { l.BlockMax = 0; return l }},
		[]string{"gcra/block-escalation", "sliding_window_log/block-escalation", "fixed_window/block-choice", "token_bucket/block-reset"},
	},
	"reports every blocked refusal as the block's start": {
		broken{take: func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error) {
			d, err := s.Take(ctx, r)
			if d.Blocked {
				d.BlockStarted = true
			}
			return d, err
		}},
		[]string{"gcra/block-started-once", "sliding_window_log/threshold", "fixed_window/block"},
	},
	"peeks start blocks": {
		broken{peek: func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error) {
			d, err := s.Peek(ctx, r)
			if err == nil && !d.Allowed && !d.Blocked {
				for _, l := range r.Limits {
					if l.Block > 0 {
						s.Take(ctx, r)
						return s.Peek(ctx, r)
					}
				}
			}
			return d, err
		}},
		[]string{"gcra/peek-blocks", "sliding_window_counter/peek-blocks"},
	},
	"ignores CountDenied": {
		broken{request: func(r store.Request) store.Request { r.CountDenied = false; return r }},
		[]string{"fixed_window/count-denied", "sliding_window_log/count-denied", "sliding_window_counter/count-denied"},
	},
	"ignores DedupID": {
		broken{request: func(r store.Request) store.Request { r.DedupID = ""; return r }},
		[]string{"gcra/dedup", "sliding_window_counter/dedup", "token_bucket/block-reset"},
	},
	"de-duplication ids never expire": {
		broken{take: rememberForever(store.Store.Take), peek: rememberForever(store.Store.Peek)},
		[]string{"gcra/dedup", "sliding_window_log/dedup"},
	},
	"NextAfter is the time until full": {
		broken{take: nextAfter(store.Store.Take, func(d *store.Decision) { d.NextAfter = d.ResetAfter }),
			peek: nextAfter(store.Store.Peek, func(d *store.Decision) { d.NextAfter = d.ResetAfter })},
		[]string{"gcra/next-after", "gcra/next-after-values", "sliding_window_log/next-after", "sliding_window_log/next-after-values", "sliding_window_counter/next-after-values"},
	},
	"NextAfter a microsecond early": {
		broken{take: nextAfter(store.Store.Take, func(d *store.Decision) {
			d.NextAfter = max(d.NextAfter-time.Microsecond, min(d.NextAfter, time.Microsecond))
		})},
		[]string{"fixed_window/next-after", "sliding_window_log/next-after", "sliding_window_counter/next-after"},
	},
}

// nextAfter wraps op so that set changes the NextAfter of every decision
// that is not blocked, refused or suspended (whose NextAfter is their
// RetryAfter).
func nextAfter(op func(store.Store, context.Context, store.Request) (store.Decision, error), set func(*store.Decision)) func(store.Store, context.Context, store.Request) (store.Decision, error) {
	return func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error) {
		d, err := op(s, ctx, r)
		if err == nil && d.Allowed && !suppressedReq(r) {
			set(&d)
			if d.Index >= 0 && d.Index < len(d.PerLimit) {
				d.PerLimit[d.Index].NextAfter = d.NextAfter
			}
		}
		return d, err
	}
}

// rememberForever wraps op so that requests with a DedupID carry one more
// limit, of a year and a rate no request reaches, which the decision then
// hides: the id is remembered for a year, and nothing else changes.
func rememberForever(op func(store.Store, context.Context, store.Request) (store.Decision, error)) func(store.Store, context.Context, store.Request) (store.Decision, error) {
	return func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error) {
		if r.DedupID == "" {
			return op(s, ctx, r)
		}
		n := len(r.Limits)
		r.Limits = append(append([]store.Limit(nil), r.Limits...), store.Limit{Name: "~forever", Algorithm: r.Limits[0].Algorithm, Rate: 1 << 30, Period: 365 * 24 * time.Hour})
		d, err := op(s, ctx, r)
		if n == 1 {
			d.PerLimit = nil
		} else if len(d.PerLimit) > n {
			d.PerLimit = d.PerLimit[:n]
		}
		return d, err
	}
}

// firstSeen holds, per key, algorithm and limit ID, the first limit a
// store built with firstLimitSeen was asked about. Keys are unique per
// subtest, so one map serves every harness.
var firstSeen sync.Map

// firstLimitSeen wraps op so that every limit is replaced by the first one
// seen under the same key, algorithm and ID, as a store that keeps a
// limit's parameters with its state (tokens left, an absolute arrival
// time) decides, and the decision reports the capacity asked for: a
// changed limit is ignored, and nothing else changes.
func firstLimitSeen(op func(store.Store, context.Context, store.Request) (store.Decision, error)) func(store.Store, context.Context, store.Request) (store.Decision, error) {
	return func(s store.Store, ctx context.Context, r store.Request) (store.Decision, error) {
		asked := r.Limits
		r.Limits = make([]store.Limit, len(asked))
		for i, l := range asked {
			first, _ := firstSeen.LoadOrStore(r.Key+"\x00"+l.Algorithm.String()+"/"+l.ID(), l)
			r.Limits[i] = first.(store.Limit)
		}
		d, err := op(s, ctx, r)
		if err != nil || d.Index < 0 {
			return d, err
		}
		d.Capacity = asked[d.Index].Capacity()
		d.Remaining = min(d.Remaining, d.Capacity)
		for i := range d.PerLimit {
			d.PerLimit[i].Remaining = min(d.PerLimit[i].Remaining, asked[i].Capacity())
		}
		return d, nil
	}
}

// suppressedReq reports a request of the suppressed strategy.
func suppressedReq(r store.Request) bool {
	return len(r.Limits) > 0 && r.Limits[0].Algorithm == contract.Suppressed
}

func newMemHarness(t *testing.T, wrap func(store.Store) store.Store) storetest.Harness {
	t.Helper()
	clk := &fakeclock.Clock{}
	rnd := &storetest.FakeRand{}
	s, err := memstore.New(memstore.Options{Clock: clk.Now, Rand: rnd.Float64})
	if err != nil {
		t.Fatalf("memstore.New: got error %v, want nil", err)
	}
	return storetest.Harness{Store: wrap(s), Advance: clk.Advance, Exact: true, Rand: rnd}
}

// TestMutant is the child-process entry point of
// TestSuiteCatchesBrokenStores: it runs the suite against the broken
// store named by the environment.
func TestMutant(t *testing.T) {
	name := os.Getenv(mutantEnv)
	if name == "" {
		t.Skip("entry point for the child processes of TestSuiteCatchesBrokenStores")
	}
	m, ok := mutants[name]
	if !ok {
		t.Fatalf("unknown mutant %q", name)
	}
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		return newMemHarness(t, func(s store.Store) store.Store {
			b := m.store
			b.Store = s
			return b
		})
	})
}

// TestSuiteCatchesBrokenStores proves the suite has teeth: run against
// stores that each break one promise of the contract (peeks that record,
// short retry times, off-by-one counts, colliding keys, a Reset that
// forgets nothing, a Reset that never reports ErrNotFound, a changed
// limit ignored, multi-limit requests recorded limit by limit, cost
// errors turned into denials, check-then-act, blocks ignored, no
// escalation, BlockStarted on every blocked refusal, peeks that start
// blocks, CountDenied or DedupID ignored, ids remembered forever, partial
// grants taken all or nothing or one unit short, calendar windows in UTC
// whatever the zone or a month of 30 days, MaxWait ignored, places
// given back with waiters behind them, a
// suppressed strategy without its hard limit, its offered load or its
// factor), it fails, and in the subtests that test that promise.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns one test process per broken store; skipped in -short mode")
	}
	var mu sync.Mutex // keeps the children's output apart in failures
	for name, m := range mutants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestMutant$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), mutantEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("suite passed a store whose %s", name)
			}
			for _, sub := range m.mustCatch {
				if !strings.Contains(string(out), "--- FAIL: TestMutant/"+sub+" ") {
					mu.Lock()
					t.Errorf("store whose %s: got subtest %s passing, want it failing; output:\n%s", name, sub, tail(string(out), 40))
					mu.Unlock()
				}
			}
		})
	}
}

// TestSuitePassesMemstore runs the suite against the in-memory store, the
// reference for the mutants above.
func TestSuitePassesMemstore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		return newMemHarness(t, func(s store.Store) store.Store { return s })
	})
}

func tail(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
