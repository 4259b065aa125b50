package grpclimit_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	grpclimit "github.com/ratekeeper/ratekeeper/middleware/grpc"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

func newInterceptor(t *testing.T, lim *limiter.Limiter, key keyfunc.KeyFunc, opts grpclimit.Options) *grpclimit.Interceptor {
	t.Helper()
	ic, err := grpclimit.New(lim, key, opts)
	if err != nil {
		t.Fatal(err)
	}
	return ic
}

// newLimiter returns a limiter named "api" (unless o names it) under
// limit and the options o.
func newLimiter(t *testing.T, st store.Store, limit store.Limit, o limiter.Options) *limiter.Limiter {
	t.Helper()
	if o.Name == "" {
		o.Name = "api"
	}
	o.Limits = []store.Limit{limit}
	lim, err := limiter.New(st, o)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

func TestNewRefusesNil(t *testing.T) {
	lim := newLimiter(t, newMemStore(t), store.PerMinute(1), limiter.Options{})
	if _, err := grpclimit.New(nil, keyfunc.RemoteIP, grpclimit.Options{}); err == nil {
		t.Error("New(nil limiter): got nil error")
	}
	if _, err := grpclimit.New(lim, nil, grpclimit.Options{}); err == nil {
		t.Error("New(nil key, no Classify): got nil error")
	}
	classify := func(*http.Request) (string, string, error) { return "", "x", nil }
	if _, err := grpclimit.New(lim, keyfunc.RemoteIP, grpclimit.Options{Classify: classify}); err == nil {
		t.Error("New(key and Classify): got nil error")
	}
	if _, err := grpclimit.New(lim, nil, grpclimit.Options{Classify: classify}); err != nil {
		t.Errorf("New(nil key, Classify): %v", err)
	}
}

// TestUnaryExact: N calls are admitted with the limit state in their
// metadata, the next is refused with ResourceExhausted, the real wait in
// RetryInfo and retry-after, and never reaches the handler.
func TestUnaryExact(t *testing.T) {
	const n = 5
	lim := newLimiter(t, newMemStore(t), store.PerMinute(n), limiter.Options{})
	s := startServer(t, newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{}), "203.0.113.7:4242")
	for i := range n {
		md, err := say(t, s.conn)
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if got, want := md.Get("ratelimit-limit"), strconv.Itoa(n); len(got) != 1 || got[0] != want {
			t.Errorf("call %d: ratelimit-limit %q, want %q", i+1, got, want)
		}
		if got, want := md.Get("ratelimit-remaining"), strconv.Itoa(n-1-i); len(got) != 1 || got[0] != want {
			t.Errorf("call %d: ratelimit-remaining %q, want %q", i+1, got, want)
		}
		if got := md.Get("retry-after"); len(got) != 0 {
			t.Errorf("call %d: retry-after %q on an admitted call", i+1, got)
		}
	}
	md, err := say(t, s.conn)
	wantCode(t, err, codes.ResourceExhausted)
	wait, ok := retryDelay(err)
	// The window's n units were spent at once: the next is a fifth of a
	// minute away, give or take the time the calls took.
	if !ok || wait <= 0 || wait > 12*time.Second || wait < 11*time.Second {
		t.Errorf("RetryInfo delay %v (present %v), want about 12s", wait, ok)
	}
	if got := md.Get("retry-after"); len(got) != 1 || got[0] != "12" {
		t.Errorf("retry-after %q, want [12]", got)
	}
	if got := md.Get("ratelimit-remaining"); len(got) != 1 || got[0] != "0" {
		t.Errorf("ratelimit-remaining %q on the refusal, want [0]", got)
	}
	if msg := status.Convert(err).Message(); msg != "ratekeeper: too many requests: try again in 12 seconds" {
		t.Errorf("message %q", msg)
	}
	if got := s.echo.calls.Load(); got != n {
		t.Errorf("handler ran %d times, want %d", got, n)
	}
}

