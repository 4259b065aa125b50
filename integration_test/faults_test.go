package integration

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// Fault tests run on containers of their own and use go-redis clients with
// default options (MaxRetries 3, ContextTimeoutEnabled false, 5 s read
// timeout): the decision budget must hold whatever client a user passes.

const (
	// budget is the store's default Options.Timeout: the decision budget
	// in the fault tests (the middleware adds no deadline of its own).
	budget = 50 * time.Millisecond
	// slack is what a request may take beyond the budget (scheduling,
	// the race detector, writing the response).
	slack = 150 * time.Millisecond
)

var failureModes = []struct {
	name string
	mode limiter.FailureMode
}{
	{"fail_open", limiter.FailOpen},
	{"fail_closed", limiter.FailClosed},
}

// checkFailureResponse asserts the response a failed store decision gets:
// fail-open passes the request on without rate-limit headers; fail-closed
// answers 503 with a JSON body.
func checkFailureResponse(t *testing.T, mode limiter.FailureMode, rec *httptest.ResponseRecorder) {
	t.Helper()
	switch mode {
	case limiter.FailOpen:
		if rec.Code != http.StatusOK || rec.Body.String() != "ok" {
			t.Errorf("fail-open: got %d %q, want 200 \"ok\" from the wrapped handler", rec.Code, rec.Body.String())
		}
		for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"} {
			if v := rec.Header().Get(h); v != "" {
				t.Errorf("fail-open: got header %s: %q, want none (no decision was made)", h, v)
			}
		}
	case limiter.FailClosed:
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("fail-closed: got status %d, want 503", rec.Code)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("fail-closed: got Content-Type %q, want application/json", ct)
		}
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["error"] == nil {
			t.Errorf("fail-closed: got body %q (%v), want a JSON object with an error field", rec.Body.String(), err)
		}
	}
}

// timedServe serves one request and fails the test when it takes longer
// than the budget plus slack.
func timedServe(t *testing.T, h http.Handler, what string) *httptest.ResponseRecorder {
	t.Helper()
	start := time.Now()
	rec := serve(h)
	if el := time.Since(start); el > budget+slack {
		t.Errorf("%s: took %v, want < %v (budget %v)", what, el, budget+slack, budget)
	}
	return rec
}

