package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/internal/testlog"
	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/middleware/policy"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// testPolicies has a plain policy, a login policy that blocks, a policy
// with tiers and one that shares the plain policy's quota.
const testPolicies = `
policies:
  api:
    key: ip
    limits:
      - {name: minute, rate: 3, period: 1m}
    overrides: true
  search:
    share: api
    cost: 2
  login:
    key: ip
    limits:
      - {name: minute, algorithm: sliding_window_log, threshold: 3, period: 1m, block: 15m}
    count_denied: true
  plans:
    classifier: plan
    tiers:
      free:
        limits:
          - {rate: 2, period: 1m}
      gold: {unlimited: true}
`

// fixture is a policy set on a memory store, the admin API over it and
// the application's routes.
type fixture struct {
	set   *policy.Set
	store store.Store
	api   http.Handler
	app   *http.ServeMux
	log   *testlog.Buffer
}

// allowAll authorizes every request as "alice".
func allowAll(*http.Request) (string, error) { return "alice", nil }

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	return newFixtureWith(t, opts, nil)
}

// newFixtureWith is newFixture with the admin API given wrap(st) as its
// store, st being the memory store the policies run on (nil: st).
func newFixtureWith(t *testing.T, opts Options, wrap func(store.Store) store.Store) *fixture {
	t.Helper()
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan := classifyFunc(func(r *http.Request) (string, string, error) {
		return r.Header.Get("Plan"), r.Header.Get("User"), nil
	})
	set, err := policy.New("policies.yaml", []byte(testPolicies), st, policy.Options{
		Keys:        map[string]keyfunc.KeyFunc{"ip": keyfunc.RemoteIP},
		Classifiers: map[string]middleware.Classifier{"plan": plan},
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{set: set, store: st, log: &testlog.Buffer{}}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(f.log, nil))
	}
	var apiStore store.Store = st
	if wrap != nil {
		apiStore = wrap(st)
	}
	f.api, err = New(set, apiStore, opts)
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	f.app = http.NewServeMux()
	f.app.Handle("GET /api", set.Handler("api")(ok))
	f.app.Handle("GET /search", set.Handler("search")(ok))
	f.app.Handle("POST /login", set.Handler("login")(ok))
	f.app.Handle("GET /plans", set.Handler("plans")(ok))
	return f
}

// hit sends method path from client to the application and returns the
// status.
func (f *fixture) hit(method, path, client string) int {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = client + ":4000"
	w := httptest.NewRecorder()
	f.app.ServeHTTP(w, r)
	return w.Code
}

// call sends a request to the admin API; a non-empty body is sent as JSON.
func (f *fixture) call(method, path, body string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	f.api.ServeHTTP(w, r)
	return w
}

// decode decodes w's JSON body into v, failing the test unless the
// status is want.
func decode(t *testing.T, w *httptest.ResponseRecorder, want int, v any) {
	t.Helper()
	if w.Code != want {
		t.Fatalf("got status %d, want %d; body %s", w.Code, want, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("got Content-Type %q, want application/json", ct)
	}
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		t.Fatalf("decode %s: %v", w.Body, err)
	}
}

// endpoints are one request to every endpoint.
var endpoints = []struct{ method, path, body string }{
	{"GET", "/policies", ""},
	{"GET", "/policies/api", ""},
	{"GET", "/policies/api/client?identity=192.0.2.1", ""},
	{"POST", "/policies/api/reset", `{"identity":"192.0.2.1"}`},
	{"POST", "/policies/api/mode", `{"mode":"off"}`},
	{"POST", "/policies/api/override", `{"identity":"192.0.2.1","kind":"exempt","ttl":"1h"}`},
	{"POST", "/policies/api/override/clear", `{"identity":"192.0.2.1"}`},
	{"GET", "/policies/login/blocked", ""},
	{"GET", "/policies/api/top", ""},
	{"GET", "/nothing-here", ""},
}

