package middleware

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/internal/keybuf"
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

// ctxStore records, for each Take it passes on to its store, whether the
// context lends memory and what keybuf.Unlent makes of it during the call.
type ctxStore struct {
	store.Store
	lends  []bool
	unlent []context.Context
}

func (s *ctxStore) Take(ctx context.Context, req store.Request) (store.Decision, error) {
	_, lends := ctx.(keybuf.Lender)
	s.lends, s.unlent = append(s.lends, lends), append(s.unlent, keybuf.Unlent(ctx))
	return s.Store.Take(ctx, req)
}

// TestPooledStateUnlent: the context a store gets on the light path is the
// pooled request state, which lends memory; what a store may keep past
// the call (keybuf.Unlent) is the request's own context, with its values.
func TestPooledStateUnlent(t *testing.T) {
	type mark struct{}
	s := &ctxStore{Store: mustMem(t)}
	h := mustNew(t, s, keyfunc.RemoteIP, store.Limit{Rate: 10, Period: time.Minute}).Handler(okHandler)
	r := request(http.MethodGet, "/", "203.0.113.7:4000")
	r = r.WithContext(context.WithValue(r.Context(), mark{}, "request"))
	h.ServeHTTP(httptest.NewRecorder(), r)
	if len(s.lends) != 1 {
		t.Fatalf("store saw %d takes, want 1", len(s.lends))
	}
	if !s.lends[0] {
		t.Fatal("store's context: not the pooled state that lends memory; the test checks nothing")
	}
	if got := s.unlent[0]; got != r.Context() {
		t.Errorf("Unlent of the store's context: got %v, want the request's own context", got)
	}
	if got := s.unlent[0].Value(mark{}); got != "request" {
		t.Errorf("Unlent context's value: got %v, want the request's", got)
	}
}

// TestPooledStateIsTheRequestContext: the pooled state a store gets on
// the light path reads the request's context only when asked, so each of
// its context methods must answer as the request's context does: the
// same deadline and Done channel, the cancellation once the request is
// canceled, and the request's values.
func TestPooledStateIsTheRequestContext(t *testing.T) {
	type mark struct{}
	deadline := time.Now().Add(time.Hour)
	base, cancel := context.WithDeadline(context.WithValue(context.Background(), mark{}, "request"), deadline)
	defer cancel()
	r := request(http.MethodGet, "/", "203.0.113.7:4000").WithContext(base)

	var (
		lends            bool
		gotDeadline      time.Time
		hasDeadline      bool
		sameDone         bool
		errBefore, after error
		value            any
	)
	s := &funcStore{take: func(ctx context.Context, _ store.Request) (store.Decision, error) {
		_, lends = ctx.(keybuf.Lender)
		gotDeadline, hasDeadline = ctx.Deadline()
		sameDone = ctx.Done() == base.Done()
		errBefore = ctx.Err()
		value = ctx.Value(mark{})
		cancel()
		after = ctx.Err()
		return store.Decision{Allowed: true, Capacity: 1}, nil
	}}
	mustNew(t, s, keyfunc.RemoteIP, store.PerMinute(1)).Handler(okHandler).ServeHTTP(httptest.NewRecorder(), r)
	if !lends {
		t.Fatal("store's context: not the pooled state; the test checks nothing")
	}
	if !hasDeadline || !gotDeadline.Equal(deadline) {
		t.Errorf("Deadline: got %v, %t, want the request's %v", gotDeadline, hasDeadline, deadline)
	}
	if !sameDone {
		t.Error("Done: not the request context's channel")
	}
	if errBefore != nil || !errors.Is(after, context.Canceled) {
		t.Errorf("Err: %v before the request was canceled and %v after, want nil and context.Canceled", errBefore, after)
	}
	if value != "request" {
		t.Errorf("Value: got %v, want the request's", value)
	}
}