// TestIdentities: each key function of package keyfunc derives the
// identity of a call as it does for an HTTP request; the refusal hook
// shows the identity the limiter charged.
func TestIdentities(t *testing.T) {
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	token := func(sub string) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
			Subject: sub, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
		}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	jwtKey, err := keyfunc.JWTSubject(keyfunc.JWTOptions{Algorithms: []string{"HS256"}, Key: secret})
	if err != nil {
		t.Fatal(err)
	}
	proxied, err := keyfunc.NewClientIP(keyfunc.IPOptions{TrustedProxies: []string{"10.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	apiKey, err := keyfunc.Header("x-api-key", keyfunc.HeaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hashOf := func(v string) string {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Api-Key", v)
		id, err := apiKey(r)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	tests := []struct {
		name string
		key  keyfunc.KeyFunc
		peer string
		md   []string // outgoing metadata of both calls
		want string   // identity charged
	}{
		{"peer address", keyfunc.RemoteIP, "203.0.113.7:4242", nil, "203.0.113.7"},
		{"IPv6 peer by /64", keyfunc.RemoteIP, "[2001:db8:1:2::5]:4242", nil, "2001:db8:1:2::/64"},
		{"forwarded by a trusted proxy", proxied.Key, "10.1.2.3:4242", []string{"x-forwarded-for", "198.51.100.9"}, "198.51.100.9"},
		{"forwarded by an untrusted peer is ignored", proxied.Key, "203.0.113.7:4242", []string{"x-forwarded-for", "198.51.100.9"}, "203.0.113.7"},
		{"verified JWT subject", jwtKey, "203.0.113.7:4242", []string{"authorization", token("alice")}, "alice"},
		{"hashed API key", apiKey, "203.0.113.7:4242", []string{"x-api-key", "k-123"}, hashOf("k-123")},
		{"full method name", keyfunc.Route, "203.0.113.7:4242", nil, methodSay},
		{"joined", keyfunc.Join(keyfunc.Route, jwtKey), "203.0.113.7:4242", []string{"authorization", token("bob")},
			strconv.Itoa(len(methodSay)) + ":" + methodSay + ",3:bob,"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refused := newRefusedIDs()
			lim := newLimiter(t, newMemStore(t), store.PerMinute(1), limiter.Options{RefusalHook: refused.hook})
			s := startServer(t, newInterceptor(t, lim, tt.key, grpclimit.Options{}), tt.peer)
			if _, err := say(t, s.conn, tt.md...); err != nil {
				t.Fatalf("first call: %v", err)
			}
			_, err := say(t, s.conn, tt.md...)
			wantCode(t, err, codes.ResourceExhausted)
			if got := refused.next(t); got != tt.want {
				t.Errorf("identity %q, want %q", got, tt.want)
			}
		})
	}
}

