package limiter

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// Lines about one request carry the attributes of WithLogAttrs, enclosing
// ones first, between the outcome and the identity's hash: the decision
// line at debug level and the line of a block's start at info.
func TestWithLogAttrs(t *testing.T) {
	var buf bytes.Buffer
	l := mustNew(t, mustMem(t), Options{
		Name:   "api",
		Limits: []store.Limit{{Rate: 1, Period: time.Minute, Block: time.Minute}},
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	ctx := WithLogAttrs(context.Background(), slog.String("grpc_method", "/pkg.Svc/Get"))
	ctx = WithLogAttrs(ctx, slog.Int("attempt", 2))
	for range 2 { // admitted, then refused and blocked
		if _, err := l.Decide(ctx, Request{Identity: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Decide(context.Background(), Request{Identity: "bob"}); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for line := range strings.Lines(buf.String()) {
		lines = append(lines, line)
	}
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want 4 (two decisions, a block, a decision):\n%s", len(lines), buf.String())
	}
	for i, line := range lines[:3] {
		call := strings.Index(line, "grpc_method=/pkg.Svc/Get attempt=2 key_hash=")
		if call < 0 || call < strings.Index(line, "policy=api") {
			t.Errorf("line %d: got %q, want the attributes in order after the policy, before key_hash", i, line)
		}
	}
	if !strings.Contains(lines[1], `msg="ratekeeper: block started"`) && !strings.Contains(lines[2], `msg="ratekeeper: block started"`) {
		t.Errorf("no block line among %q", lines[1:3])
	}
	if strings.Contains(lines[3], "grpc_method") || !strings.Contains(lines[3], "key_hash=") {
		t.Errorf("line of a request without attributes: got %q", lines[3])
	}
}