func TestNoAuthorizeRefusesEverything(t *testing.T) {
	f := newFixture(t, Options{})
	for _, e := range endpoints {
		t.Run(e.method+" "+e.path, func(t *testing.T) {
			var body errorJSON
			decode(t, f.call(e.method, e.path, e.body), http.StatusForbidden, &body)
			if body.Error != "forbidden" {
				t.Errorf("got error %q, want forbidden", body.Error)
			}
		})
	}
	if m := f.set.Status().Policies[0].Mode; m != "enforce" {
		t.Errorf("got mode %s after refused calls, want enforce", m)
	}
}

func TestAuthorizeFailures(t *testing.T) {
	tests := []struct {
		name      string
		authorize func(*http.Request) (string, error)
		want      int
	}{
		{"no credentials", func(*http.Request) (string, error) {
			return "", ErrUnauthenticated
		}, http.StatusUnauthorized},
		{"bad token", func(*http.Request) (string, error) {
			return "", errors.Join(errors.New("token expired"), ErrUnauthenticated)
		}, http.StatusUnauthorized},
		{"not allowed", func(*http.Request) (string, error) {
			return "bob", errors.New("bob may not do this")
		}, http.StatusForbidden},
		{"empty caller", func(*http.Request) (string, error) {
			return "", nil
		}, http.StatusForbidden},
		{"reads only", func(r *http.Request) (string, error) {
			if r.Method != http.MethodGet {
				return "", errors.New("read-only operator")
			}
			return "carol", nil
		}, http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{Authorize: tt.authorize})
			for _, e := range endpoints {
				if tt.name == "reads only" && e.method == "GET" {
					continue
				}
				w := f.call(e.method, e.path, e.body)
				var body errorJSON
				decode(t, w, tt.want, &body)
				if strings.Contains(w.Body.String(), "expired") || strings.Contains(w.Body.String(), "bob") {
					t.Errorf("%s %s: the authorization error reached the client: %s", e.method, e.path, w.Body)
				}
			}
			if !strings.Contains(f.log.String(), "ratekeeper: admin: refused") {
				t.Errorf("refusals not logged: %s", f.log)
			}
			if m := f.set.Status().Policies[0].Mode; m != "enforce" {
				t.Errorf("got mode %s after refused calls, want enforce", m)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	st, _ := memstore.New(memstore.Options{})
	if _, err := New(nil, st, Options{}); err == nil {
		t.Error("New(nil set): got nil error")
	}
	f := newFixture(t, Options{})
	if _, err := New(f.set, nil, Options{}); err == nil {
		t.Error("New(nil store): got nil error")
	}
}

func TestListPolicies(t *testing.T) {
	f := newFixture(t, Options{Authorize: allowAll})
	var got statusJSON
	decode(t, f.call("GET", "/policies", ""), http.StatusOK, &got)
	var names []string
	for _, p := range got.Policies {
		names = append(names, p.Name+"="+p.Mode)
	}
	if want := "api=enforce search=enforce login=enforce plans=enforce"; strings.Join(names, " ") != want {
		t.Errorf("got %s, want %s", strings.Join(names, " "), want)
	}
	if got.Source != "policies.yaml" || len(got.Checksum) != 64 {
		t.Errorf("got source %q checksum %q", got.Source, got.Checksum)
	}
	var one policyJSON
	decode(t, f.call("GET", "/policies/login", ""), http.StatusOK, &one)
	if !strings.Contains(string(one.Config), `"block":"15m"`) {
		t.Errorf("got config %s, want the login limit's block", one.Config)
	}
	var e errorJSON
	decode(t, f.call("GET", "/policies/nope", ""), http.StatusNotFound, &e)
	if e.Error != "unknown_policy" {
		t.Errorf("got error %q, want unknown_policy", e.Error)
	}
}

// TestShowClientAsItIs pins the reset the API showed for a client with
// nothing used: one emission interval in the future (20 s of 3/min), the
// state after a hypothetical request. Nothing used is 3 of 3 remaining and
// a reset now; one request used resets 20 s after it, not 40 s.
func TestShowClientAsItIs(t *testing.T) {
	f := newFixture(t, Options{Authorize: allowAll})
	now := time.Now().UTC()
	f.api.(*api).now = func() time.Time { return now }
	var got clientJSON
	decode(t, f.call("GET", "/policies/api/client?identity=192.0.2.2", ""), http.StatusOK, &got)
	if got.State == nil || got.State.Remaining != 3 || got.State.Capacity != 3 || !got.State.Reset.Equal(now) {
		t.Fatalf("nothing used: got %+v, want 3 of 3 remaining and reset %s (now)", got.State, now)
	}
	f.hit("GET", "/api", "192.0.2.2")
	decode(t, f.call("GET", "/policies/api/client?identity=192.0.2.2", ""), http.StatusOK, &got)
	if reset := got.State.Reset.Sub(now); got.State.Remaining != 2 || reset > 20*time.Second || reset < 19*time.Second {
		t.Errorf("one used: got %d remaining, reset in %s; want 2 and 20 s (less the time since the request)", got.State.Remaining, reset)
	}
}

func TestShowClient(t *testing.T) {
	f := newFixture(t, Options{Authorize: allowAll})
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	f.api.(*api).now = func() time.Time { return now }
	for range 2 {
		f.hit("GET", "/api", "192.0.2.1")
	}
	var got clientJSON
	decode(t, f.call("GET", "/policies/api/client?identity=192.0.2.1", ""), http.StatusOK, &got)
	if got.State == nil || got.State.Remaining != 1 || got.State.Capacity != 3 || got.State.Limit != "minute" || got.State.Blocked {
		t.Fatalf("got %+v, want 1 of 3 remaining under minute, not blocked", got.State)
	}
	// Peeking records nothing: the client still has its last request.
	if code := f.hit("GET", "/api", "192.0.2.1"); code != http.StatusOK {
		t.Fatalf("got %d after a peek, want 200", code)
	}
	// search shares api's quota: the same counters, now empty.
	decode(t, f.call("GET", "/policies/search/client?identity=192.0.2.1", ""), http.StatusOK, &got)
	if got.State.Remaining != 0 {
		t.Errorf("search: got remaining %d, want 0 (api's counters)", got.State.Remaining)
	}

	// Two failed logins allowed, the third refused and blocked.
	for range 3 {
		f.hit("POST", "/login", "198.51.100.7")
	}
	decode(t, f.call("GET", "/policies/login/client?identity=198.51.100.7", ""), http.StatusOK, &got)
	if !got.State.Blocked || got.State.BlockedUntil == nil || got.State.RetryAfter != 900 {
		t.Fatalf("got %+v, want blocked for 900 s", got.State)
	}
	// The block started a moment before the peek, on the store's clock.
	if until, want := *got.State.BlockedUntil, now.Add(15*time.Minute); until.After(want) || until.Before(want.Add(-time.Second)) {
		t.Errorf("got blocked_until %s, want within a second before %s", until, want)
	}

	r := httptest.NewRequest("GET", "/plans", nil)
	r.Header.Set("Plan", "free")
	r.Header.Set("User", "dora")
	f.app.ServeHTTP(httptest.NewRecorder(), r)
	decode(t, f.call("GET", "/policies/plans/client?identity=dora&tier=free", ""), http.StatusOK, &got)
	if got.Tier != "free" || got.State.Remaining != 1 {
		t.Errorf("got %+v %+v, want tier free with 1 remaining", got, got.State)
	}
	got = clientJSON{}
	decode(t, f.call("GET", "/policies/plans/client?identity=dora&tier=gold", ""), http.StatusOK, &got)
	if !got.Unlimited || got.State != nil {
		t.Errorf("gold: got %+v, want unlimited without state", got)
	}

	bad := []struct{ name, path string }{
		{"no identity", "/policies/api/client"},
		{"tier on a plain policy", "/policies/api/client?identity=x&tier=free"},
		{"tier missing", "/policies/plans/client?identity=dora"},
		{"unknown tier", "/policies/plans/client?identity=dora&tier=platinum"},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			var e errorJSON
			decode(t, f.call("GET", b.path, ""), http.StatusBadRequest, &e)
			if e.Message == "" {
				t.Error("got an empty message")
			}
		})
	}
}