// TestIdentityErrors: a call without an identity of the key function's
// kind is Unauthenticated, a malformed one InvalidArgument; neither
// reaches the handler nor says why.
func TestIdentityErrors(t *testing.T) {
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	jwtKey, err := keyfunc.JWTSubject(keyfunc.JWTOptions{Algorithms: []string{"HS256"}, Key: secret})
	if err != nil {
		t.Fatal(err)
	}
	proxied, err := keyfunc.NewClientIP(keyfunc.IPOptions{TrustedProxies: []string{"10.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  keyfunc.KeyFunc
		peer string
		md   []string
		want codes.Code
	}{
		{"no token", jwtKey, "203.0.113.7:1", nil, codes.Unauthenticated},
		{"forged token", jwtKey, "203.0.113.7:1", []string{"authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJldmUifQ.c2ln"}, codes.Unauthenticated},
		{"malformed chain from a trusted proxy", proxied.Key, "10.1.2.3:1", []string{"x-forwarded-for", "not-an-address"}, codes.InvalidArgument},
		{"no IP peer", keyfunc.RemoteIP, "", nil, codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := newLimiter(t, newMemStore(t), store.PerMinute(10), limiter.Options{})
			s := startServer(t, newInterceptor(t, lim, tt.key, grpclimit.Options{}), tt.peer)
			_, err := say(t, s.conn, tt.md...)
			wantCode(t, err, tt.want)
			if msg := status.Convert(err).Message(); msg != "ratekeeper: no identity" && msg != "ratekeeper: malformed call: no identity can be derived" {
				t.Errorf("message %q says more than it should", msg)
			}
			if got := s.echo.calls.Load(); got != 0 {
				t.Errorf("handler ran %d times, want 0", got)
			}
		})
	}
}

// TestStreamPerMessage: a stream is charged when it opens and for every
// message; the refused message ends the stream with ResourceExhausted,
// RetryInfo and the limit state in the trailer.
func TestStreamPerMessage(t *testing.T) {
	lim := newLimiter(t, newMemStore(t), store.PerMinute(3), limiter.Options{})
	s := startServer(t, newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{PerMessage: true}), "203.0.113.7:4242")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := s.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, methodChat)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := cs.SendMsg(wrapperspb.String("m")); err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
	}
	md, err := cs.Header()
	if err != nil {
		t.Fatal(err)
	}
	if got := md.Get("ratelimit-remaining"); len(got) != 1 || got[0] != "2" {
		t.Errorf("ratelimit-remaining %q when the stream opened, want [2]", got)
	}
	if err := cs.SendMsg(wrapperspb.String("m")); err != nil {
		t.Fatal(err)
	}
	err = cs.RecvMsg(new(wrapperspb.StringValue))
	wantCode(t, err, codes.ResourceExhausted)
	if wait, ok := retryDelay(err); !ok || wait <= 0 || wait > 20*time.Second {
		t.Errorf("RetryInfo delay %v (present %v), want about 20s", wait, ok)
	}
	if got := cs.Trailer().Get("retry-after"); len(got) != 1 || got[0] != "20" {
		t.Errorf("trailer retry-after %q, want [20]", got)
	}
	if got := s.echo.messages.Load(); got != 2 {
		t.Errorf("handler received %d messages, want 2", got)
	}
}

// TestStreamPerCall: without PerMessage only the opening of a stream is
// charged.
func TestStreamPerCall(t *testing.T) {
	lim := newLimiter(t, newMemStore(t), store.PerMinute(1), limiter.Options{})
	s := startServer(t, newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{}), "203.0.113.7:4242")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	desc := &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}
	cs, err := s.conn.NewStream(ctx, desc, methodChat)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := cs.SendMsg(wrapperspb.String("m")); err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
	}
	_ = cs.CloseSend()
	cs2, err := s.conn.NewStream(ctx, desc, methodChat)
	if err != nil {
		t.Fatal(err)
	}
	err = cs2.RecvMsg(new(wrapperspb.StringValue))
	wantCode(t, err, codes.ResourceExhausted)
	if _, ok := retryDelay(err); !ok {
		t.Error("refused stream without RetryInfo")
	}
}

// TestStoreFailure: a failing store follows the limiter's failure mode:
// the call goes on without metadata when it fails open, and is Unavailable
// when it fails closed.
func TestStoreFailure(t *testing.T) {
	for _, mode := range []limiter.FailureMode{limiter.FailOpen, limiter.FailClosed} {
		t.Run(map[limiter.FailureMode]string{limiter.FailOpen: "open", limiter.FailClosed: "closed"}[mode], func(t *testing.T) {
			lim := newLimiter(t, failingStore{}, store.PerMinute(10), limiter.Options{FailureMode: mode, BreakerCooldown: 3 * time.Second})
			s := startServer(t, newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{}), "203.0.113.7:4242")
			md, err := say(t, s.conn)
			if mode == limiter.FailOpen {
				if err != nil {
					t.Fatalf("fail open: %v", err)
				}
				if got := md.Get("ratelimit-limit"); len(got) != 0 {
					t.Errorf("ratelimit-limit %q without a decision", got)
				}
				if got := s.echo.calls.Load(); got != 1 {
					t.Errorf("handler ran %d times, want 1", got)
				}
				return
			}
			wantCode(t, err, codes.Unavailable)
			if msg := status.Convert(err).Message(); msg != "ratekeeper: rate limiter unavailable" {
				t.Errorf("message %q", msg)
			}
			// One failure does not open the breaker: the wait is its
			// cooldown, when the store may be asked again.
			if wait, ok := retryDelay(err); !ok || wait != 3*time.Second {
				t.Errorf("RetryInfo delay %v (present %v), want the breaker's cooldown 3s", wait, ok)
			}
			if got := s.echo.calls.Load(); got != 0 {
				t.Errorf("handler ran %d times, want 0", got)
			}
		})
	}
}

