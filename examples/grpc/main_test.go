package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ratekeeper/ratekeeper/examples/internal/demo"
	"github.com/ratekeeper/ratekeeper/examples/internal/demotest"
)

// TestService: the HTTP side is the stdlib example's.
func TestService(t *testing.T) { demotest.Run(t, demo.Routes) }

// service is the example on loopback: its HTTP server and a client of its
// gRPC server, both on the embedded policy file and the memory store.
type service struct {
	p      *demo.Policies
	http   *httptest.Server
	health healthpb.HealthClient
}

func startService(t *testing.T) *service {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	st, err := demo.OpenStore(t.Context(), "", quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	p, err := demo.NewPolicies(st, demo.Env{JWTSecret: demo.DemoSecret}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	s := &service{p: p, http: httptest.NewServer(demo.Routes(p))}
	t.Cleanup(s.http.Close)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newGRPCServer(p)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s.health = healthpb.NewHealthClient(conn)
	return s
}

// ping sends GET /api/ping with the authorization header auth (none when
// empty) and returns its status and X-RateLimit-Limit.
func (s *service) ping(t *testing.T, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.http.URL+"/api/ping", nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := s.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-RateLimit-Limit")
}

// check calls grpc.health.v1.Health/Check with the authorization
// metadata auth (none when empty) and returns its status code and
// ratelimit-limit metadata.
func (s *service) check(t *testing.T, auth string) (codes.Code, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if auth != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", auth)
	}
	var md metadata.MD
	_, err := s.health.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
	return status.Code(err), md.Get("ratelimit-limit")
}

// TestOneQuotaAcrossProtocols: the api policy of the one policy file
// limits a client's GET /api/ping requests and gRPC calls against one
// quota: an anonymous client gets exactly its 10 per minute across both,
// interleaved.
func TestOneQuotaAcrossProtocols(t *testing.T) {
	s := startService(t)
	admitted := 0
	for i := range 20 {
		var ok bool
		if i%2 == 0 {
			code, limit := s.ping(t, "")
			ok = code == http.StatusOK
			if code != http.StatusOK && code != http.StatusTooManyRequests || limit != "10" {
				t.Errorf("request %d (HTTP): status %d, X-RateLimit-Limit %q; want 200 or 429 with limit 10", i+1, code, limit)
			}
		} else {
			code, limit := s.check(t, "")
			ok = code == codes.OK
			if code != codes.OK && code != codes.ResourceExhausted || len(limit) != 1 || limit[0] != "10" {
				t.Errorf("request %d (gRPC): %v, ratelimit-limit %q; want OK or ResourceExhausted with limit 10", i+1, code, limit)
			}
		}
		if want := i < 10; ok != want {
			t.Errorf("request %d: admitted %v, want %v", i+1, ok, want)
		}
		if ok {
			admitted++
		}
	}
	if admitted != 10 {
		t.Errorf("admitted %d, want 10", admitted)
	}
}

// TestTiersFromTheFile: the file's "auth" classifier puts a gRPC call
// with a verified token in the authenticated tier, as it does a request.
func TestTiersFromTheFile(t *testing.T) {
	s := startService(t)
	tok, err := demo.Token(demo.DemoSecret, "alice", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if code, limit := s.check(t, "Bearer "+tok); code != codes.OK || len(limit) != 1 || limit[0] != "100" {
		t.Errorf("authenticated call: %v, ratelimit-limit %q; want OK with limit 100", code, limit)
	}
	if code, limit := s.ping(t, "Bearer "+tok); code != http.StatusOK || limit != "100" {
		t.Errorf("authenticated request: %d, X-RateLimit-Limit %q; want 200 with limit 100", code, limit)
	}
}

// TestModeSwitch: switching the api policy off lets gRPC calls through
// undecided, as it does HTTP requests; switching it back enforces the
// quota the client had spent.
func TestModeSwitch(t *testing.T) {
	s := startService(t)
	for range 10 {
		if code, _ := s.check(t, ""); code != codes.OK {
			t.Fatalf("call within the quota: %v", code)
		}
	}
	if code, _ := s.check(t, ""); code != codes.ResourceExhausted {
		t.Fatalf("call over the quota: %v, want ResourceExhausted", code)
	}
	if err := s.p.Set.SetMode("api", "off"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if code, limit := s.check(t, ""); code != codes.OK || len(limit) != 0 {
			t.Fatalf("call %d with the policy off: %v, ratelimit-limit %q; want OK without metadata", i+1, code, limit)
		}
	}
	if code, _ := s.ping(t, ""); code != http.StatusOK {
		t.Fatalf("request with the policy off: %d", code)
	}
	if err := s.p.Set.SetMode("api", ""); err != nil {
		t.Fatal(err)
	}
	if code, _ := s.check(t, ""); code != codes.ResourceExhausted {
		t.Errorf("call with the policy back on: %v, want ResourceExhausted", code)
	}
	// Dry run decides with a limiter of its own: calls over the quota go
	// on, with the limit in their metadata.
	if err := s.p.Set.SetMode("api", "dry_run"); err != nil {
		t.Fatal(err)
	}
	if code, limit := s.check(t, ""); code != codes.OK || len(limit) != 1 || limit[0] != "10" {
		t.Errorf("call in dry run: %v, ratelimit-limit %q; want OK with limit 10", code, limit)
	}
}

// TestStopWithWatchStream: a stop with a health Watch stream open, which
// never ends by itself, still returns without an error within grpcDrain,
// and the stream is closed.
func TestStopWithWatchStream(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- serveUntil(ctx, srv, lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	watch, err := healthpb.NewHealthClient(conn).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatalf("first health status: %v", err)
	}
	start := time.Now()
	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve: got %v, want nil", err)
		}
	case <-time.After(grpcDrain + 3*time.Second):
		t.Fatalf("serve did not return within %s of the stop", grpcDrain+3*time.Second)
	}
	if took := time.Since(start); took < grpcDrain-100*time.Millisecond {
		t.Errorf("stopped after %s: the open stream was not given its %s to end", took, grpcDrain)
	}
	if _, err := watch.Recv(); err == nil {
		t.Error("the Watch stream still delivers after the stop")
	}
}
