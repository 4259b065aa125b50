package middleware

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// A cost above the limit's capacity can never be admitted: Enforce must
// not tell the client to come back in a second.
func TestEnforceCostExceedsCapacityNamesNoWait(t *testing.T) {
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lim := mustNew(t, st, nil, store.Limit{Rate: 10, Period: time.Minute}, Options{Name: "bulk"})
	d, err := lim.AllowN(t.Context(), "alice", 25)
	if !errors.Is(err, store.ErrCostExceedsCapacity) {
		t.Fatalf("AllowN(25) under 10/min: got error %v, want ErrCostExceedsCapacity", err)
	}
	if d.Allowed {
		t.Fatalf("AllowN(25) under 10/min: got an admitting decision, want a refusal")
	}
	w := httptest.NewRecorder()
	if lim.Enforce(w, httptest.NewRequest(http.MethodPost, "/bulk", nil), d) {
		t.Fatalf("Enforce: got true, want false (refused)")
	}
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("status: got %d, want 429", w.Code)
	}
	if got := w.Header().Get("Retry-After"); got != "" {
		t.Fatalf("Retry-After: got %q, want none (no wait admits the request)", got)
	}
	var body struct {
		Error string `json:"error"`
		Cost  int64  `json:"cost"`
		Limit int64  `json:"limit"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	if body.Error != "cost_exceeds_limit" || body.Cost != 25 || body.Limit != 10 {
		t.Fatalf("body: got %+v, want error cost_exceeds_limit, cost 25, limit 10", body)
	}
	// Nothing was taken: the client's quota is whole.
	if d, err := lim.Peek(t.Context(), "alice"); err != nil || d.Remaining != 9 {
		t.Fatalf("Peek after the refused cost: got Remaining %d, error %v; want 9 (a peek counts itself), nil", d.Remaining, err)
	}
}
