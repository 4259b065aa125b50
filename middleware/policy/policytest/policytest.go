package policytest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware/policy"
	"github.com/ratekeeper/ratekeeper/store"
)

// Run runs the suite against st. It fails t on the first broken promise
// of each subtest.
func Run(t *testing.T, st store.Store) {
	t.Helper()
	t.Run("reload-raises-and-cuts-keeping-counters", func(t *testing.T) { raiseAndCut(t, st) })
	t.Run("reload-renamed-limit-starts-afresh", func(t *testing.T) { renamed(t, st) })
	t.Run("failed-reload-keeps-policies", func(t *testing.T) { failedReload(t, st) })
	t.Run("watch-reloads-changed-file", func(t *testing.T) { watch(t, st) })
	t.Run("modes", func(t *testing.T) { modes(t, st) })
}

// fixture is one subtest's policy file, Set and route.
type fixture struct {
	t      *testing.T
	path   string
	policy string // the policy's name, with a random suffix
	client string // RemoteAddr of the requests
	set    *policy.Set
	h      http.Handler
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// file returns a policy file with one policy keyed by client address: a
// GCRA limit of rate per hour named limitName, in mode.
func (f *fixture) file(rate int, limitName, mode string) string {
	return fmt.Sprintf(`policies:
  %s:
    key: ip
    mode: %s
    limits:
      - {name: %s, rate: %d, period: 1h}
`, f.policy, mode, limitName, rate)
}

// write replaces the policy file atomically, as the watcher's
// documentation asks.
func (f *fixture) write(text string) {
	f.t.Helper()
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		f.t.Fatal(err)
	}
}

func newFixture(t *testing.T, st store.Store, text func(*fixture) string) *fixture {
	t.Helper()
	b := make([]byte, 2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	f := &fixture{
		t:      t,
		path:   filepath.Join(t.TempDir(), "policies.yaml"),
		policy: "api-" + randomHex(t, 6),
		client: fmt.Sprintf("198.18.%d.%d:40000", b[0], b[1]),
	}
	f.write(text(f))
	set, err := policy.Load(f.path, st, policy.Options{
		Keys:   map[string]keyfunc.KeyFunc{"ip": keyfunc.RemoteIP},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.set = set
	mux := http.NewServeMux()
	mux.Handle("GET /api/ping", set.Handler(f.policy)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "pong\n")
	})))
	f.h = mux
	return f
}

// response is what a test looks at in an answer.
type response struct {
	code             int
	limit, remaining string
}

func (r response) String() string {
	return fmt.Sprintf("%d limit=%q remaining=%q", r.code, r.limit, r.remaining)
}

func (f *fixture) ping() response {
	f.t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/api/ping", nil)
	r.RemoteAddr = f.client
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return response{w.Code, w.Header().Get("X-RateLimit-Limit"), w.Header().Get("X-RateLimit-Remaining")}
}

