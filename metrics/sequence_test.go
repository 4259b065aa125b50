package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// TestScriptedSequenceAllOutcomes drives real limiters on the memory store
// through an exempt request, a dry-run refusal, an abuse block, a local
// fallback and a breaker that opens, and checks every series by value.
func TestScriptedSequenceAllOutcomes(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(1767225600, 0)
	now := func() time.Time { return clock }
	mem, _ := memstore.New(memstore.Options{Clock: now})
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	send := func(h http.Handler, path string) int {
		r := httptest.NewRequest("POST", path, nil)
		r.RemoteAddr = "192.0.2.1:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	common := func(o middleware.Options) middleware.Options {
		o.Observer, o.Logger = m.Observe, quiet
		return o
	}

	login, err := middleware.New(mem, ipKey, store.Limit{Name: "minute", Algorithm: store.SlidingWindowLog, Rate: 2, Period: time.Minute, Block: 15 * time.Minute},
		common(middleware.Options{Name: "login", Exempt: []func(*http.Request) bool{middleware.ExemptPaths("/healthz")}}))
	if err != nil {
		t.Fatal(err)
	}
	lh := login.Handler(ok)
	send(lh, "/healthz") // exempt
	send(lh, "/login")   // allowed
	send(lh, "/login")   // allowed
	send(lh, "/login")   // refused: starts the block
	send(lh, "/login")   // blocked

	shadow, err := middleware.New(mem, ipKey, store.PerMinute(1), common(middleware.Options{Name: "shadow", DryRun: true}))
	if err != nil {
		t.Fatal(err)
	}
	sh := shadow.Handler(ok)
	send(sh, "/") // allowed
	if code := send(sh, "/"); code != 200 {
		t.Fatalf("dry-run refusal: got %d, want 200", code)
	}

	down := &countingStore{n: 1, down: true}
	local, _ := memstore.New(memstore.Options{Clock: now})
	fb, err := middleware.New(down, ipKey, store.PerMinute(5), common(middleware.Options{
		Name:             "fb",
		Fallback:         local,
		BreakerThreshold: 2,
		BreakerCooldown:  time.Minute,
	}))
	if err != nil {
		t.Fatal(err)
	}
	fh := fb.Handler(ok)
	send(fh, "/") // store error, fallback
	send(fh, "/") // store error, breaker opens, fallback
	send(fh, "/") // skipped, fallback

	for _, tc := range []struct {
		vec  *prometheus.CounterVec
		lv   []string
		want float64
	}{
		{m.decisions, []string{"login", "exempt"}, 1},
		{m.decisions, []string{"login", "allowed"}, 2},
		{m.decisions, []string{"login", "blocked"}, 2},
		{m.blocks, []string{"login", "minute"}, 1},
		{m.decisions, []string{"shadow", "allowed"}, 1},
		{m.decisions, []string{"shadow", "dry_run"}, 1},
		{m.decisions, []string{"fb", "allowed"}, 3},
		{m.degraded, []string{"fb", "fallback"}, 3},
		{m.storeErrors, []string{"fb", "timeout"}, 2},
	} {
		if got := testutil.ToFloat64(tc.vec.WithLabelValues(tc.lv...)); got != tc.want {
			t.Errorf("%v: got %v, want %v", tc.lv, got, tc.want)
		}
	}
	if got := testutil.ToFloat64(m.unavailable.WithLabelValues("fb")); got != 1 {
		t.Errorf("store_unavailable{fb}: got %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.unavailable.WithLabelValues("login")); got != 0 {
		t.Errorf("store_unavailable{login}: got %v, want 0", got)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
