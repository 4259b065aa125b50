package metrics

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// countingStore admits the first n takes per key and refuses the rest; it
// fails while down is set.
type countingStore struct {
	mu   sync.Mutex
	n    int64
	seen map[string]int64
	down bool
}

func (s *countingStore) Take(_ context.Context, req store.Request) (store.Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return store.Decision{}, &store.BackendError{Op: "take", Kind: "timeout", Err: context.DeadlineExceeded}
	}
	if s.seen == nil {
		s.seen = map[string]int64{}
	}
	s.seen[req.Key]++
	if s.seen[req.Key] > s.n {
		return store.Decision{Capacity: s.n, RetryAfter: time.Second}, nil
	}
	return store.Decision{Allowed: true, Capacity: s.n, Remaining: s.n - s.seen[req.Key]}, nil
}

func (s *countingStore) Peek(ctx context.Context, req store.Request) (store.Decision, error) {
	return store.Decision{}, errors.New("unused")
}
func (s *countingStore) Reset(context.Context, store.Request) error { return nil }
func (s *countingStore) Name() string                               { return "counting" }

func (s *countingStore) setDown(v bool) { s.mu.Lock(); s.down = v; s.mu.Unlock() }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func ipKey(r *http.Request) (string, error) { return r.RemoteAddr, nil }

