package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/middleware/policy"
	"github.com/ratekeeper/ratekeeper/middleware/policy/policytest"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

func newStore(t *testing.T) store.Store {
	t.Helper()
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// writeFile writes text to a new policy file and returns its path.
func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policies.yaml")
	rewrite(t, path, text)
	return path
}

func rewrite(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func load(t *testing.T, path string, st store.Store) *policy.Set {
	t.Helper()
	set, err := policy.Load(path, st, appOptions())
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func serve(h http.Handler, client string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = client
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

const twoPolicies = `policies:
  api:
    key: ip
    limits: [{rate: 10, period: 1h}]
  other:
    key: ip
    limits: [{rate: 10, period: 1h}]
`

func TestReloadSuiteOnMemory(t *testing.T) {
	policytest.Run(t, newStore(t))
}

// A request that passed the limiter before a reload finishes under the
// policy it started with; the next request runs under the new one.
func TestInFlightRequestKeepsItsPolicy(t *testing.T) {
	path := writeFile(t, twoPolicies)
	opts := appOptions()
	opts.Middleware.DecisionInContext = true
	set, err := policy.Load(path, newStore(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var limits []int64
	h := set.Handler("api")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Wait") != "" {
			close(started)
			<-release
		}
		d, _ := middleware.DecisionFrom(r.Context())
		mu.Lock()
		limits = append(limits, d.Capacity)
		mu.Unlock()
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "192.0.2.1:1"
		r.Header.Set("X-Wait", "1")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}()
	<-started
	rewrite(t, path, strings.Replace(twoPolicies, "rate: 10", "rate: 50", 1))
	if err := set.Reload(); err != nil {
		t.Fatal(err)
	}
	if w := serve(h, "192.0.2.1:1"); w.Header().Get("X-RateLimit-Limit") != "50" || w.Header().Get("X-RateLimit-Remaining") != "48" {
		t.Fatalf("request after the reload: got limit %s remaining %s, want 50 and 48", w.Header().Get("X-RateLimit-Limit"), w.Header().Get("X-RateLimit-Remaining"))
	}
	close(release)
	<-done
	if len(limits) != 2 || limits[0] != 50 || limits[1] != 10 {
		t.Fatalf("got limits %v (the request after the reload first), want [50 10]", limits)
	}
}

func TestReloadCannotRemoveAUsedPolicy(t *testing.T) {
	path := writeFile(t, twoPolicies)
	set := load(t, path, newStore(t))
	set.Handler("api")
	only := func(name string) string {
		return "policies:\n  " + name + ":\n    key: ip\n    limits: [{rate: 10, period: 1h}]\n"
	}
	rewrite(t, path, only("other"))
	err := set.Reload()
	var pe *policy.Error
	if !errors.As(err, &pe) || pe.Field != "policies.api" || !strings.Contains(pe.Msg, "a reload cannot remove it") {
		t.Fatalf("removing a used policy: got %v, want an error about policies.api", err)
	}
	rewrite(t, path, only("api"))
	if err := set.Reload(); err != nil {
		t.Fatalf("removing an unused policy: %v", err)
	}
	if _, err := set.Limiter("other"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Limiter of a removed policy: got %v, want an error matching store.ErrNotFound", err)
	}
	// It may come back, in its old slot.
	rewrite(t, path, twoPolicies)
	if err := set.Reload(); err != nil {
		t.Fatal(err)
	}
	if w := serve(set.Handler("other")(okHandler), "192.0.2.2:1"); w.Header().Get("X-RateLimit-Remaining") != "9" {
		t.Fatalf("policy added back: got %v", w.Header())
	}
}

func TestHandlerPanicsAtSetup(t *testing.T) {
	set := load(t, writeFile(t, twoPolicies), newStore(t))
	for name, f := range map[string]func(){
		"unknown policy": func() { set.Handler("nope") },
		"nil next":       func() { set.Handler("api")(nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("got no panic, want one")
				}
			}()
			f()
		})
	}
}

// Limiter gives handlers and operators the running limiter: Allow shares
// the middleware's counters, Reset forgets a client, and a sharing policy
// charges its own cost.
func TestLimiter(t *testing.T) {
	set := load(t, writeFile(t, `policies:
  api:
    key: ip
    limits: [{rate: 10, period: 1h}]
  search:
    share: api
    cost: 5
`), newStore(t))
	h := set.Handler("api")(okHandler)
	serve(h, "192.0.2.3:1")
	search, err := set.Limiter("search")
	if err != nil {
		t.Fatal(err)
	}
	d, err := search.Allow(context.Background(), "192.0.2.3")
	if err != nil || !d.Allowed || d.Remaining != 4 {
		t.Fatalf("search.Allow: got %+v, %v; want allowed with 4 remaining", d.Decision, err)
	}
	api, err := set.Limiter("api")
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Reset(context.Background(), "", "192.0.2.3"); err != nil {
		t.Fatal(err)
	}
	if w := serve(h, "192.0.2.3:1"); w.Header().Get("X-RateLimit-Remaining") != "9" {
		t.Fatalf("after Reset: got remaining %s, want 9", w.Header().Get("X-RateLimit-Remaining"))
	}
	if _, err := set.Limiter("nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("got %v, want an error matching store.ErrNotFound", err)
	}
}

func TestBytesHaveNothingToReload(t *testing.T) {
	set, err := policy.New("embedded.yaml", []byte(twoPolicies), newStore(t), appOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Reload(); err == nil {
		t.Fatal("Reload: got nil, want an error")
	}
	if err := set.Watch(context.Background(), time.Second); err == nil {
		t.Fatal("Watch: got nil, want an error")
	}
	if s := set.Status(); s.Source != "embedded.yaml" || s.Failures != 0 {
		t.Fatalf("status: got source %q and %d failures", s.Source, s.Failures)
	}
}

func TestNilStore(t *testing.T) {
	if _, err := policy.New("x.yaml", []byte(twoPolicies), nil, appOptions()); err == nil {
		t.Fatal("got nil, want an error")
	}
}

// Watch returns when its context ends and leaves no goroutine behind.
func TestWatchStopsWithItsContext(t *testing.T) {
	set := load(t, writeFile(t, twoPolicies), newStore(t))
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 3)
	for range 3 {
		go func() { done <- set.Watch(ctx, time.Millisecond) }()
	}
	time.Sleep(10 * time.Millisecond) // let them poll a few times
	cancel()
	for range 3 {
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Watch returned %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Watch did not return after its context was canceled")
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("got %d goroutines, want %d as before Watch", runtime.NumGoroutine(), before)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	if err := set.Watch(context.Background(), 0); err == nil {
		t.Fatal("Watch with interval 0: got nil, want an error")
	}
}

func TestSwitchesAreLoggedAndReported(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	opts := appOptions()
	opts.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	path := writeFile(t, twoPolicies)
	set, err := policy.Load(path, newStore(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.SetMode("api", "off"); err != nil {
		t.Fatal(err)
	}
	rewrite(t, path, strings.Replace(twoPolicies, "  other:\n    key: ip\n", "  other:\n    key: ip\n    mode: dry_run\n", 1))
	if err := set.Reload(); err != nil {
		t.Fatal(err)
	}
	rewrite(t, path, "policies: [")
	if err := set.Reload(); err == nil {
		t.Fatal("got nil, want an error")
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, want := range []string{
		`level=WARN msg="ratekeeper: policy mode switched" policy=api from=enforce to=off by=SetMode`,
		`level=INFO msg="ratekeeper: policies reloaded" file=` + path + ` trigger=reload added=[] changed=[other] removed=[]`,
		`level=WARN msg="ratekeeper: policy mode switched" policy=other from=enforce to=dry_run by=file`,
		`level=ERROR msg="ratekeeper: policy reload failed; the running policies stay" file=` + path + ` trigger=reload error="` + path + `:1: invalid YAML`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log: missing %q in\n%s", want, out)
		}
	}
	s := set.Status()
	if s.Reloads != 1 || s.Failures != 1 || s.LastError == nil || len(s.Policies) != 2 {
		t.Fatalf("status: got %+v", s)
	}
	if p := s.Policies[0]; p.Name != "api" || p.Mode != "off" || p.Configured != "enforce" || !p.Overridden {
		t.Errorf("api: got %+v", p)
	}
	if p := s.Policies[1]; p.Name != "other" || p.Mode != "dry_run" || p.Configured != "dry_run" || p.Overridden {
		t.Errorf("other: got %+v", p)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestStatusConfig(t *testing.T) {
	set := load(t, "testdata/full.yaml", newStore(t))
	want := map[string]string{
		"api":     `{"classifier":"auth","mode":"enforce","tiers":{"anonymous":{"limits":[{"algorithm":"gcra","rate":10,"period":"1m"}]},"authenticated":{"limits":[{"name":"minute","algorithm":"gcra","rate":100,"period":"1m","burst":20},{"name":"hour","algorithm":"gcra","rate":2000,"period":"1h"}]},"trusted":{"unlimited":true},"suspended":{"suspended":true}},"headers":{"dialect":"both","reset":"epoch"}}`,
		"search":  `{"share":"api","cost":5,"mode":"enforce"}`,
		"login":   `{"key":"ip","mode":"dry_run","limits":[{"name":"minute","algorithm":"sliding_window_log","threshold":6,"period":"1m","block":"15m","block_max":"24h"}],"failure":"closed","headers":{"dialect":"omit","reset":"epoch"},"count_denied":true,"exempt":{"cidrs":["10.0.0.0/8"],"methods":["OPTIONS"]}}`,
		"reports": `{"key":"ip","mode":"enforce","limits":[{"algorithm":"token_bucket","rate":60,"period":"1h","burst":10}],"breaker":{"threshold":3,"cooldown":"2s"},"headers":{"dialect":"ietf","reset":"delta","bucket":true},"problem_details":true,"exempt":{"paths":["/reports/health","/reports/static/*"]}}`,
	}
	for _, p := range set.Status().Policies {
		if !json.Valid(p.Config) {
			t.Errorf("%s: invalid JSON %s", p.Name, p.Config)
		}
		if string(p.Config) != want[p.Name] {
			t.Errorf("%s:\ngot  %s\nwant %s", p.Name, p.Config, want[p.Name])
		}
	}
}

// The file's settings reach the limiter: headers, exemptions, failure
// mode, tiers, threshold.
func TestFileSettingsApply(t *testing.T) {
	set := load(t, "testdata/full.yaml", newStore(t))
	reports := set.Handler("reports")(okHandler)
	w := serve(reports, "192.0.2.9:1")
	if w.Header().Get("RateLimit-Policy") != `"reports";q=10;w=600` || w.Header().Get("X-RateLimit-Limit") != "" || w.Header().Get("X-RateLimit-Bucket") != "reports" {
		t.Errorf("reports headers: got %v, want IETF only with the bucket", w.Header())
	}
	r := httptest.NewRequest(http.MethodGet, "/reports/static/app.js", nil)
	r.RemoteAddr = "192.0.2.9:1"
	w = httptest.NewRecorder()
	reports.ServeHTTP(w, r)
	if w.Header().Get("RateLimit") != "" {
		t.Errorf("exempt path: got %v, want no rate-limit headers", w.Header())
	}

	login := set.Handler("login")(okHandler)
	for i := range 7 {
		// dry_run in the file: threshold 6 means 5 admitted, the rest
		// let through with Remaining 0.
		w := serve(login, "192.0.2.10:1")
		if w.Code != http.StatusOK || w.Header().Get("Retry-After") != "" {
			t.Fatalf("login attempt %d in dry run: got %d %v", i+1, w.Code, w.Header())
		}
	}
	if w := serve(login, "10.1.2.3:1"); w.Code != http.StatusOK {
		t.Fatalf("exempt CIDR: got %d", w.Code)
	}
	if err := set.SetMode("login", "enforce"); err != nil {
		t.Fatal(err)
	}
	w = serve(login, "192.0.2.11:1")
	for range 5 {
		w = serve(login, "192.0.2.11:1")
	}
	if w.Code != http.StatusTooManyRequests || w.Header().Get("X-RateLimit-Limit") != "" || w.Header().Get("Retry-After") != "900" {
		t.Fatalf("6th enforced login: got %d %v, want 429 with only Retry-After 900", w.Code, w.Header())
	}

	api := set.Handler("api")(okHandler)
	if w := serve(api, "192.0.2.12:1"); w.Header().Get("X-RateLimit-Limit") != "10" || w.Header().Get("RateLimit-Policy") == "" {
		t.Fatalf("api anonymous: got %v", w.Header())
	}
	r = httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.12:1"
	r.Header.Set("Authorization", "Bearer alice")
	w = httptest.NewRecorder()
	api.ServeHTTP(w, r)
	if w.Header().Get("X-RateLimit-Limit") != "20" || w.Header().Get("X-RateLimit-Remaining") != "19" {
		t.Fatalf("api authenticated: got %v, want the burst 20 of the minute limit", w.Header())
	}
}

// The Set's handler costs no allocation beyond the limiter's own.
func TestHandlerAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts: skipped in -short mode")
	}
	st := newStore(t)
	set := load(t, writeFile(t, `policies:
  api:
    key: ip
    limits: [{rate: 1000000000, period: 1h}]
`), st)
	direct, err := middleware.New(st, keyfunc.RemoteIP, store.Limit{Rate: 1e9, Period: time.Hour}, middleware.Options{Name: "direct", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	measure := func(h http.Handler) float64 {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "192.0.2.20:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return testing.AllocsPerRun(200, func() {
			clear(w.Header())
			h.ServeHTTP(w, r)
		})
	}
	viaSet, alone := measure(set.Handler("api")(okHandler)), measure(direct.Handler(okHandler))
	if viaSet > alone {
		t.Fatalf("got %.1f allocations per request through the Set, want at most the limiter's %.1f", viaSet, alone)
	}
}

// Requests, reloads and mode switches run concurrently (under -race):
// every request gets an answer of the policy of the moment.
func TestConcurrentReloadsAndSwitches(t *testing.T) {
	path := writeFile(t, twoPolicies)
	set := load(t, path, newStore(t))
	h := set.Handler("api")(okHandler)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			client := "192.0.2." + string(rune('1'+i)) + ":1"
			for ctx.Err() == nil {
				if w := serve(h, client); w.Code != http.StatusOK && w.Code != http.StatusTooManyRequests {
					t.Errorf("got %d", w.Code)
					return
				}
			}
		})
	}
	rates := []string{"rate: 10", "rate: 3", "rate: 100"}
	for i := range 30 {
		rewrite(t, path, strings.Replace(twoPolicies, "rate: 10", rates[i%3], 1))
		if err := set.Reload(); err != nil {
			t.Fatal(err)
		}
		if err := set.SetMode("api", []policy.Mode{"enforce", "dry_run", "off"}[i%3]); err != nil {
			t.Fatal(err)
		}
		_ = set.Status()
	}
	cancel()
	wg.Wait()
}

// Modes are written as in the file and JSON; SetMode refuses any other.
func TestModeText(t *testing.T) {
	set, err := policy.New("p.yaml", []byte("policies:\n  api: {key: ip, limits: [{rate: 5, period: 1m}]}\n"), newStore(t), policy.Options{
		Keys:   map[string]keyfunc.KeyFunc{"ip": keyfunc.RemoteIP},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []policy.Mode{"enforce", "dry_run", "off"} {
		if err := set.SetMode("api", m); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if got := set.Status().Policies[0].Mode; got != m {
			t.Fatalf("got %s, want %s", got, m)
		}
		b, err := json.Marshal(m)
		if err != nil || string(b) != `"`+string(m)+`"` {
			t.Fatalf("%s: got %s, %v", m, b, err)
		}
	}
	for _, m := range []policy.Mode{"shadow", "Off", "7"} {
		if err := set.SetMode("api", m); err == nil {
			t.Fatalf("SetMode(%q): got nil, want an error", m)
		}
	}
	if err := (&policy.Set{}).SetMode("x", "dry-run"); err == nil {
		t.Fatal("SetMode of an invalid mode: got nil, want an error")
	}
}

// A policy of algorithm suppressed sheds load through package
// store/suppressed over the Set's store: the soft limit's requests pass
// with factor 0, the hard limit (X-RateLimit-Limit) holds, every response
// carries the factor, and the policy's exported form gives the soft limit.
func TestSuppressedPolicy(t *testing.T) {
	st, err := memstore.New(memstore.Options{Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	const file = `policies:
  search:
    key: ip
    limits: [{algorithm: suppressed, rate: 2, burst: 3, period: 1h}]
`
	set := load(t, writeFile(t, file), st)
	h := set.Handler("search")(okHandler)
	var got []string
	for range 4 {
		w := serve(h, "192.0.2.20:1")
		got = append(got, fmt.Sprintf("%d %s %s", w.Code, w.Header().Get("X-RateLimit-Limit"), w.Header().Get("X-RateLimit-Suppression")))
	}
	// Two below the soft limit; the third meets 1 − 2·(3−2)/((3−2)·3) and
	// is refused by the draw 0; the fourth, 1 − 2/4.
	if want := []string{"200 3 0", "200 3 0", "429 3 0.333333", "429 3 0.5"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	ps, err := policy.Parse("policies.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	l := ps[0].Limits[0]
	if l.Algorithm != store.SlidingWindowCounter || l.Rate != 3 || ps[0].Soft == nil || ps[0].Soft(l) != 2 {
		t.Fatalf("exported form: got limit %+v, soft set %t; want a sliding window counter of 3 with soft limit 2", l, ps[0].Soft != nil)
	}
	if _, err := policy.Parse("policies.yaml", []byte(strings.Replace(file, "[{algorithm: suppressed", "[{rate: 5, period: 1m}, {algorithm: suppressed", 1))); err == nil {
		t.Error("a policy mixing suppressed and counting limits: got no error, want one")
	}
}

// A policy on a group and again on a route of it charges a request once,
// from the first request on and after every reload and mode switch: the
// Set wraps every handler of a generation before it runs, so its limiter
// knows from the start that a request may pass it twice.
func TestSamePolicyTwiceChargesOnce(t *testing.T) {
	const text = "policies:\n  api:\n    key: ip\n    limits: [{name: h, rate: 10, period: 1h}]\n"
	path := writeFile(t, text)
	set, err := policy.Load(path, newStore(t), policy.Options{Keys: map[string]keyfunc.KeyFunc{"ip": keyfunc.RemoteIP}})
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mux := http.NewServeMux()
	mux.Handle("/api/", set.Handler("api")(set.Handler("api")(ok)))
	do := func() string {
		r := httptest.NewRequest("GET", "/api/x", nil)
		r.RemoteAddr = "192.0.2.1:1"
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("status %d", w.Code)
		}
		return w.Header().Get("X-Ratelimit-Remaining")
	}
	if got := do(); got != "9" {
		t.Fatalf("first request: remaining %s, want 9", got)
	}
	want := 8
	for i := range 3 {
		rewrite(t, path, text+fmt.Sprintf("# %d\n", i))
		if err := set.Reload(); err != nil {
			t.Fatal(err)
		}
		if got := do(); got != fmt.Sprint(want) {
			t.Fatalf("first request after reload %d: remaining %s, want %d", i+1, got, want)
		}
		want--
	}
	for _, m := range []policy.Mode{"dry_run", "enforce"} {
		if err := set.SetMode("api", m); err != nil {
			t.Fatal(err)
		}
		if got := do(); got != fmt.Sprint(want) {
			t.Fatalf("first request in mode %s: remaining %s, want %d", m, got, want)
		}
		want--
	}
}