func TestResetClient(t *testing.T) {
	f := newFixture(t, Options{Authorize: allowAll})
	for range 3 {
		f.hit("POST", "/login", "198.51.100.7")
	}
	if code := f.hit("POST", "/login", "198.51.100.7"); code != http.StatusTooManyRequests {
		t.Fatalf("got %d, want 429 while blocked", code)
	}
	var got resetJSON
	decode(t, f.call("POST", "/policies/login/reset", `{"identity":"198.51.100.7"}`), http.StatusOK, &got)
	if !got.Found {
		t.Error("got found false, want true")
	}
	if code := f.hit("POST", "/login", "198.51.100.7"); code != http.StatusOK {
		t.Errorf("got %d after the reset, want 200", code)
	}
	log := f.log.String()
	for _, want := range []string{`"who":"alice"`, `"action":"reset"`, `"policy":"login"`, `"identity":"198.51.100.7"`} {
		if !strings.Contains(log, want) {
			t.Errorf("audit log lacks %s: %s", want, log)
		}
	}

	decode(t, f.call("POST", "/policies/login/reset", `{"identity":"203.0.113.99"}`), http.StatusOK, &got)
	if got.Found {
		t.Error("unknown client: got found true, want false")
	}

	// Tiers: reset the free tier's dora.
	r := httptest.NewRequest("GET", "/plans", nil)
	r.Header.Set("Plan", "free")
	r.Header.Set("User", "dora")
	f.app.ServeHTTP(httptest.NewRecorder(), r)
	decode(t, f.call("POST", "/policies/plans/reset", `{"identity":"dora","tier":"free"}`), http.StatusOK, &got)
	if !got.Found || got.Tier != "free" {
		t.Errorf("got %+v, want dora found in tier free", got)
	}

	bad := []struct {
		name, body, contentType string
		want                    int
	}{
		{"no content type", `{"identity":"x"}`, "", http.StatusUnsupportedMediaType},
		{"form", `identity=x`, "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
		{"unknown field", `{"identity":"x","all":true}`, "application/json", http.StatusBadRequest},
		{"no identity", `{}`, "application/json", http.StatusBadRequest},
		{"not JSON", `{`, "application/json", http.StatusBadRequest},
		{"a second object", `{"identity":"x"}{"identity":"y","evil":1}`, "application/json", http.StatusBadRequest},
		{"text after the object", `{"identity":"x"} garbage`, "application/json", http.StatusBadRequest},
		{"too large after the object", `{"identity":"x"} ` + strings.Repeat(" ", maxBody), "application/json", http.StatusRequestEntityTooLarge},
		{"too large", `{"identity":"` + strings.Repeat("x", maxBody) + `"}`, "application/json", http.StatusRequestEntityTooLarge},
		{"at the limit", `{"identity":"` + strings.Repeat("x", maxBody-len(`{"identity":"","x":1}`)) + `","x":1}`, "application/json", http.StatusBadRequest},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/policies/login/reset", strings.NewReader(b.body))
			if b.contentType != "" {
				r.Header.Set("Content-Type", b.contentType)
			}
			w := httptest.NewRecorder()
			f.api.ServeHTTP(w, r)
			var e errorJSON
			decode(t, w, b.want, &e)
		})
	}
	if w := f.call("GET", "/policies/login/reset", ""); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET reset: got %d, want 405", w.Code)
	}
}