func serve(h http.Handler, ip string) int {
	req := httptest.NewRequest(http.MethodGet, "/api/ping", nil)
	req.RemoteAddr = ip
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func TestScriptedSequenceCounts(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})
	st := &countingStore{n: 3}
	open, err := middleware.New(st, ipKey, store.PerMinute(3), middleware.Options{
		Name:             "api",
		Observer:         m.Observe,
		Logger:           quiet,
		BreakerThreshold: -1,
		BreakerCooldown:  0,
	})
	if err != nil {
		t.Fatal(err)
	}
	closedStore := &countingStore{n: 3, down: true}
	closed, err := middleware.New(closedStore, ipKey, store.PerMinute(3), middleware.Options{
		Name:             "login",
		Observer:         m.Observe,
		Logger:           quiet,
		FailureMode:      limiter.FailClosed,
		BreakerThreshold: -1,
		BreakerCooldown:  0,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := open.Handler(ok)
	for range 5 { // 3 allowed, 2 limited
		serve(h, "192.0.2.1")
	}
	st.setDown(true)
	serve(h, "192.0.2.1") // failed open
	serve(h, "192.0.2.1") // failed open
	st.setDown(false)
	serve(closed.Handler(ok), "192.0.2.9") // failed closed

	tests := []struct {
		c    prometheus.Collector
		lv   []string
		want float64
	}{
		{m.decisions, []string{"api", "allowed"}, 3},
		{m.decisions, []string{"api", "limited"}, 2},
		{m.decisions, []string{"api", "failed_open"}, 2},
		{m.decisions, []string{"login", "failed_closed"}, 1},
		{m.storeErrors, []string{"api", "timeout"}, 2},
		{m.storeErrors, []string{"login", "timeout"}, 1},
		{m.degraded, []string{"api", "fail_open"}, 2},
		{m.degraded, []string{"login", "fail_closed"}, 1},
	}
	for _, tt := range tests {
		var got float64
		switch v := tt.c.(type) {
		case *prometheus.CounterVec:
			got = testutil.ToFloat64(v.WithLabelValues(tt.lv...))
		}
		if got != tt.want {
			t.Errorf("%v: got %v, want %v", tt.lv, got, tt.want)
		}
	}
	// Every store call is timed, failed ones too: 7 for api, 1 for login.
	if n := testutil.CollectAndCount(m.latency); n != 2 {
		t.Errorf("latency series: got %d, want 2 (api and login, store counting)", n)
	}
	for _, tc := range []struct {
		policy string
		want   uint64
	}{{"api", 7}, {"login", 1}} {
		h, ok := m.latency.WithLabelValues(tc.policy, "counting").(prometheus.Histogram)
		if !ok {
			t.Fatal("latency observer is not a histogram")
		}
		if got := sampleCount(t, h); got != tc.want {
			t.Errorf("latency samples for %s: got %d, want %d", tc.policy, got, tc.want)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func sampleCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func TestNoKeyInLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := &countingStore{n: 1}
	lim, err := middleware.New(st, ipKey, store.PerMinute(1), middleware.Options{
		Name:     "api",
		Observer: m.Observe,
		Logger:   quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	countSeries := func() int {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mf := range mfs {
			n += len(mf.GetMetric())
		}
		return n
	}
	serve(h, "10.0.0.1")
	serve(h, "10.0.0.1")
	before := countSeries()
	for i := range 10000 {
		serve(h, "10."+strconv.Itoa(i>>16&255)+"."+strconv.Itoa(i>>8&255)+"."+strconv.Itoa(i&255))
	}
	if after := countSeries(); after != before {
		t.Fatalf("series: got %d after 10,000 distinct clients, want %d as before", after, before)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if strings.HasPrefix(lp.GetValue(), "10.") {
					t.Fatalf("label %s=%s carries a client address", lp.GetName(), lp.GetValue())
				}
			}
		}
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(nil, Options{}); err == nil {
		t.Fatal("got nil error for a nil registerer, want one")
	}
	reg := prometheus.NewRegistry()
	if _, err := New(reg, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg, Options{}); err == nil {
		t.Fatal("got nil error registering twice, want a duplicate-registration error")
	}
	if _, err := New(reg, Options{Namespace: "other"}); err != nil {
		t.Fatalf("second namespace: %v", err)
	}
}

// TestCachedRefusals: refusals the store answered from its deny cache are
// counted per policy.
func TestCachedRefusals(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := limiter.Event{Decision: limiter.Decision{Outcome: limiter.OutcomeLimited}}
	e.Policy = "api"
	e.Cached = true
	c.Observe(context.Background(), e)
	c.Observe(context.Background(), e)
	e.Cached = false
	c.Observe(context.Background(), e)
	if got := testutil.ToFloat64(c.cached.WithLabelValues("api")); got != 2 {
		t.Fatalf("cached refusals: got %v, want 2", got)
	}
}

// TestRepairedState: decisions on state the store repaired are counted
// per policy.
func TestRepairedState(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := limiter.Event{Decision: limiter.Decision{Outcome: limiter.OutcomeAllowed}}
	e.Policy = "api"
	e.Repaired = true
	c.Observe(context.Background(), e)
	e.Repaired = false
	c.Observe(context.Background(), e)
	if got := testutil.ToFloat64(c.repaired.WithLabelValues("api")); got != 1 {
		t.Fatalf("repaired state: got %v, want 1", got)
	}
	if n, err := testutil.GatherAndCount(reg, "ratekeeper_repaired_state_total"); err != nil || n != 1 {
		t.Fatalf("repaired series: got %d, %v; want 1", n, err)
	}
}

// TestSuppressedRefusals: refusals drawn by the suppressed strategy are
// counted per policy, apart from the other refusals.
func TestSuppressedRefusals(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := limiter.Event{Decision: limiter.Decision{Outcome: limiter.OutcomeLimited}}
	e.Policy = "api"
	e.Suppression = 0.4
	e.Suppressed = true
	c.Observe(context.Background(), e)
	c.Observe(context.Background(), e)
	e.Suppression, e.Suppressed = 1, false // refused by the hard limit
	c.Observe(context.Background(), e)
	if got := testutil.ToFloat64(c.suppressed.WithLabelValues("api")); got != 2 {
		t.Fatalf("suppressed refusals: got %v, want 2", got)
	}
	if got := testutil.ToFloat64(c.decisions.WithLabelValues("api", string(limiter.OutcomeLimited))); got != 3 {
		t.Fatalf("limited decisions: got %v, want 3", got)
	}
}

// TestDelayedAdmissions: a limiter's admissions that waited for their
// turn are counted per policy with the waits they were given, and as
// allowed decisions too.
func TestDelayedAdmissions(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := limiter.New(st, limiter.Options{Name: "api", Limits: []store.Limit{{Rate: 1, Period: 50 * time.Millisecond}}, MaxWait: time.Second, Observer: c.Observe})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if d, err := l.Wait(context.Background(), limiter.Request{Identity: "alice"}); err != nil || !d.Allowed {
			t.Fatalf("Wait: got %+v, %v, want admitted", d.Decision, err)
		}
	}
	if got := testutil.ToFloat64(c.delayed.WithLabelValues("api")); got != 1 {
		t.Errorf("delayed admissions: got %v, want 1", got)
	}
	if got := testutil.ToFloat64(c.delay.WithLabelValues("api")); got < 0.02 || got > 0.05 {
		t.Errorf("admission delay: got %vs, want about 0.05s", got)
	}
	if got := testutil.ToFloat64(c.decisions.WithLabelValues("api", string(limiter.OutcomeAllowed))); got != 2 {
		t.Errorf("allowed decisions: got %v, want 2", got)
	}
}

// With a fallback store, a call the open breaker skipped is answered by
// the fallback and reported as skipped: only the failures that opened
// the breaker count as store errors, while every request counts as
// degraded.
func TestSkippedCallsWithFallbackAreNoStoreErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fb, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	skipped := 0
	lim, err := limiter.New(&countingStore{n: 100, down: true}, limiter.Options{Name: "api", Limits: []store.Limit{store.PerMinute(100)},
		Fallback: fb, BreakerThreshold: 2, BreakerCooldown: time.Hour, Logger: quiet,
		Observer: func(ctx context.Context, e limiter.Event) {
			if e.Skipped {
				skipped++
			}
			m.Observe(ctx, e)
		}})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := lim.Decide(context.Background(), limiter.Request{Identity: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	errs := 0.0
	for _, kind := range []string{"timeout", "other", "connection"} {
		errs += testutil.ToFloat64(m.storeErrors.WithLabelValues("api", kind))
	}
	if errs != 2 || skipped != 8 {
		t.Errorf("store_errors_total %v and %d events marked skipped after 2 failures and 8 skipped calls; want 2 and 8", errs, skipped)
	}
	if got := testutil.ToFloat64(m.degraded.WithLabelValues("api", "fallback")); got != 10 {
		t.Errorf("degraded{fallback} %v, want 10", got)
	}
}
