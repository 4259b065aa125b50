package middleware

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
)

// TestPooledStatesKeepAnsweredHeaders: the light path gives a request's
// state back once the decision is answered and lends it to later
// requests, so this checks that nothing an answered response holds
// changes afterwards. Many clients (each its own key, built in the
// state's lent memory) take turns from several goroutines, on a limit
// whose remaining counts are beyond the shared small values; each
// response's headers are read again after every other request ran, and
// must still be what a client's own sequence of admissions says.
func TestPooledStatesKeepAnsweredHeaders(t *testing.T) {
	const (
		clients  = 64
		perClnt  = 20
		capacity = 1 << 20
	)
	lim := mustNew(t, mustMem(t), keyfunc.RemoteIP, store.Limit{Rate: capacity, Period: 8760 * time.Hour}) // a unit comes back every 30 s
	h := lim.Handler(okHandler)
	headers := make([][]http.Header, clients)
	var wg sync.WaitGroup
	for c := range clients {
		headers[c] = make([]http.Header, perClnt)
		wg.Go(func() {
			remote := fmt.Sprintf("10.1.%d.%d:4000", c/256, c%256)
			for i := range perClnt {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, request(http.MethodGet, "/", remote))
				if rec.Code != http.StatusOK {
					t.Errorf("client %d request %d: status %d", c, i, rec.Code)
					return
				}
				headers[c][i] = rec.Header()
			}
		})
	}
	wg.Wait()
	for c, hs := range headers {
		for i, hdr := range hs {
			if hdr == nil {
				continue
			}
			want := strconv.Itoa(capacity - 1 - i)
			if got := hdr.Get("X-Ratelimit-Remaining"); got != want {
				t.Errorf("client %d request %d: X-RateLimit-Remaining %q after the others ran, want %s", c, i, got, want)
			}
			if got := hdr.Get("X-Ratelimit-Limit"); got != strconv.Itoa(capacity) {
				t.Errorf("client %d request %d: X-RateLimit-Limit %q", c, i, got)
			}
		}
	}
}