// TestCallerGone: a call whose caller cancels, or whose deadline passes,
// while the store decides ends with Canceled or DeadlineExceeded on the
// server, even though the limiter fails open, and never reaches the
// handler.
func TestCallerGone(t *testing.T) {
	lim := newLimiter(t, failingStore{block: true}, store.PerMinute(10), limiter.Options{BreakerThreshold: -1})
	call := func(s *server, ctx context.Context) error {
		return s.conn.Invoke(ctx, methodSay, wrapperspb.String("hi"), new(wrapperspb.StringValue))
	}
	waitServer := func(s *server, want codes.Code) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for status.Code(s.lastServerErr()) != want {
			if time.Now().After(deadline) {
				t.Fatalf("server answered %v, want %v", s.lastServerErr(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if got := s.echo.calls.Load(); got != 0 {
			t.Errorf("handler ran %d times, want 0", got)
		}
	}
	t.Run("deadline", func(t *testing.T) {
		// The server's own deadline (a propagated one, say) runs out
		// first: the client's is far away.
		short := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			return h(ctx, req)
		}
		s := startServer(t, newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{}), "203.0.113.7:4242", short)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		wantCode(t, call(s, ctx), codes.DeadlineExceeded)
		waitServer(s, codes.DeadlineExceeded)
	})
	t.Run("cancel", func(t *testing.T) {
		s := startServer(t, newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{}), "203.0.113.7:4242")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- call(s, ctx) }()
		time.Sleep(50 * time.Millisecond)
		cancel()
		wantCode(t, <-done, codes.Canceled)
		waitServer(s, codes.Canceled)
	})
}

// TestExempt: exempt methods pass without a decision.
func TestExempt(t *testing.T) {
	lim := newLimiter(t, newMemStore(t), store.PerMinute(1), limiter.Options{})
	ic := newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{Exempt: func(m string) bool { return m == methodSay }})
	s := startServer(t, ic, "203.0.113.7:4242")
	for i := range 3 {
		md, err := say(t, s.conn)
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if len(md.Get("ratelimit-limit")) != 0 {
			t.Errorf("call %d: rate-limit metadata on an exempt method", i+1)
		}
	}
}

// TestDryRun: a dry-run limiter lets refused calls through with their
// metadata.
func TestDryRun(t *testing.T) {
	lim := newLimiter(t, newMemStore(t), store.PerMinute(1), limiter.Options{DryRun: true})
	s := startServer(t, newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{}), "203.0.113.7:4242")
	for i := range 3 {
		md, err := say(t, s.conn)
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if got := md.Get("ratelimit-remaining"); len(got) != 1 || got[0] != "0" {
			t.Errorf("call %d: ratelimit-remaining %q, want [0]", i+1, got)
		}
	}
	if got := s.echo.calls.Load(); got != 3 {
		t.Errorf("handler ran %d times, want 3", got)
	}
}

// TestDryRunReset: a call a dry-run limiter would refuse reports as its
// reset the wait before a retry, as a refusal does (and as the HTTP
// middleware's headers say), not the time until the limit is full.
func TestDryRunReset(t *testing.T) {
	lim := newLimiter(t, newMemStore(t), store.Limit{Rate: 10, Period: time.Minute}, limiter.Options{DryRun: true})
	s := startServer(t, newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{}), "203.0.113.7:4242")
	for i := range 11 {
		md, err := say(t, s.conn)
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		// Admitted: until the limit is full again, 6s per unit taken.
		// Refused in a dry run: until one unit comes back, 6s (not 60s).
		want := strconv.Itoa(6 * (i + 1))
		if i == 10 {
			want = "6"
		}
		if got := md.Get("ratelimit-reset"); len(got) != 1 || got[0] != want {
			t.Errorf("call %d: ratelimit-reset %q, want [%s]", i+1, got, want)
		}
	}
}