func TestSwitchMode(t *testing.T) {
	f := newFixture(t, Options{Authorize: allowAll})
	for range 3 {
		f.hit("GET", "/api", "192.0.2.1")
	}
	if code := f.hit("GET", "/api", "192.0.2.1"); code != http.StatusTooManyRequests {
		t.Fatalf("got %d, want 429", code)
	}
	var got policyJSON
	decode(t, f.call("POST", "/policies/api/mode", `{"mode":"off"}`), http.StatusOK, &got)
	if got.Mode != "off" || got.Configured != "enforce" || !got.Overridden {
		t.Errorf("got %+v, want off, configured enforce, overridden", got)
	}
	if code := f.hit("GET", "/api", "192.0.2.1"); code != http.StatusOK {
		t.Errorf("off: got %d, want 200", code)
	}
	if !strings.Contains(f.log.String(), `"action":"mode","policy":"api","request":"off","before":"enforce","after":"off"`) {
		t.Errorf("audit log lacks the switch: %s", f.log)
	}
	decode(t, f.call("POST", "/policies/api/mode", `{"mode":"clear"}`), http.StatusOK, &got)
	if got.Mode != "enforce" || got.Overridden {
		t.Errorf("got %+v, want enforce, not overridden", got)
	}
	if code := f.hit("GET", "/api", "192.0.2.1"); code != http.StatusTooManyRequests {
		t.Errorf("cleared: got %d, want 429", code)
	}
	var e errorJSON
	decode(t, f.call("POST", "/policies/api/mode", `{"mode":"loose"}`), http.StatusBadRequest, &e)
	decode(t, f.call("POST", "/policies/nope/mode", `{"mode":"off"}`), http.StatusNotFound, &e)
}

