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
    max_wait: 300ms
    limits: [{rate: 1, period: 200ms}]
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
	// Two at once: one waits its turn (about 200ms), the other's is about
	// 400ms away, beyond max_wait.
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
	if a.code != http.StatusTooManyRequests || a.took > 150*time.Millisecond {
		t.Errorf("one of two requests at once: status %d after %s, want 429 at once", a.code, a.took)
	}
	if b.code != http.StatusOK || b.took < 150*time.Millisecond {
		t.Errorf("the other: status %d after %s, want 200 after about 200ms", b.code, b.took)
	}
	var cfg string
	for _, p := range set.Status().Policies {
		cfg += string(p.Config)
	}
	if !strings.Contains(cfg, `"max_wait":"300ms"`) {
		t.Errorf("configuration: got %s, want max_wait 300ms in it", cfg)
	}
}