// awaitDecision sends requests through h until the store decides one
// (rate-limit headers present) and returns that response. The breaker may
// hold the store back for its cooldown first, and on a loaded machine a
// call may exceed the short budget; both only delay the decision.
func awaitDecision(t *testing.T, h http.Handler, what string, within time.Duration) *httptest.ResponseRecorder {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rec := serve(h)
		if _, ok := remaining(t, rec); ok {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no store decision within %v (last status %d)", what, within, rec.Code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFaultRedisPaused freezes the Redis container (docker pause: the port
// still accepts connections, nothing answers). Store calls and requests
// must finish within the budget in both failure modes; after unpausing,
// the counts show that no request was recorded more than once (go-redis
// retries a timed-out script by default).
func TestFaultRedisPaused(t *testing.T) {
	srv := dedicatedRedis(t)
	c := newClient(t, srv)
	prefix := randomPrefix(t)
	s := newStoreWith(t, c, redisstore.Options{Prefix: prefix}) // default timeout

	t.Run("store", func(t *testing.T) {
		req := store.Request{Key: "store-client", Limits: []store.Limit{store.PerHour(100)}}
		if _, err := s.Take(t.Context(), req); err != nil {
			t.Fatalf("take before pause: %v", err)
		}
		srv.pause(t)
		for i := range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			start := time.Now()
			_, err := s.Take(ctx, req)
			el := time.Since(start)
			cancel()
			if el > budget+slack {
				t.Errorf("take %d while paused: took %v, want < %v", i, el, budget+slack)
			}
			if !errors.Is(err, store.ErrStoreUnavailable) {
				t.Errorf("take %d while paused: got error %v, want one matching ErrStoreUnavailable", i, err)
			}
			if k := store.KindOf(err); k != "timeout" {
				t.Errorf("take %d while paused: got kind %q, want %q", i, k, "timeout")
			}
		}
		srv.unpause(t)
		// On a loaded machine a take right after the pause may still miss
		// the short timeout; each such attempt may have been recorded once.
		var d store.Decision
		extra := 0
		for {
			var err error
			if d, err = s.Take(t.Context(), req); err == nil {
				break
			}
			if extra++; extra == 20 {
				t.Fatalf("take after unpause: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Of 100: 1 before the pause, at most 1 per failed attempt, 1 now.
		lo, hi := int64(100-1-3-extra-1), int64(100-1-1)
		if d.Remaining < lo || d.Remaining > hi {
			t.Errorf("after unpause: got remaining %d, want between %d and %d (each attempt counted at most once)", d.Remaining, lo, hi)
		}
	})

	// go-redis re-sends a command whose reply did not come within its read
	// timeout (5 s by default) while the caller's context is still live.
	// With a store timeout longer than that, a pause would make a default
	// client send the same take twice, and both would run once Redis
	// resumes. The store sends script calls with re-sends off: the take
	// fails with a timeout (its outcome is unknown to the caller) and is
	// recorded at most once.
	t.Run("client-resend", func(t *testing.T) {
		const readTimeout = 5 * time.Second // go-redis default
		long := newStoreWith(t, c, redisstore.Options{Prefix: prefix, Timeout: 3 * readTimeout})
		req := store.Request{Key: "resend-client", Limits: []store.Limit{store.PerHour(100)}}
		if d, err := long.Take(t.Context(), req); err != nil || d.Remaining != 99 {
			t.Fatalf("take before pause: got %+v, %v, want remaining 99", d, err)
		}
		srv.pause(t)
		type result struct {
			d   store.Decision
			err error
		}
		done := make(chan result, 1)
		go func() {
			d, err := long.Take(context.Background(), req)
			done <- result{d, err}
		}()
		// Past the read timeout and the retry backoff (at most 512 ms).
		time.Sleep(readTimeout + 1500*time.Millisecond)
		srv.unpause(t)
		r := <-done
		if r.err == nil || store.KindOf(r.err) != "timeout" {
			t.Fatalf("take across the pause: got %+v, %v, want a timeout (no re-send)", r.d, r.err)
		}
		d, err := long.Take(t.Context(), req)
		if err != nil {
			t.Fatalf("take after the pause: %v", err)
		}
		// 97 when the take sent before the pause ran once Redis resumed,
		// 98 when it never ran; 96 would be a second run.
		if d.Remaining != 97 && d.Remaining != 98 {
			t.Errorf("take after the pause: got remaining %d, want 97 or 98 (the take across the pause counted at most once)", d.Remaining)
		}
	})

	for _, fm := range failureModes {
		t.Run(fm.name, func(t *testing.T) {
			const rate = 100
			events := &eventLog{}
			h := newHandler(t, s, "client-"+fm.name, store.PerHour(rate),
				middleware.Options{
					Name:        "paused",
					FailureMode: fm.mode,
					Observer:    events.Observe,
				})
			for i := range 3 {
				if rec := awaitDecision(t, h, "warm-up", 5*time.Second); rec.Code != http.StatusOK {
					t.Fatalf("warm-up request %d: got %d, want 200", i, rec.Code)
				}
			}

			srv.pause(t)
			paused := true
			defer func() {
				if paused {
					srv.unpause(t)
				}
			}()
			for range 8 {
				checkFailureResponse(t, fm.mode, timedServe(t, h, "request while paused"))
			}
			srv.unpause(t)
			paused = false

			awaitDecision(t, h, "after unpause", 10*time.Second)
			// Scripts written before the budget ran out may still be queued
			// in the server; let them run before reading the count.
			time.Sleep(300 * time.Millisecond)
			left, _ := remaining(t, awaitDecision(t, h, "final count", 5*time.Second))
			decided, failed, skipped := events.counts()
			t.Logf("store decisions %d, failed store calls %d, skipped by the breaker %d, units used %d", decided, failed, skipped, rate-int(left))
			if failed == 0 {
				t.Fatalf("no store call failed while Redis was paused")
			}
			used := rate - int(left)
			if used < decided || used > decided+failed {
				t.Errorf("got %d units used, want between %d (decisions) and %d (decisions + failed calls, each counted at most once)",
					used, decided, decided+failed)
			}
		})
	}
}

// TestFaultRedisStopped stops the container: requests finish within the
// budget in both failure modes. Then it starts the container again and
// checks that limiting resumes. Docker maps a new host port on start, so
// the test uses a client whose dialer re-resolves the mapped port
// (resolvingClient): the same client and store objects recover.
func TestFaultRedisStopped(t *testing.T) {
	srv := dedicatedRedis(t)
	c := newResolvingClient(t, srv)
	s := newStoreWith(t, c.Client, redisstore.Options{Prefix: randomPrefix(t)}) // default timeout
	const rate = 5
	lim := store.Limit{Rate: rate, Period: time.Hour}

	handlers := make(map[string]http.Handler)
	for _, fm := range failureModes {
		h := newHandler(t, s, "client", lim,
			middleware.Options{Name: "stopped-" + fm.name, FailureMode: fm.mode})
		if rec := awaitDecision(t, h, fm.name+" before stop", 5*time.Second); rec.Code != http.StatusOK {
			t.Fatalf("%s: request before stop: got %d, want 200", fm.name, rec.Code)
		}
		handlers[fm.name] = h
	}

	srv.stop(t)
	for _, fm := range failureModes {
		t.Run(fm.name, func(t *testing.T) {
			for range 8 {
				checkFailureResponse(t, fm.mode, timedServe(t, handlers[fm.name], "request while stopped"))
			}
		})
	}
	t.Run("store", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		start := time.Now()
		_, err := s.Take(ctx, store.Request{Key: "store-client", Limits: []store.Limit{lim}})
		if el := time.Since(start); el > budget+slack {
			t.Errorf("take while stopped: took %v, want < %v", el, budget+slack)
		}
		if !errors.Is(err, store.ErrStoreUnavailable) {
			t.Errorf("take while stopped: got error %v, want one matching ErrStoreUnavailable", err)
		}
	})

	before := *c.addr.Load()
	srv.start(t)
	c.refresh(t, srv)
	t.Logf("redis address before stop %s, after start %s", before, *c.addr.Load())
	t.Run("resumes", func(t *testing.T) {
		h := handlers["fail_closed"]
		rec := awaitDecision(t, h, "after restart", 15*time.Second)
		if rec.Code != http.StatusOK {
			t.Fatalf("first decision after restart: got %d, want 200", rec.Code)
		}
		// Whatever the server kept, the limit must bite again after at
		// most the remaining count (exactly that when no call failed: a
		// failed call may still have been recorded).
		left, _ := remaining(t, rec)
		admitted, failed := int64(0), 0
		for {
			if admitted+int64(failed) > 2*rate+10 {
				t.Fatalf("no 429 after %d admitted and %d failed requests since restart", admitted, failed)
			}
			rec := serve(h)
			if _, ok := remaining(t, rec); !ok {
				failed++
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if rec.Code == http.StatusTooManyRequests {
				if rec.Header().Get("Retry-After") == "" {
					t.Errorf("429 after restart without %s", "Retry-After")
				}
				break
			}
			admitted++
		}
		if admitted > left || (failed == 0 && admitted != left) {
			t.Errorf("got %d admitted after a decision with %d remaining (%d calls failed), want %d", admitted, left, failed, left)
		}
	})
}

// TestFaultScriptFlush empties the server's script cache between two
// decisions: the next one must succeed (NOSCRIPT fallback) and be counted
// exactly once.
func TestFaultScriptFlush(t *testing.T) {
	srv := dedicatedRedis(t)
	c := newClient(t, srv)
	admin := newClient(t, srv)
	s := newStore(t, c, randomPrefix(t))
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			ctx := t.Context()
			lim := store.Limit{Algorithm: alg, Rate: 10, Period: time.Hour}
			req := store.Request{Key: "client", Limits: []store.Limit{lim}}
			h := newHandler(t, s, "client", lim,
				middleware.Options{Name: "flush-" + alg.String(), FailureMode: limiter.FailClosed})
			awayFromWindowEdge(t, c, lim.Period, 10*time.Second)

			if d, err := s.Take(ctx, req); err != nil || d.Remaining != 9 {
				t.Fatalf("take before flush: got %+v, %v, want remaining 9", d, err)
			}
			if rec := serve(h); rec.Code != http.StatusOK {
				t.Fatalf("request before flush: got %d, want 200", rec.Code)
			}
			if err := admin.ScriptFlush(ctx).Err(); err != nil {
				t.Fatalf("SCRIPT FLUSH: %v", err)
			}
			if d, err := s.Take(ctx, req); err != nil || d.Remaining != 8 {
				t.Fatalf("take after flush: got %+v, %v, want remaining 8", d, err)
			}
			if err := admin.ScriptFlush(ctx).Err(); err != nil {
				t.Fatalf("SCRIPT FLUSH: %v", err)
			}
			rec := serve(h)
			if n, ok := remaining(t, rec); rec.Code != http.StatusOK || !ok || n != 8 {
				t.Fatalf("request after flush: got %d remaining %d (present %v), want 200 remaining 8", rec.Code, n, ok)
			}
		})
	}
}
