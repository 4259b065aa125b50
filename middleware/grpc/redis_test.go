package grpclimit_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	grpclimit "github.com/ratekeeper/ratekeeper/middleware/grpc"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// instance is one replica of a service that serves HTTP and gRPC under
// one policy: its own Redis client and store, its own limiter, an HTTP
// server and a gRPC server on loopback.
type instance struct {
	http    *httptest.Server
	grpc    *echo
	say     func(t *testing.T, kv ...string) error
	handled atomic.Int64 // HTTP requests that reached the handler
}

// startInstance starts a replica on the Redis at addr, its keys under
// prefix, limiting each JWT subject to 10 calls per minute across both
// protocols. A store failure refuses (FailClosed), so that it can never
// pass for an admission.
func startInstance(t *testing.T, addr, prefix string, secret []byte) *instance {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = client.Close() })
	st, err := redisstore.New(client, redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := keyfunc.JWTSubject(keyfunc.JWTOptions{Algorithms: []string{"HS256"}, Key: secret})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := middleware.New(st, sub, store.PerMinute(10), middleware.Options{Name: "api", FailureMode: limiter.FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{}
	in.http = httptest.NewServer(lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { in.handled.Add(1) })))
	t.Cleanup(in.http.Close)
	ic := newInterceptor(t, lim.Limiter, sub, grpclimit.Options{})
	e, conn := serveTCP(t, ic)
	in.grpc = e
	in.say = func(t *testing.T, kv ...string) error {
		_, err := say(t, conn, kv...)
		return err
	}
	return in
}

// get sends an HTTP request with the authorization header auth and
// returns its status.
func (in *instance) get(t *testing.T, auth string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, in.http.URL+"/api", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	resp, err := in.http.Client().Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// way is one way for a client to call a service: a protocol and an
// instance. call reports whether the call was admitted.
type way struct {
	name string
	call func(t *testing.T, auth string) bool
}

// TestOneQuotaAcrossProtocolsAndInstances: the same client, limited to 10
// per minute by one policy, gets exactly 10 across HTTP requests and gRPC
// calls to two instances sharing one Redis, whether its calls come one
// after the other or all at once.
func TestOneQuotaAcrossProtocolsAndInstances(t *testing.T) {
	srv := redistest.Require(t)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	prefix := make([]byte, 8)
	_, _ = rand.Read(prefix)
	p := "grpctest-" + hex.EncodeToString(prefix)
	a := startInstance(t, srv.Addr, p, secret)
	b := startInstance(t, srv.Addr, p, secret)
	token := func(sub string) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
			Subject: sub, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
		}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	// The four ways in: HTTP or gRPC, to a or to b. Each answers whether
	// the call was admitted; any answer but an admission or a refusal
	// fails the test.
	var ways []way
	for _, in := range []struct {
		name string
		in   *instance
	}{{"a", a}, {"b", b}} {
		ways = append(ways,
			way{"HTTP to " + in.name, func(t *testing.T, auth string) bool {
				switch code := in.in.get(t, auth); code {
				case http.StatusOK:
					return true
				case http.StatusTooManyRequests:
					return false
				default:
					t.Errorf("HTTP to %s: status %d, want 200 or 429", in.name, code)
					return false
				}
			}},
			way{"gRPC to " + in.name, func(t *testing.T, auth string) bool {
				switch err := in.in.say(t, "authorization", auth); status.Code(err) {
				case codes.OK:
					return true
				case codes.ResourceExhausted:
					return false
				default:
					t.Errorf("gRPC to %s: %v, want OK or ResourceExhausted", in.name, err)
					return false
				}
			}})
	}
	handled := func() int64 {
		return a.handled.Load() + b.handled.Load() + a.grpc.calls.Load() + b.grpc.calls.Load()
	}

	t.Run("interleaved", func(t *testing.T) {
		auth := token("alice")
		admitted := 0
		for i := range 30 {
			w := ways[i%len(ways)]
			ok := w.call(t, auth)
			if ok {
				admitted++
			}
			// The first 10 calls are admitted whichever way they come,
			// the rest refused.
			if want := i < 10; ok != want {
				t.Errorf("call %d (%s): admitted %v, want %v", i+1, w.name, ok, want)
			}
		}
		if admitted != 10 {
			t.Errorf("admitted %d, want 10", admitted)
		}
	})
	before := handled()
	t.Run("concurrent", func(t *testing.T) {
		auth := token("bob")
		var admitted atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 40 {
			w := ways[i%len(ways)]
			wg.Go(func() {
				<-start
				if w.call(t, auth) {
					admitted.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if got := admitted.Load(); got != 10 {
			t.Errorf("admitted %d, want 10", got)
		}
	})
	if got := handled() - before; got != 10 {
		t.Errorf("concurrent: handlers ran %d times, want 10", got)
	}
	if got := handled(); got != 20 {
		t.Errorf("handlers ran %d times in all, want 20", got)
	}
	// Both instances counted on the one key of the policy and subject.
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	ttls, err := redistest.KeyTTLs(context.Background(), client, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(ttls) != 2 {
		t.Errorf("keys %v, want one per subject", ttls)
	}
	for k, ttl := range ttls {
		if ttl <= 0 {
			t.Errorf("key %s has no TTL", k)
		}
	}
}