// TestSuspended: a client suspended by an override is PermissionDenied.
func TestSuspended(t *testing.T) {
	lim := newLimiter(t, newMemStore(t), store.PerMinute(10), limiter.Options{Overrides: true})
	if err := lim.SetOverride(context.Background(), "", "203.0.113.7", store.Override{Kind: store.OverrideSuspend, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{}), "203.0.113.7:4242")
	_, err := say(t, s.conn)
	wantCode(t, err, codes.PermissionDenied)
	if got := s.echo.calls.Load(); got != 0 {
		t.Errorf("handler ran %d times, want 0", got)
	}
}

// TestTieredLimiterWithKey: a limiter with tiers cannot decide calls
// given a key function alone, which names no tier: Internal, never an
// admission.
func TestTieredLimiterWithKey(t *testing.T) {
	lim, err := limiter.New(newMemStore(t), limiter.Options{Name: "api", Tiers: []limiter.Tier{{Name: "a", Limits: []store.Limit{store.PerMinute(1)}}, {Name: "b", Unlimited: true}}})
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{}), "203.0.113.7:4242")
	_, err = say(t, s.conn)
	wantCode(t, err, codes.Internal)
}

// TestUnaryConcurrentExact: calls racing from many goroutines against a
// limit of N admit exactly N.
func TestUnaryConcurrentExact(t *testing.T) {
	const limit, callers = 10, 40
	lim := newLimiter(t, newMemStore(t), store.PerMinute(limit), limiter.Options{})
	s := startServer(t, newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{}), "203.0.113.7:4242")
	codesSeen := make(chan codes.Code, callers)
	start := make(chan struct{})
	for range callers {
		go func() {
			<-start
			_, err := say(t, s.conn)
			codesSeen <- status.Code(err)
		}()
	}
	close(start)
	admitted, refused := 0, 0
	for range callers {
		switch c := <-codesSeen; c {
		case codes.OK:
			admitted++
		case codes.ResourceExhausted:
			refused++
		default:
			t.Errorf("unexpected status %v", c)
		}
	}
	if admitted != limit || refused != callers-limit {
		t.Errorf("admitted %d and refused %d, want %d and %d", admitted, refused, limit, callers-limit)
	}
	if got := s.echo.calls.Load(); got != limit {
		t.Errorf("handler ran %d times, want %d", got, limit)
	}
}

