package middleware

import (
	"context"
	"encoding/json"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/suppressed"
)

// ipAndRoute returns a per-IP limiter of ip per minute and a route-wide
// one of route per minute on s.
func ipAndRoute(t *testing.T, s store.Store, ip, route int64, opts ...Options) (*Limiter, *Limiter) {
	t.Helper()
	o := quietly(opts)
	o.Name = "ip"
	perIP := mustNew(t, s, keyfunc.RemoteIP, store.PerMinute(ip), o)
	o.Name = "route"
	perRoute := mustNew(t, s, keyfunc.Constant("/search"), store.PerMinute(route), o)
	return perIP, perRoute
}

// send sends a request from addr through h.
func send(h http.Handler, addr string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/search", nil)
	req.RemoteAddr = addr + ":1234"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// ipLeft peeks the units left to addr under l.
func ipLeft(t *testing.T, l *Limiter, addr string) int64 {
	t.Helper()
	d, err := l.Peek(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed {
		return 0
	}
	return d.Remaining + 1
}

// TestChainedLimitersChargeRefusals pins the behaviour a stack fixes: two
// chained Handlers charge the first policy for requests the second refuses.
func TestChainedLimitersChargeRefusals(t *testing.T) {
	perIP, perRoute := ipAndRoute(t, mustMem(t), 10, 3)
	h := perIP.Handler(perRoute.Handler(okHandler))
	for n := 0; n < 6; n++ {
		send(h, "192.0.2.1")
	}
	if got := ipLeft(t, perIP, "192.0.2.1"); got != 4 {
		t.Fatalf("chained: IP has %d left after 3 admissions and 3 refusals, want 4 (the refusals charged)", got)
	}
}

func TestStackRefusalChargesNothing(t *testing.T) {
	perIP, perRoute := ipAndRoute(t, mustMem(t), 10, 3)
	st, err := NewStack(perIP, perRoute)
	if err != nil {
		t.Fatal(err)
	}
	h := st(okHandler)
	for n := 0; n < 6; n++ {
		rec := send(h, "192.0.2.1")
		if want := n < 3; (rec.Code == http.StatusOK) != want {
			t.Fatalf("request %d: status %d, want admitted %v", n, rec.Code, want)
		}
		if rec.Code == http.StatusOK {
			// The route has fewer units left than the IP: it is named.
			if got, want := rec.Header().Get("X-RateLimit-Limit"), "3"; got != want {
				t.Fatalf("request %d: X-RateLimit-Limit %s, want %s", n, got, want)
			}
			continue
		}
		var body struct {
			Policy     string `json:"policy"`
			Limit      int64  `json:"limit"`
			RetryAfter int64  `json:"retry_after"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if body.Policy != "route" || body.Limit != 3 || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("request %d: body %s, Retry-After %q; want the route's refusal", n, rec.Body, rec.Header().Get("Retry-After"))
		}
	}
	if got := ipLeft(t, perIP, "192.0.2.1"); got != 7 {
		t.Fatalf("stacked: IP has %d left after 3 admissions and 3 refusals, want 7", got)
	}
}

func TestStackHeadersNameMostRestrictive(t *testing.T) {
	perIP, perRoute := ipAndRoute(t, mustMem(t), 10, 100)
	st, err := NewStack(perIP, perRoute)
	if err != nil {
		t.Fatal(err)
	}
	var seen limiter.Decision
	h := st(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = DecisionFrom(r.Context())
	}))
	for n := 0; n < 10; n++ {
		rec := send(h, "192.0.2.1")
		if rec.Code != http.StatusOK {
			t.Fatalf("request %d: status %d", n, rec.Code)
		}
		lim, rem := rec.Header().Get("X-RateLimit-Limit"), rec.Header().Get("X-RateLimit-Remaining")
		if want := 9 - n; lim != "10" || rem != strconv.Itoa(want) {
			t.Fatalf("request %d: Limit %s Remaining %s, want 10 and %d (the IP)", n, lim, rem, want)
		}
	}
	if seen.Policy != "ip" || seen.Remaining != 0 {
		t.Fatalf("DecisionFrom: %+v, want the IP policy with 0 left", seen)
	}
	rec := send(h, "192.0.2.1")
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), `"policy":"ip"`) {
		t.Fatalf("11th request: %d %s, want the IP's 429", rec.Code, rec.Body)
	}
	// Another client still passes, and the route counted 10 admissions.
	rec = send(h, "192.0.2.2")
	if rec.Code != http.StatusOK || rec.Header().Get("X-RateLimit-Remaining") != "9" {
		t.Fatalf("another client: %d, Remaining %s; want admitted with 9 left (its IP)", rec.Code, rec.Header().Get("X-RateLimit-Remaining"))
	}
	d, err := perRoute.Peek(context.Background(), "/search")
	if err != nil || d.Remaining != 88 {
		t.Fatalf("route: %+v, %v; want 88 left after a peek (11 admitted)", d, err)
	}
}

func TestNewStackErrors(t *testing.T) {
	a := mustMem(t)
	b := mustMem(t)
	ip, route := ipAndRoute(t, a, 10, 100)
	other := mustNew(t, b, keyfunc.RemoteIP, store.PerMinute(1), Options{Name: "other"})
	sameName := mustNew(t, a, keyfunc.RemoteIP, store.PerMinute(1), Options{Name: "ip"})
	dedup := mustNew(t, a, keyfunc.RemoteIP, store.PerMinute(1), Options{Name: "d", Dedup: func(*http.Request) string { return "" }})
	closed := mustNew(t, a, keyfunc.RemoteIP, store.PerMinute(1), Options{Name: "c", FailureMode: limiter.FailClosed})
	overrides := mustNew(t, a, keyfunc.RemoteIP, store.PerMinute(1), Options{Name: "o", Overrides: true})
	sa, err := suppressed.New(a, suppressed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	shed := mustNew(t, sa, keyfunc.RemoteIP, store.Limit{Algorithm: store.SlidingWindowCounter, Rate: 20, Period: time.Second}, Options{Name: "s"})
	dry := mustNew(t, a, keyfunc.RemoteIP, store.PerMinute(1), Options{Name: "dry", DryRun: true})
	costly, err := ip.WithCost(2)
	if err != nil {
		t.Fatal(err)
	}
	plain := mustNew(t, &funcStore{}, keyfunc.RemoteIP, store.PerMinute(1), Options{Name: "plain"})
	noKey, err := New(a, nil, store.PerMinute(1), Options{Name: "nokey"})
	if err != nil {
		t.Fatal(err)
	}
	for name, ls := range map[string][]*Limiter{
		"none":         nil,
		"nil":          {ip, nil},
		"other store":  {ip, other},
		"same name":    {ip, sameName},
		"dedup":        {ip, dedup},
		"overrides":    {ip, overrides},
		"suppressed":   {ip, shed},
		"suppressed 0": {shed, ip},
		"failure mode": {ip, closed},
		"dry run":      {ip, dry},
		"same quota":   {ip, costly},
		"no TakeMulti": {plain, route},
		"no key":       {ip, noKey},
		"too many (9)": {ip, route, ip, route, ip, route, ip, route, ip},
	} {
		if _, err := NewStack(ls...); err == nil {
			t.Errorf("%s: got no error", name)
		}
	}
	if _, err := NewStack(ip, route); err != nil {
		t.Fatalf("valid stack: %v", err)
	}
}

func TestStackDryRun(t *testing.T) {
	perIP, perRoute := ipAndRoute(t, mustMem(t), 1, 100, Options{DryRun: true})
	st, err := NewStack(perIP, perRoute)
	if err != nil {
		t.Fatal(err)
	}
	h := st(okHandler)
	for n := 0; n < 3; n++ {
		if rec := send(h, "192.0.2.1"); rec.Code != http.StatusOK || rec.Header().Get("Retry-After") != "" {
			t.Fatalf("request %d: %d, Retry-After %q; want passed without Retry-After", n, rec.Code, rec.Header().Get("Retry-After"))
		}
	}
	d, err := perRoute.Peek(context.Background(), "/search")
	if err != nil || d.Remaining != 98 {
		t.Fatalf("route: %+v, %v; want 1 admission charged (98 left after a peek)", d, err)
	}
}

func TestStackExemptAndFailure(t *testing.T) {
	down := &multiFunc{err: &store.BackendError{Op: "take", Kind: "connection", Err: context.DeadlineExceeded}}
	perIP := mustNew(t, down, keyfunc.RemoteIP, store.PerMinute(1), Options{
		Name:        "ip",
		Logger:      quiet,
		FailureMode: limiter.FailClosed,
	})
	perRoute := mustNew(t, down, keyfunc.Constant("/search"), store.PerMinute(1), Options{
		Name:        "route",
		Logger:      quiet,
		FailureMode: limiter.FailClosed,
		Exempt:      []func(*http.Request) bool{func(r *http.Request) bool { return r.Header.Get("X-Internal") != "" }},
	})
	st, err := NewStack(perIP, perRoute)
	if err != nil {
		t.Fatal(err)
	}
	h := st(okHandler)
	if rec := send(h, "192.0.2.1"); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("store down, fail closed: got %d, want 503", rec.Code)
	}
	if down.multi.Load() != 1 {
		t.Fatalf("TakeMulti called %d times, want 1", down.multi.Load())
	}
	// With the route exempt, the IP alone decides, through Take.
	req := httptest.NewRequest(http.MethodGet, "/search", nil)
	req.Header.Set("X-Internal", "1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || down.calls.Load() != 1 {
		t.Fatalf("route exempt: %d after %d Takes, want 503 after 1", rec.Code, down.calls.Load())
	}
}

// multiFunc is a MultiStore that fails every call with err.
type multiFunc struct {
	funcStore
	multi atomic.Int64
	err   error
}

func (m *multiFunc) Take(ctx context.Context, req store.Request) (store.Decision, error) {
	m.calls.Add(1)
	return store.Decision{}, m.err
}

func (m *multiFunc) TakeMulti(ctx context.Context, reqs []store.Request) (store.MultiDecision, error) {
	m.multi.Add(1)
	return store.MultiDecision{}, m.err
}

// TestStackNestedLimiterChargedOnce: a limiter of a stacked quota inside
// the stack charges only what the stack did not, whichever policy decided.
func TestStackNestedLimiterChargedOnce(t *testing.T) {
	st := mustMem(t)
	perIP, perRoute := ipAndRoute(t, st, 10, 100)
	perHost := mustNew(t, st, keyfunc.Constant("host"), store.PerMinute(50), Options{Name: "host", Logger: quiet})
	stack, err := NewStack(perIP, perRoute, perHost)
	if err != nil {
		t.Fatal(err)
	}
	costly, err := perRoute.WithCost(3)
	if err != nil {
		t.Fatal(err)
	}
	var seen limiter.Decision
	inner := perIP.Handler(perHost.Handler(costly.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = DecisionFrom(r.Context())
	}))))
	h := stack(inner)
	if rec := send(h, "192.0.2.1"); rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	if got := ipLeft(t, perIP, "192.0.2.1"); got != 9 {
		t.Fatalf("IP: %d left, want 9 (charged once)", got)
	}
	d, err := perHost.Peek(context.Background(), "host")
	if err != nil || d.Remaining != 48 {
		t.Fatalf("host: %+v, %v; want 48 left after a peek (charged once)", d, err)
	}
	// The costly route limiter charges the 2 units the stack did not.
	d, err = perRoute.Peek(context.Background(), "/search")
	if err != nil || d.Remaining != 96 {
		t.Fatalf("route: %+v, %v; want 96 left after a peek (3 charged in all)", d, err)
	}
	if seen.Policy != "route" {
		t.Fatalf("DecisionFrom: policy %q, want the innermost limiter's, route", seen.Policy)
	}
}

// TestStackTiers: each limiter keeps its tiers; an unlimited tier takes no
// part, a suspended one answers 403.
func TestStackTiers(t *testing.T) {
	st := mustMem(t)
	tiered, err := NewTiered(st, AuthOptions{
		Subject: fakeSubject, Anonymous: keyfunc.RemoteIP,
		Trusted:   func(sub string, _ *http.Request) bool { return sub == "ops" },
		Suspended: func(sub string, _ *http.Request) bool { return sub == "mallory" },
	}, fourTiers, Options{Name: "api", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	perRoute := mustNew(t, st, keyfunc.Constant("/search"), store.PerMinute(1000), Options{Name: "route", Logger: quiet})
	stack, err := NewStack(tiered, perRoute)
	if err != nil {
		t.Fatal(err)
	}
	h := stack(okHandler)
	call := func(token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/search", nil)
		req.RemoteAddr = "192.0.2.1:1"
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token+"-token")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := call(""); rec.Code != http.StatusOK || rec.Header().Get("X-Ratelimit-Limit") != "10" {
		t.Fatalf("anonymous: %d, Limit %s; want the anonymous tier's 10", rec.Code, rec.Header().Get("X-Ratelimit-Limit"))
	}
	if rec := call("alice"); rec.Code != http.StatusOK || rec.Header().Get("X-Ratelimit-Limit") != "100" {
		t.Fatalf("authenticated: %d, Limit %s; want the authenticated tier's 100", rec.Code, rec.Header().Get("X-Ratelimit-Limit"))
	}
	// Trusted: only the route decides.
	if rec := call("ops"); rec.Code != http.StatusOK || rec.Header().Get("X-Ratelimit-Limit") != "1000" {
		t.Fatalf("trusted: %d, Limit %s; want the route's 1000", rec.Code, rec.Header().Get("X-Ratelimit-Limit"))
	}
	if rec := call("mallory"); rec.Code != http.StatusForbidden {
		t.Fatalf("suspended: %d, want 403", rec.Code)
	}
	d, err := perRoute.Peek(context.Background(), "/search")
	if err != nil || d.Remaining != 996 {
		t.Fatalf("route: %+v, %v; want 3 admissions (996 left after a peek)", d, err)
	}
}

// TestStackLocalFallback: when the main store fails, the shared fallback
// store decides the stack.
func TestStackLocalFallback(t *testing.T) {
	down := &multiFunc{err: &store.BackendError{Op: "take", Kind: "connection", Err: context.DeadlineExceeded}}
	local := mustMem(t)
	perIP := mustNew(t, down, keyfunc.RemoteIP, store.PerMinute(2), Options{
		Name:     "ip",
		Logger:   quiet,
		Fallback: local,
	})
	perRoute := mustNew(t, down, keyfunc.Constant("/search"), store.PerMinute(100), Options{
		Name:     "route",
		Logger:   quiet,
		Fallback: local,
	})
	stack, err := NewStack(perIP, perRoute)
	if err != nil {
		t.Fatal(err)
	}
	h := stack(okHandler)
	for n, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		if rec := send(h, "192.0.2.1"); rec.Code != want {
			t.Fatalf("request %d: %d, want %d", n, rec.Code, want)
		}
	}
	if _, err := NewStack(perIP, mustNew(t, down, keyfunc.Constant("x"), store.PerMinute(1), Options{Name: "x"})); err == nil {
		t.Fatal("limiters with and without a fallback store: got no error")
	}
}

// TestStackBlock: a refusing policy that blocks starts its block; the
// other policy is charged nothing while the block refuses.
func TestStackBlock(t *testing.T) {
	st := mustMem(t)
	login := mustNew(t, st, keyfunc.RemoteIP, store.Limit{Algorithm: store.FixedWindow, Rate: 2, Period: time.Minute, Block: time.Hour},
		Options{
			Name:        "login",
			Logger:      quiet,
			CountDenied: true,
		})
	perRoute := mustNew(t, st, keyfunc.Constant("/login"), store.PerMinute(100), Options{Name: "route", Logger: quiet})
	stack, err := NewStack(perRoute, login)
	if err != nil {
		t.Fatal(err)
	}
	h := stack(okHandler)
	for n := 0; n < 5; n++ {
		rec := send(h, "192.0.2.1")
		if want := n < 2; (rec.Code == http.StatusOK) != want {
			t.Fatalf("request %d: %d", n, rec.Code)
		}
		if n >= 2 && !strings.Contains(rec.Body.String(), `"error":"blocked"`) {
			t.Fatalf("request %d: %s, want blocked", n, rec.Body)
		}
		if n >= 2 && rec.Header().Get("Retry-After") != "3600" {
			t.Fatalf("request %d: Retry-After %s, want 3600", n, rec.Header().Get("Retry-After"))
		}
	}
	d, err := perRoute.Peek(context.Background(), "/login")
	if err != nil || d.Remaining != 97 {
		t.Fatalf("route: %+v, %v; want 2 admissions (97 left after a peek)", d, err)
	}
}
