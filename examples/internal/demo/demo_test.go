package demo

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
	"github.com/ratekeeper/ratekeeper/internal/testlog"
)

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

// get sends GET / from peer with an X-Forwarded-For of xff (none when
// empty) through h.
func get(h http.Handler, peer, xff string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = peer + ":40000"
	if xff != "" {
		r.Header.Set("X-Forwarded-For", xff)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// newPolicies builds the example's policies on the memory store for env.
func newPolicies(t *testing.T, env Env) *Policies {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	st, err := OpenStore(t.Context(), "", quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	env.JWTSecret = DemoSecret
	p, err := NewPolicies(st, env, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Behind a proxy, without TRUSTED_PROXIES every client shares the proxy's
// limit; with it, each forwarded client has its own, and a client that
// is not a trusted proxy cannot pick its identity with the header.
func TestTrustedProxiesKeyForwardedClients(t *testing.T) {
	const proxy, anon = "192.0.2.10", 10 // api: 10 per minute for anonymous clients
	t.Run("unset: clients behind the proxy share one limit", func(t *testing.T) {
		h := newPolicies(t, Env{}).Set.Handler("api")(ok)
		for i := range anon {
			if w := get(h, proxy, "203.0.113.1"); w.Code != http.StatusOK {
				t.Fatalf("request %d: got %d, want 200", i+1, w.Code)
			}
		}
		if w := get(h, proxy, "203.0.113.2"); w.Code != http.StatusTooManyRequests {
			t.Fatalf("another client behind the proxy: got %d, want 429 (the proxy's limit)", w.Code)
		}
	})
	t.Setenv("TRUSTED_PROXIES", " 198.51.100.0/24, "+proxy+" ")
	env, err := ReadEnv()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(env.TrustedProxies, ","); got != "198.51.100.0/24,"+proxy {
		t.Fatalf("TrustedProxies: got %q, want %q", got, "198.51.100.0/24,"+proxy)
	}
	t.Run("set: each forwarded client has its own limit", func(t *testing.T) {
		h := newPolicies(t, env).Set.Handler("api")(ok)
		for i := range anon {
			if w := get(h, proxy, "203.0.113.1"); w.Code != http.StatusOK {
				t.Fatalf("request %d: got %d, want 200", i+1, w.Code)
			}
		}
		if w := get(h, proxy, "203.0.113.1"); w.Code != http.StatusTooManyRequests {
			t.Fatalf("client over its limit: got %d, want 429", w.Code)
		}
		if w := get(h, "198.51.100.7", "203.0.113.2"); w.Code != http.StatusOK {
			t.Fatalf("another client through a trusted proxy: got %d, want 200", w.Code)
		}
		// An untrusted peer is keyed by its own address, whatever it
		// forwards: naming the exhausted client does not reach its limit,
		// and naming fresh clients does not escape its own.
		for i := range anon {
			if w := get(h, "203.0.113.50", "203.0.113.1"); w.Code != http.StatusOK {
				t.Fatalf("untrusted peer, request %d: got %d, want 200", i+1, w.Code)
			}
		}
		if w := get(h, "203.0.113.50", "203.0.113.99"); w.Code != http.StatusTooManyRequests {
			t.Fatalf("untrusted peer naming a fresh client: got %d, want 429", w.Code)
		}
	})
}

func TestTrustedProxiesRefusesBadValues(t *testing.T) {
	for _, v := range []string{"0.0.0.0/0", "not-an-address", "10.0.0.0/33"} {
		t.Setenv("TRUSTED_PROXIES", v)
		if _, err := ReadEnv(); err == nil || !strings.Contains(err.Error(), "TRUSTED_PROXIES") {
			t.Errorf("TRUSTED_PROXIES=%q: got error %v, want one naming TRUSTED_PROXIES", v, err)
		}
	}
}

// A Redis that is down when the service starts: the service starts,
// policies apply their failure modes (api fails open, login closed), the
// log says so, and once Redis answers decisions use it again.
func TestStartsWhileRedisIsDown(t *testing.T) {
	srv := redistest.Require(t)
	_, port, err := net.SplitHostPort(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop() // the address is known and nothing answers there
	logs := &testlog.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	downSince := time.Now()
	st, err := OpenStore(t.Context(), "redis://"+srv.Addr+"/0", logger)
	if err != nil {
		t.Fatalf("OpenStore with Redis down: got error %v, want a store", err)
	}
	t.Cleanup(st.Close)
	p, err := NewPolicies(st, Env{JWTSecret: DemoSecret}, logger)
	if err != nil {
		t.Fatal(err)
	}
	api, login := p.Set.Handler("api")(ok), p.Set.Handler("login")(ok)
	if w := get(api, "192.0.2.1", ""); w.Code != http.StatusOK || w.Header().Get("X-RateLimit-Limit") != "" {
		t.Fatalf("api with Redis down: got %d with headers %v, want 200 without rate-limit headers (fail open)", w.Code, w.Header())
	}
	if w := get(login, "192.0.2.1", ""); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("login with Redis down: got %d, want 503 (fail closed)", w.Code)
	}
	if !strings.Contains(logs.String(), "redis does not answer") {
		t.Fatalf("log: got %q, want a warning that Redis does not answer", logs.String())
	}

	// Requests while Redis is away make go-redis dial and give up, and
	// say so in the service's log, a line every redisLogEvery at most.
	for range 20 {
		get(api, "192.0.2.1", "")
		get(login, "192.0.2.1", "")
		time.Sleep(50 * time.Millisecond)
	}
	lines := strings.Count(logs.String(), "msg=\"redis client\"")
	if most := 1 + int(time.Since(downSince)/redisLogEvery); lines < 1 || lines > most {
		t.Fatalf("log: got %d lines from go-redis in %v, want 1 to %d: %q", lines, time.Since(downSince), most, logs.String())
	}

	back, err := redistest.StartAt(port)
	if err != nil {
		redistest.Unavailable(t, err)
	}
	t.Cleanup(back.Stop)
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(logs.String(), "redis answers") {
		if time.Now().After(deadline) {
			t.Fatalf("log after Redis came back: got %q, want a line saying Redis answers", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The circuit breaker opened while Redis was away; it lets a probe
	// through after its cooldown, and then every decision is Redis's.
	for {
		w := get(api, "192.0.2.1", "")
		if w.Code == http.StatusOK && w.Header().Get("X-RateLimit-Limit") == "10" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("api after Redis came back: got %d with headers %v, want 200 with X-RateLimit-Limit 10", w.Code, w.Header())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedisLogHoldsBack: go-redis's lines reach the log at most once every
// redisLogEvery, each counting the lines held back before it.
func TestRedisLogHoldsBack(t *testing.T) {
	logs := &testlog.Buffer{}
	now := time.Unix(1_700_000_000, 0)
	l := &redisLog{logger: slog.New(slog.NewTextHandler(logs, nil)), every: 10 * time.Second, now: func() time.Time { return now }}
	for range 5 {
		l.Printf(t.Context(), "redis: connection pool: failed to dial after %d attempts: %s\n", 5, "refused")
		now = now.Add(time.Second)
	}
	now = now.Add(6 * time.Second) // 11s after the first line
	l.Printf(t.Context(), "redis: later")
	got := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(got) != 2 {
		t.Fatalf("got %d lines, want 2: %q", len(got), logs.String())
	}
	for i, want := range []string{
		`level=WARN msg="redis client" message="redis: connection pool: failed to dial after 5 attempts: refused" not_logged=0`,
		`level=WARN msg="redis client" message="redis: later" not_logged=4`,
	} {
		if !strings.Contains(got[i], want) {
			t.Errorf("line %d: got %q, want it to contain %q", i, got[i], want)
		}
	}
}

// TestWarnDemoSecret: the service warns when it verifies tokens with the
// public demo secret, and only then.
func TestWarnDemoSecret(t *testing.T) {
	for _, tt := range []struct {
		secret string
		warns  bool
	}{{DemoSecret, true}, {strings.Repeat("s", 32), false}} {
		var logs testlog.Buffer
		warnDemoSecret(Env{JWTSecret: tt.secret}, slog.New(slog.NewTextHandler(&logs, nil)))
		if got := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "public demo secret"); got != tt.warns {
			t.Errorf("secret %q: warned %t, want %t: %q", tt.secret, got, tt.warns, logs.String())
		}
	}
}

// A SIGHUP without POLICY_FILE is logged and changes nothing: the service
// goes on (the signal would otherwise end it).
func TestHangupWithoutPolicyFile(t *testing.T) {
	p := newPolicies(t, Env{})
	log := &testlog.Buffer{}
	ctx, cancel := context.WithCancel(t.Context())
	hup := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		onHangup(ctx, hup, p, false, slog.New(slog.NewTextHandler(log, nil)))
	}()
	hup <- syscall.SIGHUP
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(log.String(), "no POLICY_FILE to reload") {
		if time.Now().After(deadline) {
			t.Fatalf("no log line after SIGHUP: %q", log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if w := get(p.Set.Handler("api")(ok), "192.0.2.1", ""); w.Code != http.StatusOK {
		t.Errorf("after SIGHUP: %d", w.Code)
	}
	cancel()
	<-done
}
