package policy_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/ratekeeper/ratekeeper/middleware/policy"
)

// TestReportCostUnderAPolicy: with DecisionInContext in the set's
// middleware options, a policy's cost is a reservation that the handler
// settles through the policy's limiter, under a window algorithm too.
func TestReportCostUnderAPolicy(t *testing.T) {
	path := writeFile(t, `policies:
  tokens:
    key: ip
    cost: 10
    limits: [{rate: 1000, period: 1h, algorithm: sliding_window_log}]
`)
	opts := appOptions()
	opts.Middleware.DecisionInContext = true
	set, err := policy.Load(path, newStore(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	h := set.Handler("tokens")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lim, err := set.Limiter("tokens")
		if err == nil {
			err = lim.ReportCost(r.Context(), 3)
		}
		if err != nil {
			t.Errorf("ReportCost: %v", err)
		}
	}))
	for range 2 {
		if w := serve(h, "192.0.2.1:1"); w.Code != http.StatusOK {
			t.Fatalf("status %d, want 200", w.Code)
		}
	}
	lim, err := set.Limiter("tokens")
	if err != nil {
		t.Fatal(err)
	}
	d, err := lim.Peek(context.Background(), "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Remaining + d.Cost; got != 994 {
		t.Fatalf("after two requests of estimate 10 that used 3: %d left, want 994", got)
	}
}