// plainStore hides every capability of the store it wraps.
type plainStore struct{ store.Store }

// fakeLister serves blocks from a list, two per page, over a store whose
// decisions it forwards.
type fakeLister struct {
	store.Store
	blocks []store.Block
	err    error
	gotNS  string
}

func (l *fakeLister) Blocks(_ context.Context, ns, cursor string, count int) ([]store.Block, string, error) {
	l.gotNS = ns
	if l.err != nil {
		return nil, "", l.err
	}
	start := 0
	if cursor != "" {
		if cursor != "page2" {
			return nil, "", fmt.Errorf("%w: invalid cursor", store.ErrInvalidRequest)
		}
		start = 2
	}
	end := min(start+min(count, 2), len(l.blocks))
	next := ""
	if end < len(l.blocks) {
		next = "page2"
	}
	return l.blocks[start:end], next, nil
}

func TestBlocked(t *testing.T) {
	var e errorJSON
	f := newFixtureWith(t, Options{Authorize: allowAll}, func(st store.Store) store.Store { return plainStore{st} })
	decode(t, f.call("GET", "/policies/login/blocked", ""), http.StatusNotImplemented, &e)
	if e.Error != "not_supported" {
		t.Errorf("got error %q, want not_supported", e.Error)
	}

	l := &fakeLister{blocks: []store.Block{
		{Key: "plans/free:dora", Scope: "gcra/1m0s", Remaining: 90 * time.Second},
		{Key: "plans/free:ed:1", Scope: "gcra/1m0s", Remaining: time.Second},
		{Key: "plans/free:[::1]", Scope: "gcra/1m0s", Remaining: 1500 * time.Millisecond},
	}}
	f = newFixtureWith(t, Options{Authorize: allowAll}, func(st store.Store) store.Store { l.Store = st; return l })
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	f.api.(*api).now = func() time.Time { return now }
	var got blockedJSON
	decode(t, f.call("GET", "/policies/plans/blocked", ""), http.StatusOK, &got)
	if l.gotNS != "plans/" {
		t.Errorf("got namespace %q, want plans/", l.gotNS)
	}
	if len(got.Clients) != 2 || got.Cursor != "page2" {
		t.Fatalf("got %+v, want 2 clients and cursor page2", got)
	}
	if c := got.Clients[1]; c.Tier != "free" || c.Identity != "ed:1" || c.RetryAfter != 1 || !c.Until.Equal(now.Add(time.Second)) {
		t.Errorf("got %+v, want ed:1 of tier free for 1 s", c)
	}
	decode(t, f.call("GET", "/policies/plans/blocked?cursor=page2", ""), http.StatusOK, &got)
	if len(got.Clients) != 1 || got.Cursor != "" || got.Clients[0].Identity != "[::1]" || got.Clients[0].RetryAfter != 2 {
		t.Errorf("page 2: got %+v, want [::1] for 2 s, no cursor", got)
	}
	decode(t, f.call("GET", "/policies/login/blocked", ""), http.StatusOK, &got)
	if l.gotNS != "login:" {
		t.Errorf("got namespace %q, want login:", l.gotNS)
	}
	decode(t, f.call("GET", "/policies/search/blocked", ""), http.StatusOK, &got)
	if l.gotNS != "api:" {
		t.Errorf("search: got namespace %q, want api: (the shared quota)", l.gotNS)
	}
	for _, q := range []string{"count=0", "count=1001", "count=x", "cursor=bogus"} {
		decode(t, f.call("GET", "/policies/login/blocked?"+q, ""), http.StatusBadRequest, &e)
	}

	l.err = fmt.Errorf("hybrid: the backend does not list its blocks: %w", errors.ErrUnsupported)
	decode(t, f.call("GET", "/policies/login/blocked", ""), http.StatusNotImplemented, &e)
	l.err = errors.New("dial tcp 10.0.0.1:6379: connection refused")
	w := f.call("GET", "/policies/login/blocked", "")
	decode(t, w, http.StatusServiceUnavailable, &e)
	if strings.Contains(w.Body.String(), "10.0.0.1") {
		t.Errorf("the store's error reached the client: %s", w.Body)
	}
	if !strings.Contains(f.log.String(), "connection refused") {
		t.Errorf("the store's error was not logged: %s", f.log)
	}
}

