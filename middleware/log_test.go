package middleware

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
)

type traceKey struct{}

// traceHandler adds the trace id found in the context to every record, as
// an application's tracing handler would.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if id, ok := ctx.Value(traceKey{}).(string); ok {
		r.AddAttrs(slog.String("trace", id))
	}
	return h.Handler.Handle(ctx, r)
}

// logLines collects JSON log lines.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) logger(level slog.Level) *slog.Logger {
	return slog.New(traceHandler{slog.NewJSONHandler(l, &slog.HandlerOptions{Level: level})})
}

// find returns the lines whose message contains msg.
func (l *logLines) find(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(l.buf.Bytes()), []byte("\n")) {
		var m map[string]any
		if len(line) == 0 {
			continue
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if s, _ := m["msg"].(string); strings.Contains(s, msg) {
			out = append(out, m)
		}
	}
	return out
}

func (l *logLines) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.buf.String() }

// Logs carry a keyed hash of the identity, never the identity itself, and
// store-failure warnings are throttled so an outage cannot flood the log.
func TestLogsHashIdentitiesAndThrottleWarnings(t *testing.T) {
	var lines logLines
	var fail bool
	s := &funcStore{take: func(context.Context, store.Request) (store.Decision, error) {
		if fail {
			return store.Decision{}, &store.BackendError{Op: "take", Kind: "connection", Err: errors.New("dial 10.1.2.3:6379 refused")}
		}
		return store.Decision{Allowed: true, Capacity: 5, Remaining: 4}, nil
	}}
	const identity = "198.51.100.77"
	lim, err := New(s, constKey(identity), store.PerMinute(5), Options{
		Logger:           lines.logger(slog.LevelDebug),
		BreakerThreshold: -1,
		BreakerCooldown:  0,
		Name:             "api",
	})
	if err != nil {
		t.Fatal(err)
	}
	h := lim.Handler(okHandler)
	do(h)
	got := lines.find(t, "decision")
	if len(got) != 1 || got[0]["key_hash"] == nil || got[0]["policy"] != "api" || got[0]["outcome"] != "allowed" {
		t.Fatalf("debug line: got %v, want policy, outcome and key_hash", got)
	}
	if strings.Contains(lines.String(), identity) {
		t.Fatalf("log contains the identity in clear: %s", lines.String())
	}
	fail = true
	for range 100 {
		do(h)
	}
	if n := len(lines.find(t, "store failure")); n != 1 {
		t.Fatalf("warnings for 100 failures within a second: got %d, want 1", n)
	}
}

// Decision lines are logged with the request's context (a tracing
// handler finds its trace id) and name the method and the route pattern.
func TestDecisionLinesCarryContextMethodAndRoute(t *testing.T) {
	var lines logLines
	lim := mustNew(t, mustMem(t), keyfunc.RemoteIP, store.PerMinute(5), Options{Logger: lines.logger(slog.LevelDebug)})
	r := chi.NewRouter()
	r.With(lim.Handler).Post("/orders/{id}", okHandler)
	req := request("POST", "/orders/42", "192.0.2.1:1")
	req = req.WithContext(context.WithValue(req.Context(), traceKey{}, "t-123"))
	serveReq(r, req)
	got := lines.find(t, "decision")
	if len(got) != 1 {
		t.Fatalf("decision lines: got %d, want 1 in %s", len(got), lines.String())
	}
	if got[0]["trace"] != "t-123" || got[0]["method"] != "POST" || got[0]["route"] != "/orders/{id}" {
		t.Errorf("line: got %v, want trace t-123, method POST, route /orders/{id}", got[0])
	}
}

// With a configured secret, two replicas log the same hash for one client;
// without one, each process has its own.
func TestLogSecretMakesHashesStableAcrossReplicas(t *testing.T) {
	hash := func(opts ...Options) string {
		var lines logLines
		o := quietly(opts)
		o.Logger = lines.logger(slog.LevelDebug)
		lim, err := New(mustMem(t), keyfunc.RemoteIP, store.PerMinute(5), o)
		if err != nil {
			t.Fatal(err)
		}
		serveReq(lim.Handler(okHandler), request("GET", "/", "203.0.113.9:1"))
		got := lines.find(t, "decision")
		if len(got) != 1 {
			t.Fatalf("decision lines: got %d, want 1", len(got))
		}
		return got[0]["key_hash"].(string)
	}
	secret := []byte("shared by every replica of the service")
	a, b := hash(Options{LogSecret: secret}), hash(Options{LogSecret: secret})
	if a != b {
		t.Errorf("same secret: got hashes %s and %s, want equal", a, b)
	}
	if c := hash(Options{LogSecret: []byte("another secret")}); c == a {
		t.Errorf("different secrets: got the same hash %s", c)
	}
	if d := hash(); d == a {
		t.Errorf("process secret: got the configured secret's hash %s", d)
	}
}

// The breaker opening and closing, and the start of a block, are logged
// at info level: an operator sees them without debug logs.
func TestInfoLinesForBreakerAndBlocks(t *testing.T) {
	var lines logLines
	var failing bool
	var mu sync.Mutex
	mem := mustMem(t)
	s := &funcStore{take: func(ctx context.Context, req store.Request) (store.Decision, error) {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return store.Decision{}, errDown
		}
		return mem.Take(ctx, req)
	}}
	clock := time.Unix(1000, 0)
	lim := mustNew(t, s, keyfunc.RemoteIP, store.Limit{Algorithm: store.FixedWindow, Rate: 1, Period: time.Minute, Block: time.Hour},
		Options{
			Name:             "login",
			Logger:           lines.logger(slog.LevelInfo),
			BreakerThreshold: 2,
			BreakerCooldown:  time.Second,
			Clock:            func() time.Time { return clock },
		})
	h := lim.Handler(okHandler)
	send := func() { serveReq(h, request("POST", "/login", "192.0.2.1:1")) }
	send()
	send() // refused: the block starts
	blocks := lines.find(t, "block started")
	if len(blocks) != 1 || blocks[0]["level"] != "INFO" || blocks[0]["scope"] != "fixed_window/1m0s" || blocks[0]["policy"] != "login" {
		t.Fatalf("block lines: got %v, want one info line naming policy and scope", blocks)
	}
	mu.Lock()
	failing = true
	mu.Unlock()
	send()
	send() // the second failure opens the breaker
	send() // skipped
	if got := lines.find(t, "breaker opened"); len(got) != 1 || got[0]["level"] != "INFO" {
		t.Fatalf("breaker opened lines: got %v, want one at info", got)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	clock = clock.Add(2 * time.Second)
	send() // the probe succeeds
	if got := lines.find(t, "breaker closed"); len(got) != 1 || got[0]["level"] != "INFO" {
		t.Fatalf("breaker closed lines: got %v, want one at info", got)
	}
	if got := lines.find(t, "decision"); len(got) != 0 {
		t.Errorf("decision lines at info level: got %d, want 0", len(got))
	}
}
