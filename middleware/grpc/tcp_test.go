package grpclimit_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	grpclimit "github.com/ratekeeper/ratekeeper/middleware/grpc"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

// serveTCP serves the echo service behind ic on a TCP port of the loopback
// interface and returns a client connection to it.
func serveTCP(t *testing.T, ic *grpclimit.Interceptor) (*echo, *grpc.ClientConn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(ic.Unary()), grpc.ChainStreamInterceptor(ic.Stream()))
	srv.RegisterService(e.desc(), nil)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return e, conn
}

// TestTCP: over a real TCP connection the peer address is the client's,
// and exactly the limit's calls are admitted.
func TestTCP(t *testing.T) {
	refused := newRefusedIDs()
	lim := newLimiter(t, newMemStore(t), store.PerMinute(3), limiter.Options{RefusalHook: refused.hook})
	e, conn := serveTCP(t, newInterceptor(t, lim, keyfunc.RemoteIP, grpclimit.Options{}))
	for i := range 3 {
		if _, err := say(t, conn); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	_, err := say(t, conn)
	wantCode(t, err, codes.ResourceExhausted)
	if got := refused.next(t); got != "127.0.0.1" {
		t.Errorf("identity %q, want 127.0.0.1", got)
	}
	if got := e.calls.Load(); got != 3 {
		t.Errorf("handler ran %d times, want 3", got)
	}
}

// TestQuotaSharedWithHTTP: two limiters of one name on one store, one
// behind an HTTP handler and one behind the interceptors, with the same
// key function, count a client's HTTP requests and gRPC calls against one
// quota (as two instances of a service sharing a Redis do); so does one
// HTTP limiter whose decision core serves the interceptors.
func TestQuotaSharedWithHTTP(t *testing.T) {
	t.Run("two limiters", func(t *testing.T) {
		st := newMemStore(t)
		httpLim, err := middleware.New(st, keyfunc.RemoteIP, store.PerMinute(5), middleware.Options{Name: "shared"})
		if err != nil {
			t.Fatal(err)
		}
		grpcLim := newLimiter(t, st, store.PerMinute(5), limiter.Options{Name: "shared"})
		testQuotaShared(t, httpLim, grpcLim)
	})
	t.Run("one limiter", func(t *testing.T) {
		httpLim, err := middleware.New(newMemStore(t), keyfunc.RemoteIP, store.PerMinute(5), middleware.Options{Name: "shared"})
		if err != nil {
			t.Fatal(err)
		}
		testQuotaShared(t, httpLim, httpLim.Limiter)
	})
}

// testQuotaShared spends a quota of 5 with 3 HTTP requests through httpLim
// and 2 gRPC calls through grpcLim, then finds it spent on both sides.
func testQuotaShared(t *testing.T, httpLim *middleware.Limiter, grpcLim *limiter.Limiter) {
	t.Helper()
	h := httpLim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	get := func() int {
		r := httptest.NewRequest(http.MethodGet, "/ping", nil)
		r.RemoteAddr = "127.0.0.1:50000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	_, conn := serveTCP(t, newInterceptor(t, grpcLim, keyfunc.RemoteIP, grpclimit.Options{}))
	for i := range 3 {
		if code := get(); code != http.StatusOK {
			t.Fatalf("HTTP request %d: status %d", i+1, code)
		}
	}
	for i := range 2 {
		if _, err := say(t, conn); err != nil {
			t.Fatalf("gRPC call %d: %v", i+1, err)
		}
	}
	_, err := say(t, conn)
	wantCode(t, err, codes.ResourceExhausted)
	if code := get(); code != http.StatusTooManyRequests {
		t.Errorf("HTTP request after the quota: status %d, want 429", code)
	}
}
