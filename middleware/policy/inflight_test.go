package policy_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ratekeeper/ratekeeper/middleware/policy"
)

// TestInFlightPolicy: a policy with in_flight caps its key's concurrent
// requests, with the configured status, alone or beside rate limits, and
// the policy's config shows the block.
func TestInFlightPolicy(t *testing.T) {
	set := load(t, writeFile(t, `policies:
  reports:
    key: ip
    in_flight: {max: 1, lease: 30s, status: 503}
  api:
    key: ip
    limits: [{rate: 100, period: 1h}]
    in_flight: {max: 1}
`), newStore(t))
	for _, c := range []struct {
		policy string
		status int
		rate   bool
	}{{"reports", http.StatusServiceUnavailable, false}, {"api", http.StatusTooManyRequests, true}} {
		t.Run(c.policy, func(t *testing.T) {
			var inner *httptest.ResponseRecorder
			h := set.Handler(c.policy)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				inner = serve(set.Handler(c.policy)(okHandler), "192.0.2.1:1")
				w.WriteHeader(http.StatusOK)
			}))
			outer := serve(h, "192.0.2.1:1")
			if outer.Code != http.StatusOK || inner.Code != c.status {
				t.Fatalf("nested request under a cap of 1: got %d then %d, want 200 then %d", outer.Code, inner.Code, c.status)
			}
			if !strings.Contains(inner.Body.String(), `"too_many_in_flight"`) || inner.Header().Get("Retry-After") != "1" {
				t.Errorf("refusal: got %q with Retry-After %q", inner.Body.String(), inner.Header().Get("Retry-After"))
			}
			if got := outer.Header().Get("X-RateLimit-Limit") != ""; got != c.rate {
				t.Errorf("X-RateLimit-Limit present: got %t, want %t", got, c.rate)
			}
			if w := serve(h, "192.0.2.2:1"); w.Code != http.StatusOK {
				t.Errorf("another client: got %d, want 200", w.Code)
			}
		})
	}
	pols := set.Status().Policies
	for _, p := range pols {
		if p.Name == "reports" && !strings.Contains(string(p.Config), `"in_flight":{"max":1,"lease":"30s","status":503}`) {
			t.Errorf("config of reports: got %s, want its in_flight block", p.Config)
		}
	}
}

func TestInFlightPolicyInvalid(t *testing.T) {
	for _, c := range []struct {
		name, text, field, msg string
	}{
		{"no max", "in_flight: {lease: 30s}", "policies.api.in_flight", "needs max"},
		{"zero max", "in_flight: {max: 0}", "policies.api.in_flight.max", "must be"},
		{"short lease", "in_flight: {max: 1, lease: 10ms}", "policies.api.in_flight.lease", "must be 1s to 24h"},
		{"bad status", "in_flight: {max: 1, status: 500}", "policies.api.in_flight.status", "must be 429 or 503"},
		{"unknown field", "in_flight: {max: 1, queue: 3}", "policies.api.in_flight.queue", "max, lease, status"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := policy.Parse("x.yaml", []byte("policies:\n  api:\n    key: ip\n    "+c.text+"\n"))
			if err == nil || !strings.Contains(err.Error(), c.field+":") || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want a problem at %s: %s", err, c.field, c.msg)
			}
		})
	}
	if _, err := policy.Parse("x.yaml", []byte("policies:\n  api:\n    key: ip\n")); err == nil || !strings.Contains(err.Error(), "unless the policy has in_flight") {
		t.Fatalf("neither limits nor in_flight: got %v", err)
	}
}
