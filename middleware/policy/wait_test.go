package policy_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/middleware/policy"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// TestMaxWait: a policy with max_wait serves a request that would be
// refused once its turn comes, instead of answering 429, and refuses one
// whose turn is further away; its configuration shows max_wait.
func TestMaxWait(t *testing.T) {
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := policy.New("wait.yaml", []byte(`
policies:
  api:
    key: ip
    max_wait: 1500ms
    limits: [{rate: 1, period: 1s}]
`), st, appOptions())
	if err != nil {
		t.Fatal(err)
	}
	h := set.Handler("api")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	serve := func() (int, time.Duration) {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "203.0.113.7:1234"
		start := time.Now()
		h.ServeHTTP(rec, r)
		return rec.Code, time.Since(start)
	}
	if code, _ := serve(); code != http.StatusOK {
		t.Fatalf("first request: status %d, want 200", code)
	}
	// Two at once: one waits its turn (about 1s), the other's is about 2s
	// away, beyond max_wait. Half a second apart, "at once" and "at its
	// turn" stay told apart on a busy machine.
	type result struct {
		code int
		took time.Duration
	}
	results := make(chan result, 2)
	for range 2 {
		go func() {
			code, took := serve()
			results <- result{code, took}
		}()
	}
	a, b := <-results, <-results
	if a.code != http.StatusTooManyRequests {
		a, b = b, a
	}
	if a.code != http.StatusTooManyRequests || a.took > 500*time.Millisecond {
		t.Errorf("one of two requests at once: status %d after %s, want 429 at once", a.code, a.took)
	}
	if b.code != http.StatusOK || b.took < 500*time.Millisecond {
		t.Errorf("the other: status %d after %s, want 200 after about 1s", b.code, b.took)
	}
	var cfg string
	for _, p := range set.Status().Policies {
		cfg += string(p.Config)
	}
	if !strings.Contains(cfg, `"max_wait":"1.5s"`) {
		t.Errorf("configuration: got %s, want max_wait 1.5s in it", cfg)
	}
}