// TestTiers: with Options.Classify, middleware.AuthOptions classifies
// calls as it classifies HTTP requests: a verified subject in its tier
// under its own quota, an anonymous caller by address in another, a
// trusted subject unlimited without metadata, a suspended one
// PermissionDenied.
func TestTiers(t *testing.T) {
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	token := func(sub string) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
			Subject: sub, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
		}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	jwtKey, err := keyfunc.JWTSubject(keyfunc.JWTOptions{Algorithms: []string{"HS256"}, Key: secret})
	if err != nil {
		t.Fatal(err)
	}
	auth := middleware.AuthOptions{
		Subject:   jwtKey,
		Anonymous: keyfunc.RemoteIP,
		Trusted:   func(sub string, _ *http.Request) bool { return sub == "root" },
		Suspended: func(sub string, _ *http.Request) bool { return sub == "mallory" },
	}
	refused := newRefusedIDs()
	lim, err := limiter.New(newMemStore(t), limiter.Options{Name: "api", RefusalHook: refused.hook, Tiers: []limiter.Tier{
		{Name: "anonymous", Limits: []store.Limit{store.PerMinute(1)}},
		{Name: "authenticated", Limits: []store.Limit{store.PerMinute(3)}},
		{Name: "trusted", Unlimited: true},
		{Name: "suspended", Suspended: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, newInterceptor(t, lim, nil, grpclimit.Options{Classify: auth.Classify}), "203.0.113.7:4242")

	// The anonymous caller's quota is 1, apart from alice's 3.
	if _, err := say(t, s.conn); err != nil {
		t.Fatalf("anonymous call: %v", err)
	}
	_, err = say(t, s.conn)
	wantCode(t, err, codes.ResourceExhausted)
	if got := refused.next(t); got != "203.0.113.7" {
		t.Errorf("anonymous identity %q, want 203.0.113.7", got)
	}
	for i := range 3 {
		md, err := say(t, s.conn, "authorization", token("alice"))
		if err != nil {
			t.Fatalf("alice's call %d: %v", i+1, err)
		}
		if got := md.Get("ratelimit-limit"); len(got) != 1 || got[0] != "3" {
			t.Errorf("alice's call %d: ratelimit-limit %q, want [3]", i+1, got)
		}
	}
	_, err = say(t, s.conn, "authorization", token("alice"))
	wantCode(t, err, codes.ResourceExhausted)
	if got := refused.next(t); got != "alice" {
		t.Errorf("authenticated identity %q, want alice", got)
	}
	for i := range 5 {
		md, err := say(t, s.conn, "authorization", token("root"))
		if err != nil {
			t.Fatalf("trusted call %d: %v", i+1, err)
		}
		if got := md.Get("ratelimit-limit"); len(got) != 0 {
			t.Errorf("trusted call %d: ratelimit-limit %q on an unlimited tier", i+1, got)
		}
	}
	_, err = say(t, s.conn, "authorization", token("mallory"))
	wantCode(t, err, codes.PermissionDenied)
	if got, want := s.echo.calls.Load(), int64(1+3+5); got != want {
		t.Errorf("handler ran %d times, want %d", got, want)
	}
}

// ctxKey marks the context of the calls of TestObserver.
type ctxKey struct{}

// TestObserver: the limiter's observer sees every call with the call's
// context, the exempt and rejected ones included, never its identity.
func TestObserver(t *testing.T) {
	type seen struct {
		outcome limiter.Outcome
		mark    any
	}
	events := make(chan seen, 16)
	lim := newLimiter(t, newMemStore(t), store.PerMinute(1), limiter.Options{
		Observer: func(ctx context.Context, e limiter.Event) { events <- seen{e.Outcome, ctx.Value(ctxKey{})} },
	})
	jwtKey, err := keyfunc.JWTSubject(keyfunc.JWTOptions{Algorithms: []string{"HS256"}, Key: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	mark := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(context.WithValue(ctx, ctxKey{}, "call"), req)
	}
	keyed := startServer(t, newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{Exempt: func(m string) bool { return m == methodChat }}), "203.0.113.7:4242", mark)
	if _, err := say(t, keyed.conn); err != nil {
		t.Fatal(err)
	}
	_, err = say(t, keyed.conn)
	wantCode(t, err, codes.ResourceExhausted)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := keyed.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, methodChat)
	if err != nil {
		t.Fatal(err)
	}
	_ = cs.CloseSend()
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); err == nil {
		t.Fatal("the exempt stream answered a message it was not sent")
	}
	unauth := startServer(t, newInterceptor(t, lim, jwtKey, grpclimit.Options{}), "203.0.113.7:4242", mark)
	_, err = say(t, unauth.conn)
	wantCode(t, err, codes.Unauthenticated)

	want := []seen{
		{limiter.OutcomeAllowed, "call"},
		{limiter.OutcomeLimited, "call"},
		{limiter.OutcomeExempt, nil}, // the stream's context is not marked
		{limiter.OutcomeRejected, "call"},
	}
	for i, w := range want {
		select {
		case got := <-events:
			if got != w {
				t.Errorf("event %d: got %v, want %v", i, got, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d: none, want %v", i, w)
		}
	}
}

// TestInFlightCap: a limiter's in-flight cap holds over gRPC as over HTTP.
// While a stream of one client is open, holding the cap's one slot, its
// unary call is refused with ResourceExhausted, a RetryInfo and the
// retry-after metadata, and never reaches the handler; once the stream
// ends the slot is back. With and without rate limits beside the cap.
func TestInFlightCap(t *testing.T) {
	for _, rated := range []bool{false, true} {
		t.Run(fmt.Sprintf("rate limits %t", rated), func(t *testing.T) {
			o := limiter.Options{Name: "api", InFlight: limiter.InFlight{Max: 1}}
			if rated {
				o.Limits = []store.Limit{store.PerMinute(100)}
			}
			lim, err := limiter.New(newMemStore(t), o)
			if err != nil {
				t.Fatal(err)
			}
			s := startServer(t, newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{}), "203.0.113.7:4242")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stream, err := s.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, methodChat)
			if err != nil {
				t.Fatal(err)
			}
			// The stream is open (and holds the slot) once it echoes.
			if err := stream.SendMsg(wrapperspb.String("hi")); err != nil {
				t.Fatal(err)
			}
			if err := stream.RecvMsg(new(wrapperspb.StringValue)); err != nil {
				t.Fatal(err)
			}
			md, err := say(t, s.conn)
			wantCode(t, err, codes.ResourceExhausted)
			if d, ok := retryDelay(err); !ok || d < time.Second {
				t.Errorf("RetryInfo %s, %t; want at least a second", d, ok)
			}
			if got := md.Get("retry-after"); len(got) != 1 {
				t.Errorf("retry-after metadata %q, want one value", got)
			}
			if n := s.echo.calls.Load(); n != 0 {
				t.Fatalf("the refused call reached the handler (%d calls)", n)
			}
			if err := stream.CloseSend(); err != nil {
				t.Fatal(err)
			}
			if err := stream.RecvMsg(new(wrapperspb.StringValue)); err == nil {
				t.Fatal("the stream went on after CloseSend")
			}
			// The slot comes back when the stream's handler has returned.
			deadline := time.Now().Add(5 * time.Second)
			for {
				if _, err = say(t, s.conn); err == nil || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("after the stream ended: %v", err)
			}
		})
	}
}