func (f *fixture) expect(what string, want response) {
	f.t.Helper()
	if got := f.ping(); got != want {
		f.t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func ok(limit, remaining int) response {
	return response{http.StatusOK, strconv.Itoa(limit), strconv.Itoa(remaining)}
}

func raiseAndCut(t *testing.T, st store.Store) {
	f := newFixture(t, st, func(f *fixture) string { return f.file(10, "hourly", "enforce") })
	for i := range 3 {
		f.expect(fmt.Sprintf("request %d under 10/h", i+1), ok(10, 9-i))
	}
	f.write(f.file(20, "hourly", "enforce"))
	if err := f.set.Reload(); err != nil {
		t.Fatal(err)
	}
	f.expect("4th request after raising to 20/h (3 used)", ok(20, 16))
	f.write(f.file(4, "hourly", "enforce"))
	if err := f.set.Reload(); err != nil {
		t.Fatal(err)
	}
	f.expect("5th request after cutting to 4/h (4 used)", response{http.StatusTooManyRequests, "4", "0"})
	if s := f.set.Status(); s.Reloads != 2 || s.Failures != 0 {
		t.Fatalf("status: got %d reloads and %d failures, want 2 and 0", s.Reloads, s.Failures)
	}
}

func renamed(t *testing.T, st store.Store) {
	f := newFixture(t, st, func(f *fixture) string { return f.file(10, "hourly", "enforce") })
	f.expect("1st request", ok(10, 9))
	f.expect("2nd request", ok(10, 8))
	f.write(f.file(10, "per-hour", "enforce"))
	if err := f.set.Reload(); err != nil {
		t.Fatal(err)
	}
	f.expect("after renaming the limit", ok(10, 9))
}

func failedReload(t *testing.T, st store.Store) {
	f := newFixture(t, st, func(f *fixture) string { return f.file(10, "hourly", "enforce") })
	f.expect("1st request", ok(10, 9))
	f.write(f.file(-20, "hourly", "enforce"))
	err := f.set.Reload()
	var pe *policy.Error
	if !errors.As(err, &pe) || pe.Line != 6 || pe.Field != "policies."+f.policy+".limits[0].rate" {
		t.Fatalf("reload of a negative rate: got %v, want a *policy.Error on line 6 about the rate", err)
	}
	f.expect("after the failed reload", ok(10, 8))
	s := f.set.Status()
	if s.Reloads != 0 || s.Failures != 1 || !errors.Is(s.LastError, pe) {
		t.Fatalf("status: got %d reloads, %d failures, last error %v; want 0, 1 and the reload's error", s.Reloads, s.Failures, s.LastError)
	}
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	if err := f.set.Reload(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reload of a missing file: got %v, want an error matching os.ErrNotExist", err)
	}
	f.expect("after the file is gone", ok(10, 7))
	if s := f.set.Status(); s.Failures != 2 {
		t.Fatalf("status: got %d failures, want 2", s.Failures)
	}
}

func watch(t *testing.T, st store.Store) {
	f := newFixture(t, st, func(f *fixture) string { return f.file(10, "hourly", "enforce") })
	f.expect("1st request", ok(10, 9))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.set.Watch(ctx, 5*time.Millisecond) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Watch returned %v, want context.Canceled", err)
		}
	}()
	f.write(f.file(100, "hourly", "enforce"))
	deadline := time.Now().Add(10 * time.Second)
	for f.set.Status().Reloads == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not reload the changed file within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.expect("2nd request after the watcher's reload", ok(100, 98))
}

func modes(t *testing.T, st store.Store) {
	f := newFixture(t, st, func(f *fixture) string { return f.file(2, "hourly", "enforce") })
	f.expect("1st request", ok(2, 1))
	f.expect("2nd request", ok(2, 0))
	f.expect("3rd request", response{http.StatusTooManyRequests, "2", "0"})

	if err := f.set.SetMode(f.policy, "off"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		f.expect(fmt.Sprintf("request %d with the policy off", i+1), response{code: http.StatusOK})
	}
	if err := f.set.SetMode(f.policy, "dry_run"); err != nil {
		t.Fatal(err)
	}
	f.expect("dry run over the limit", ok(2, 0))

	// The override outlives a reload of the file, which still says
	// enforce, until SetMode clears it.
	f.write(f.file(3, "hourly", "enforce"))
	if err := f.set.Reload(); err != nil {
		t.Fatal(err)
	}
	ps := f.set.Status().Policies[0]
	if ps.Mode != "dry_run" || ps.Configured != "enforce" || !ps.Overridden {
		t.Fatalf("status after reload: got mode %s, configured %s, overridden %t; want dry_run, enforce, true", ps.Mode, ps.Configured, ps.Overridden)
	}
	// 2 units used: the refused dry run recorded nothing, this one is
	// admitted and recorded.
	f.expect("dry run after raising to 3", ok(3, 0))
	if err := f.set.SetMode(f.policy, ""); err != nil {
		t.Fatal(err)
	}
	f.expect("enforced again", response{http.StatusTooManyRequests, "3", "0"})

	// The file switches modes too.
	f.write(f.file(3, "hourly", "off"))
	if err := f.set.Reload(); err != nil {
		t.Fatal(err)
	}
	f.expect("off by the file", response{code: http.StatusOK})
	if err := f.set.SetMode("no-such-policy", "off"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetMode of an unknown policy: got %v, want an error matching store.ErrNotFound", err)
	}
}
