package middleware_test

import (
	"context"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// TestRefusalHookSeesIdentity: the hook is called once per refused
// request, with the identity as the key function returned it and the
// decision, and never for admitted ones.
func TestRefusalHookSeesIdentity(t *testing.T) {
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	lim, err := middleware.New(st, keyfunc.RemoteIP, store.Limit{Rate: 1, Period: time.Hour},
		middleware.Options{Name: "api", RefusalHook: func(_ context.Context, d limiter.Decision, identity string) {
			mu.Lock()
			defer mu.Unlock()
			if d.Allowed || d.Policy != "api" {
				t.Errorf("hook got %+v, want a refusal of policy api", d)
			}
			got = append(got, identity)
		}})
	if err != nil {
		t.Fatal(err)
	}
	h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, ip := range []string{"198.51.100.7", "198.51.100.7", "198.51.100.7", "203.0.113.9"} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = ip + ":1234"
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	if len(got) != 2 || got[0] != "198.51.100.7" || got[1] != "198.51.100.7" {
		t.Fatalf("hook calls: got %q, want the refused identity twice", got)
	}
}