// TestBlockedOnMemoryStore: the memory store lists the clients its
// policies blocked, through the API, with their identity, scope and
// remaining time.
func TestBlockedOnMemoryStore(t *testing.T) {
	f := newFixture(t, Options{Authorize: allowAll})
	for range 3 {
		f.hit("POST", "/login", "192.0.2.7")
	}
	f.hit("POST", "/login", "192.0.2.8")
	var got blockedJSON
	decode(t, f.call("GET", "/policies/login/blocked", ""), http.StatusOK, &got)
	if len(got.Clients) != 1 || got.Cursor != "" {
		t.Fatalf("got %+v, want one client and no cursor", got)
	}
	if c := got.Clients[0]; c.Identity != "192.0.2.7" || c.Tier != "" || c.Scope != "minute" || c.RetryAfter < 899 || c.RetryAfter > 900 {
		t.Errorf("got %+v, want 192.0.2.7 blocked by minute for 900 s", c)
	}
	decode(t, f.call("GET", "/policies/api/blocked", ""), http.StatusOK, &got)
	if len(got.Clients) != 0 {
		t.Errorf("api: got %+v, want no client", got)
	}
}

// failingStore fails every call, as an unreachable Redis does.
type failingStore struct{}

func (failingStore) Take(context.Context, store.Request) (store.Decision, error) {
	return store.Decision{}, &store.BackendError{Op: "take", Kind: "connection", Err: errors.New("secret-host:6379 refused")}
}

func (failingStore) Peek(context.Context, store.Request) (store.Decision, error) {
	return store.Decision{}, &store.BackendError{Op: "peek", Kind: "connection", Err: errors.New("secret-host:6379 refused")}
}

func (failingStore) Reset(context.Context, store.Request) error {
	return &store.BackendError{Op: "reset", Kind: "connection", Err: errors.New("secret-host:6379 refused")}
}

func (failingStore) SetOverride(context.Context, string, store.Override) error {
	return &store.BackendError{Op: "override", Kind: "connection", Err: errors.New("secret-host:6379 refused")}
}

func (failingStore) GetOverride(context.Context, string) (store.Override, error) {
	return store.Override{}, &store.BackendError{Op: "override", Kind: "connection", Err: errors.New("secret-host:6379 refused")}
}

func (failingStore) ClearOverride(context.Context, string) error {
	return &store.BackendError{Op: "override", Kind: "connection", Err: errors.New("secret-host:6379 refused")}
}

