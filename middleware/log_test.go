package middleware

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/ratekeeper/ratekeeper/store"
)

// Logs carry a keyed hash of the client key, never the key itself, and
// store-failure warnings are throttled so an outage cannot flood the log.
func TestLogsHashKeysAndThrottleWarnings(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var fail bool
	s := &funcStore{take: func(context.Context, store.Request) (store.Decision, error) {
		if fail {
			return store.Decision{}, &store.BackendError{Op: "take", Kind: store.KindConnection, Err: errors.New("dial 10.1.2.3:6379 refused")}
		}
		return store.Decision{Allowed: true, Limit: 5, Remaining: 4}, nil
	}}
	const secretKey = "198.51.100.77"
	lim, err := New(s, constKey(secretKey), store.PerMinute(5), WithLogger(logger), WithBreaker(0, 0), WithName("api"))
	if err != nil {
		t.Fatal(err)
	}
	h := lim.Handler(okHandler)
	do(h)
	out := buf.String()
	if !strings.Contains(out, `"key_hash"`) || !strings.Contains(out, `"policy":"api"`) || !strings.Contains(out, `"outcome":"allowed"`) {
		t.Fatalf("debug line: got %s, want policy, outcome and key_hash", out)
	}
	if strings.Contains(out, secretKey) {
		t.Fatalf("log contains the key in clear: %s", out)
	}
	buf.Reset()
	fail = true
	for range 100 {
		do(h)
	}
	if n := strings.Count(buf.String(), "store failure"); n != 1 {
		t.Fatalf("warnings for 100 failures within a second: got %d, want 1", n)
	}
}