// failingSlots is failingStore keeping in-flight caps, which fail too.
type failingSlots struct{ failingStore }

func (s failingSlots) Acquire(ctx context.Context, _ store.Slot, _ int64, _ time.Duration) (bool, int64, error) {
	return false, 0, s.fail(ctx, "acquire")
}

func (s failingSlots) Release(ctx context.Context, _ store.Slot) error { return s.fail(ctx, "release") }

func (s failingSlots) Renew(ctx context.Context, _ []store.Slot, _ time.Duration) (int, error) {
	return 0, s.fail(ctx, "renew")
}

// TestInFlightCapStoreDown: a store that fails takes no slot; the call
// follows the limiter's failure mode, as an HTTP request does: it goes on
// when the limiter fails open, and is Unavailable when it fails closed.
func TestInFlightCapStoreDown(t *testing.T) {
	for _, mode := range []limiter.FailureMode{limiter.FailOpen, limiter.FailClosed} {
		lim, err := limiter.New(failingSlots{}, limiter.Options{Name: "api", InFlight: limiter.InFlight{Max: 1},
			Limits: []store.Limit{store.PerMinute(10)}, FailureMode: mode, BreakerThreshold: -1})
		if err != nil {
			t.Fatal(err)
		}
		s := startServer(t, newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{}), "203.0.113.7:4242")
		_, err = say(t, s.conn)
		if mode == limiter.FailOpen {
			wantCode(t, err, codes.OK)
		} else {
			wantCode(t, err, codes.Unavailable)
		}
	}
}

// TestKeyFunctionPanic: a key function that panics fails its call with
// Internal, reported as a rejection with the panic in its error; the
// server goes on (grpc-go recovers no panic of an interceptor's).
func TestKeyFunctionPanic(t *testing.T) {
	var rejected atomic.Int64
	lim := newLimiter(t, newMemStore(t), store.PerMinute(10), limiter.Options{Observer: func(_ context.Context, e limiter.Event) {
		if e.Outcome == limiter.OutcomeRejected && e.Err != nil && strings.Contains(e.Err.Error(), "boom") {
			rejected.Add(1)
		}
	}})
	key := func(r *http.Request) (string, error) {
		if r.Header.Get("x-boom") != "" {
			panic("boom")
		}
		return keyfunc.RemoteIP(r)
	}
	s := startServer(t, newInterceptor(t, lim, key, grpclimit.Options{}), "203.0.113.7:4242")
	_, err := say(t, s.conn, "x-boom", "1")
	wantCode(t, err, codes.Internal)
	if rejected.Load() != 1 {
		t.Errorf("rejections reported with the panic: %d, want 1", rejected.Load())
	}
	if _, err := say(t, s.conn); err != nil {
		t.Fatalf("a call after the panic: %v", err)
	}
}
