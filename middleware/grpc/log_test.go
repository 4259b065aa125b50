package grpclimit_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratekeeper/ratekeeper/internal/testlog"
	"github.com/ratekeeper/ratekeeper/keyfunc"
	grpclimit "github.com/ratekeeper/ratekeeper/middleware/grpc"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

// TestLogLinesNameTheMethod: the decision lines of a unary call, and of a
// stream's opening and its messages, carry the call's full method name,
// before the identity's hash.
func TestLogLinesNameTheMethod(t *testing.T) {
	var buf testlog.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	lim := newLimiter(t, newMemStore(t), store.PerMinute(100), limiter.Options{Logger: logger})
	s := startServer(t, newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{PerMessage: true}), "203.0.113.7:4242")
	if _, err := say(t, s.conn); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := s.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, methodChat)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(wrapperspb.String("m")); err != nil {
		t.Fatal(err)
	}
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
		t.Fatal(err)
	}
	want := []string{methodSay, methodChat, methodChat} // the call, the stream, its message
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i, line := range lines {
		if !strings.Contains(line, `msg="ratekeeper: decision" policy=api outcome=allowed grpc_method=`+want[i]+" key_hash=") {
			t.Errorf("line %d: got %q, want the decision on %s", i, line, want[i])
		}
	}
}
