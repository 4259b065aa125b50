package middleware

import (
	"context"
	"errors"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// keyErr is a store error about one key's data, as the Redis store
// reports a WRONGTYPE reply: it has a KeyScoped method that returns true.
type keyErr struct{ msg string }

func (e keyErr) Error() string   { return e.msg }
func (e keyErr) KeyScoped() bool { return true }

// Regression: a state key of the wrong type failed its decisions as script
// errors, the breaker counted them and opened, and every other client's
// requests then failed open (30 of 30 through a limit of 10).
func TestKeyScopedErrorsDoNotOpenBreaker(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantOpen bool
	}{
		{"wrong type", &store.BackendError{Op: "take", Kind: "script",
			Err: keyErr{"WRONGTYPE Operation against a key holding the wrong kind of value"}}, false},
		{"script error about every key", &store.BackendError{Op: "take", Kind: "script",
			Err: errors.New("ERR Error compiling script")}, true},
		{"connection", &store.BackendError{Op: "take", Kind: "connection",
			Err: errors.New("connection refused")}, true},
		{"timeout", &store.BackendError{Op: "take", Kind: "timeout",
			Err: context.DeadlineExceeded}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := mustMem(t)
			s := &funcStore{take: func(ctx context.Context, req store.Request) (store.Decision, error) {
				if strings.HasSuffix(req.Key, "poisoned") {
					return store.Decision{}, tt.err
				}
				return mem.Take(ctx, req)
			}}
			var obs recObserver
			key := func(r *http.Request) (string, error) { return r.Header.Get("X-Client"), nil }
			lim := mustNew(t, s, key, store.PerMinute(10), Options{
				BreakerThreshold: 2,
				BreakerCooldown:  time.Hour,
				Observer:         obs.Observe,
			})
			h := lim.Handler(okHandler)
			send := func(client string) int {
				return serveReq(h, request("GET", "/", "192.0.2.1:1", "X-Client", client)).Code
			}
			for range 5 {
				if code := send("poisoned"); code != http.StatusOK {
					t.Fatalf("poisoned client: got %d, want 200 (fail open applies to its requests)", code)
				}
			}
			admitted := 0
			for range 30 {
				if send("other") == http.StatusOK {
					admitted++
				}
			}
			want := 10
			if tt.wantOpen {
				want = 30 // the breaker opened, and fail open lets all through
			}
			if admitted != want {
				t.Fatalf("other client: got %d of 30 admitted, want %d", admitted, want)
			}
			for i, o := range obs.outcomes()[:5] {
				if o != limiter.OutcomeFailedOpen {
					t.Fatalf("poisoned request %d: got outcome %s, want %s", i, o, limiter.OutcomeFailedOpen)
				}
			}
		})
	}
}

// TestRepairIsReported: a decision on state the store repaired is logged
// at warn level (at most once per second) and shown to the observer.
func TestRepairIsReported(t *testing.T) {
	mem := mustMem(t)
	s := &funcStore{take: func(ctx context.Context, req store.Request) (store.Decision, error) {
		d, err := mem.Take(ctx, req)
		d.Repaired = strings.HasSuffix(req.Key, "poisoned")
		return d, err
	}}
	var obs recObserver
	var logs logLines
	key := func(r *http.Request) (string, error) { return r.Header.Get("X-Client"), nil }
	lim := mustNew(t, s, key, store.PerMinute(10), Options{Observer: obs.Observe, Logger: logs.logger(slog.LevelInfo)})
	h := lim.Handler(okHandler)
	for _, client := range []string{"poisoned", "poisoned", "fine"} {
		if code := serveReq(h, request("GET", "/", "192.0.2.1:1", "X-Client", client)).Code; code != http.StatusOK {
			t.Fatalf("got %d, want 200", code)
		}
	}
	if _, err := lim.Allow(context.Background(), "poisoned"); err != nil {
		t.Fatal(err)
	}
	lines := logs.find(t, "could not read")
	if len(lines) != 1 || lines[0]["level"] != "WARN" || lines[0]["policy"] == "" {
		t.Fatalf("got log lines %v, want one warning naming the policy", lines)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	var got []bool
	for _, e := range obs.events {
		got = append(got, e.Repaired)
	}
	if len(got) != 4 || !got[0] || !got[1] || got[2] || !got[3] {
		t.Fatalf("got Repaired %v in events, want [true true false true]", got)
	}
}