func TestStoreFailureIs503(t *testing.T) {
	set, err := policy.New("p.yaml", []byte(testPolicies), failingStore{}, policy.Options{
		Keys:        map[string]keyfunc.KeyFunc{"ip": keyfunc.RemoteIP},
		Classifiers: map[string]middleware.Classifier{"plan": classifyFunc(func(*http.Request) (string, string, error) { return "free", "x", nil })},
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(set, failingStore{}, Options{Authorize: allowAll, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{api: h}
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/policies/api/client?identity=x", ""},
		{"POST", "/policies/api/reset", `{"identity":"x"}`},
		{"POST", "/policies/api/override", `{"identity":"x","kind":"exempt","ttl":"1h"}`},
		{"POST", "/policies/api/override/clear", `{"identity":"x"}`},
	} {
		w := f.call(c.method, c.path, c.body)
		var e errorJSON
		decode(t, w, http.StatusServiceUnavailable, &e)
		if strings.Contains(w.Body.String(), "secret-host") {
			t.Errorf("%s: the store's error reached the client: %s", c.path, w.Body)
		}
	}
}

func TestTopEndpoint(t *testing.T) {
	var e errorJSON
	f := newFixture(t, Options{Authorize: allowAll})
	decode(t, f.call("GET", "/policies/api/top", ""), http.StatusNotImplemented, &e)

	if _, err := New(f.set, f.store, Options{Top: &Top{Clients: 10, Minutes: 61}}); err == nil {
		t.Fatal("New with Top.Minutes 61: got nil error, want one")
	}
	top := &Top{Clients: 10, Minutes: 5}
	f = newFixture(t, Options{Authorize: allowAll, Top: top})
	lim, err := f.set.Limiter("api")
	if err != nil {
		t.Fatal(err)
	}
	// The application records refusals where it knows the identity.
	for _, id := range []string{"a", "a", "a", "a", "a", "b", "b", "b", "b", "c"} {
		d, err := lim.Allow(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		top.Record(d, id)
	}
	var got topJSON
	decode(t, f.call("GET", "/policies/api/top?n=5", ""), http.StatusOK, &got)
	if got.Minutes != 5 || len(got.Clients) != 2 {
		t.Fatalf("got %+v, want a (2 refusals) and b (1)", got)
	}
	if got.Scope != "instance" {
		t.Errorf("scope: got %q, want \"instance\" (the list covers this instance's refusals)", got.Scope)
	}
	if a, b := got.Clients[0], got.Clients[1]; a.Identity != "a" || a.Count != 2 || b.Identity != "b" || b.Count != 1 {
		t.Errorf("got %+v, want a:2 then b:1", got.Clients)
	}
	decode(t, f.call("GET", "/policies/api/top?n=1&minutes=1", ""), http.StatusOK, &got)
	if len(got.Clients) != 1 || got.Minutes != 1 {
		t.Errorf("got %+v, want one client over 1 minute", got)
	}
	for _, q := range []string{"n=0", "n=11", "minutes=6", "minutes=-1"} {
		decode(t, f.call("GET", "/policies/api/top?"+q, ""), http.StatusBadRequest, &e)
	}
}

func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t, Options{Authorize: allowAll})
	for _, auth := range []bool{true, false} {
		if !auth {
			f = newFixture(t, Options{})
		}
		w := f.call("GET", "/policies", "")
		if w.Header().Get("Cache-Control") != "no-store" || w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("authorized %v: got headers %v", auth, w.Header())
		}
	}
}

// classifyFunc adapts a function to a middleware.Classifier.
type classifyFunc func(r *http.Request) (tier, identity string, err error)

func (f classifyFunc) Classify(r *http.Request) (string, string, error) { return f(r) }

// TestIdentityInAnotherForm: an identity that names a client address in a
// form the IP key functions never give is refused with the form they
// give, on every endpoint that takes an identity, so that an override or
// a reset never silently misses its client; the form they give works.
func TestIdentityInAnotherForm(t *testing.T) {
	f := newFixture(t, Options{Authorize: allowAll})
	calls := []struct{ method, path, body string }{
		{"GET", "/policies/api/client?identity=%3A%3Affff%3A198.51.100.7", ""},
		{"POST", "/policies/api/reset", `{"identity":"::ffff:198.51.100.7"}`},
		{"POST", "/policies/api/override", `{"identity":"::ffff:198.51.100.7","kind":"suspend","ttl":"1h"}`},
		{"POST", "/policies/api/override/clear", `{"identity":"::ffff:198.51.100.7"}`},
	}
	for _, c := range calls {
		w := f.call(c.method, c.path, c.body)
		var e errorJSON
		decode(t, w, http.StatusBadRequest, &e)
		if !strings.Contains(w.Body.String(), `198.51.100.7`) || !strings.Contains(w.Body.String(), "no IP key function gives") {
			t.Errorf("%s %s: %s, want the form the key functions give", c.method, c.path, w.Body)
		}
	}
	if code := f.hit("GET", "/api", "[::ffff:198.51.100.7]"); code != http.StatusOK {
		t.Fatalf("before the suspension: got %d, want 200", code)
	}
	var ov map[string]any
	decode(t, f.call("POST", "/policies/api/override", `{"identity":"198.51.100.7","kind":"suspend","ttl":"1h"}`), http.StatusOK, &ov)
	if code := f.hit("GET", "/api", "[::ffff:198.51.100.7]"); code != http.StatusForbidden {
		t.Errorf("the client, from its IPv4-mapped address, after its suspension: got %d, want 403", code)
	}
}

// TestRefusalsLoggedOncePerSecond: refused calls write at most one line a
// second, which says how many it held back, and a long path is cut.
func TestRefusalsLoggedOncePerSecond(t *testing.T) {
	f := newFixture(t, Options{Authorize: func(*http.Request) (string, error) { return "", ErrUnauthenticated }})
	now := time.Unix(1_000_000, 0)
	f.api.(*api).now = func() time.Time { return now }
	long := "/policies/" + strings.Repeat("A", 10_000)
	for range 50 {
		if w := f.call("GET", long, ""); w.Code != http.StatusUnauthorized {
			t.Fatalf("got %d, want 401", w.Code)
		}
	}
	now = now.Add(time.Second)
	f.call("GET", "/policies", "")
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(f.log.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("got %d log lines for 51 refusals a second apart, want 2: %s", len(lines), f.log)
	}
	if p, _ := lines[0]["path"].(string); len(p) > maxLogged+len("…(cut)") || !strings.HasSuffix(p, "…(cut)") {
		t.Errorf("first line's path: %d bytes %q, want it cut to %d", len(p), p, maxLogged)
	}
	if n, _ := lines[1]["not_logged"].(float64); n != 49 {
		t.Errorf("second line: not_logged %v, want 49", lines[1]["not_logged"])
	}
}

// A policy that bounds requests in flight alone keeps no rate state: its
// client is reported without one, not as a store failure.
func TestClientOfInFlightOnlyPolicy(t *testing.T) {
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := policy.New("p.yaml", []byte("policies:\n  reports:\n    key: ip\n    in_flight: {max: 4}\n"), st,
		policy.Options{Keys: map[string]keyfunc.KeyFunc{"ip": keyfunc.RemoteIP}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	log := &testlog.Buffer{}
	api, err := New(set, st, Options{Authorize: allowAll, Logger: slog.New(slog.NewJSONHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	api.ServeHTTP(w, httptest.NewRequest("GET", "/policies/reports/client?identity=192.0.2.1", nil))
	var got map[string]any
	decode(t, w, http.StatusOK, &got)
	if _, ok := got["state"]; ok || got["policy"] != "reports" || got["identity"] != "192.0.2.1" {
		t.Errorf("got %v, want the client without a state", got)
	}
	if strings.Contains(log.String(), "store") {
		t.Errorf("logged a store failure: %s", log.String())
	}
}
