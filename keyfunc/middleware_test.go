package keyfunc_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// A chain longer than MaxHops from a trusted proxy is a bad request, and
// the handler does not run; a client's own long header is not.
func TestMaxHopsAnswers400(t *testing.T) {
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ip, err := keyfunc.NewClientIP(keyfunc.IPOptions{TrustedProxies: []string{"10.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := middleware.New(st, ip.Key, store.Limit{Rate: 100, Period: time.Minute}, middleware.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	h := lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran++ }))
	tests := []struct {
		name, xff string
		want      int
		wantRan   int
	}{
		{"client's own 90k entries", strings.Repeat("6.6.6.6, ", 90000) + "198.51.100.9", http.StatusOK, 1},
		{"90k trusted entries", strings.Repeat("10.0.0.3, ", 90000) + "10.0.0.4", http.StatusBadRequest, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = "10.0.0.1:443"
			r.Header.Set("X-Forwarded-For", tt.xff)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.want || ran != tt.wantRan {
				t.Errorf("got status %d and %d handler runs, want %d and %d", w.Code, ran, tt.want, tt.wantRan)
			}
		})
	}
}
