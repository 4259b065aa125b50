package demotest

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/examples/internal/demo"
)

// Run builds the example's router on the memory store and checks every
// documented route, and that editing and reloading the policy file
// changes /api/ping's limit without resetting counters.
func Run(t *testing.T, routes func(*demo.Policies) http.Handler) {
	t.Helper()
	newPolicies := func(t *testing.T, policyFile string) *demo.Policies {
		t.Helper()
		st, err := demo.OpenStore(t.Context(), "", slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		p, err := demo.NewPolicies(st, demo.Env{JWTSecret: demo.DemoSecret, PolicyFile: policyFile}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	newServer := func(t *testing.T) http.Handler {
		t.Helper()
		return routes(newPolicies(t, ""))
	}
	send := func(h http.Handler, method, path, ip string, hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		r.RemoteAddr = ip + ":40000"
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	t.Run("healthz is never limited", func(t *testing.T) {
		h := newServer(t)
		for range 30 {
			w := send(h, "GET", "/healthz", "192.0.2.1")
			if w.Code != 200 || w.Header().Get("X-RateLimit-Limit") != "" {
				t.Fatalf("got %d with headers %v, want 200 without rate-limit headers", w.Code, w.Header())
			}
		}
	})

	t.Run("burst of 50 from one IP admits exactly 10", func(t *testing.T) {
		h := newServer(t)
		var wg sync.WaitGroup
		var mu sync.Mutex
		codes := map[int]int{}
		start := make(chan struct{})
		for range 50 {
			wg.Go(func() {
				<-start
				w := send(h, "GET", "/api/ping", "198.51.100.7")
				mu.Lock()
				codes[w.Code]++
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		if codes[200] != 10 || codes[429] != 40 {
			t.Fatalf("got %v, want 10 × 200 and 40 × 429", codes)
		}
	})

	t.Run("HEAD is limited as GET", func(t *testing.T) {
		h := newServer(t)
		for i := range 12 {
			method := "GET"
			if i%2 == 1 {
				method = "HEAD"
			}
			w := send(h, method, "/api/ping", "198.51.100.8")
			want := 200
			if i >= 10 {
				want = 429
			}
			if w.Code != want {
				t.Fatalf("request %d (%s): got %d, want %d", i+1, method, w.Code, want)
			}
			if rem := w.Header().Get("X-RateLimit-Remaining"); i < 10 && rem != strconv.Itoa(9-i) {
				t.Fatalf("request %d (%s): X-RateLimit-Remaining %q, want %d", i+1, method, rem, 9-i)
			}
		}
	})

	t.Run("authenticated and anonymous from one IP are limited separately", func(t *testing.T) {
		h := newServer(t)
		tok, err := demo.Token(demo.DemoSecret, "alice", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			send(h, "GET", "/api/ping", "203.0.113.9")
		}
		if w := send(h, "GET", "/api/ping", "203.0.113.9"); w.Code != 429 {
			t.Fatalf("anonymous 11th: got %d, want 429", w.Code)
		}
		w := send(h, "GET", "/api/ping", "203.0.113.9", "Authorization", "Bearer "+tok)
		if w.Code != 200 || w.Header().Get("X-RateLimit-Limit") != "100" || w.Header().Get("X-RateLimit-Remaining") != "99" {
			t.Fatalf("authenticated: got %d limit %s remaining %s, want 200, 100, 99", w.Code, w.Header().Get("X-RateLimit-Limit"), w.Header().Get("X-RateLimit-Remaining"))
		}
		forged := send(h, "GET", "/api/ping", "203.0.113.9", "Authorization", "Bearer "+tok+"x")
		if forged.Code != 429 {
			t.Fatalf("forged token: got %d, want 429 (treated as the exhausted anonymous client)", forged.Code)
		}
	})

	t.Run("api sends the IETF fields", func(t *testing.T) {
		h := newServer(t)
		w := send(h, "GET", "/api/ping", "192.0.2.31")
		if got, want := w.Header().Get("RateLimit-Policy"), `"api/anonymous";q=10;w=60`; got != want {
			t.Errorf("RateLimit-Policy: got %q, want %q", got, want)
		}
		if got, want := w.Header().Get("RateLimit"), `"api/anonymous";r=9;t=6`; got != want {
			t.Errorf("RateLimit: got %q, want %q", got, want)
		}
	})

	t.Run("search costs 5 units of the ping quota", func(t *testing.T) {
		h := newServer(t)
		ip := "192.0.2.77"
		if w := send(h, "GET", "/api/search?q=go", ip); w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != "5" {
			t.Fatalf("search: got %d remaining %s, want 200 and 5", w.Code, w.Header().Get("X-RateLimit-Remaining"))
		}
		if w := send(h, "GET", "/api/ping", ip); w.Header().Get("X-RateLimit-Remaining") != "4" {
			t.Fatalf("ping after search: remaining %s, want 4", w.Header().Get("X-RateLimit-Remaining"))
		}
		w := send(h, "GET", "/api/search?q=go", ip)
		if w.Code != 429 || w.Header().Get("X-RateLimit-Remaining") != "4" {
			t.Fatalf("second search: got %d remaining %s, want 429 with nothing consumed (4)", w.Code, w.Header().Get("X-RateLimit-Remaining"))
		}
	})

	t.Run("export waits for its turn instead of a 429", func(t *testing.T) {
		h := newServer(t)
		ip := "192.0.2.90"
		start := time.Now()
		for i := range 3 {
			if w := send(h, "GET", "/api/export", ip); w.Code != 200 {
				t.Fatalf("export %d: got %d, want 200", i+1, w.Code)
			}
		}
		// Burst 2, then one per second: the third waited about a second
		// for its turn; each worked demo.ExportWork.
		if took := time.Since(start); took < time.Second+demo.ExportWork {
			t.Fatalf("three exports took %s, want at least %s (the third waits its turn)", took, time.Second+demo.ExportWork)
		}
	})

	t.Run("export runs at most 2 at once per IP", func(t *testing.T) {
		h := newServer(t)
		ip := "192.0.2.91"
		var wg sync.WaitGroup
		var mu sync.Mutex
		codes := map[int]int{}
		var retry []string
		for range 3 {
			wg.Go(func() {
				w := send(h, "GET", "/api/export", ip)
				mu.Lock()
				codes[w.Code]++
				if w.Code == http.StatusServiceUnavailable {
					retry = append(retry, w.Header().Get("Retry-After"))
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		if codes[200] != 2 || codes[503] != 1 {
			t.Fatalf("got %v, want 2 × 200 and 1 × 503 (the third while two run)", codes)
		}
		if len(retry) != 1 || retry[0] == "" {
			t.Fatalf("503 Retry-After: got %q, want a value", retry)
		}
	})

	t.Run("login blocks after 5 attempts and sends only Retry-After", func(t *testing.T) {
		h := newServer(t)
		ip := "192.0.2.200"
		for i := range 5 {
			if w := send(h, "POST", "/login", ip); w.Code != 200 {
				t.Fatalf("attempt %d: got %d, want 200", i+1, w.Code)
			}
		}
		w := send(h, "POST", "/login", ip)
		if w.Code != 429 {
			t.Fatalf("6th attempt: got %d, want 429", w.Code)
		}
		if ra := w.Header().Get("Retry-After"); ra != "900" && ra != "899" {
			t.Errorf("Retry-After: got %q, want the 15-minute wait", ra)
		}
		if w.Header().Get("X-RateLimit-Limit") != "" || w.Header().Get("X-RateLimit-Remaining") != "" {
			t.Errorf("login headers: got %v, want no X-RateLimit-* state", w.Header())
		}
		var b struct {
			Error      string `json:"error"`
			Message    string `json:"message"`
			RetryAfter int64  `json:"retry_after"`
			Scope      string `json:"scope"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
			t.Fatal(err)
		}
		if b.Error != "blocked" || b.Scope != "minute" || b.RetryAfter < 899 || b.RetryAfter > 900 || !strings.Contains(b.Message, "Try again in 9") {
			t.Errorf("blocked body: got %+v, want error blocked, scope minute, a 15-minute wait", b)
		}
		if w := send(h, "POST", "/login", "192.0.2.201"); w.Code != 200 {
			t.Errorf("another client: got %d, want 200", w.Code)
		}
	})

	t.Run("editing the policy file changes the ping limit and keeps counters", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "policies.yaml")
		write := func(text string) {
			t.Helper()
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		const before, after = "{rate: 10, period: 1m, burst: 10}", "{rate: 20, period: 1m, burst: 20}"
		if !bytes.Contains(demo.DefaultPolicies, []byte(before)) {
			t.Fatalf("policies.yaml no longer holds %q: update this test", before)
		}
		write(string(demo.DefaultPolicies))
		p := newPolicies(t, path)
		h := routes(p)
		ip := "192.0.2.150"
		for range 3 {
			send(h, "GET", "/api/ping", ip)
		}
		write(strings.Replace(string(demo.DefaultPolicies), before, after, 1))
		if err := p.Set.Reload(); err != nil {
			t.Fatal(err)
		}
		w := send(h, "GET", "/api/ping", ip)
		if w.Code != 200 || w.Header().Get("X-RateLimit-Limit") != "20" || w.Header().Get("X-RateLimit-Remaining") != "16" {
			t.Fatalf("after raising to 20: got %d limit %s remaining %s, want 200, 20, 16 (3 used before the reload)", w.Code, w.Header().Get("X-RateLimit-Limit"), w.Header().Get("X-RateLimit-Remaining"))
		}
		if got, want := w.Header().Get("RateLimit-Policy"), `"api/anonymous";q=20;w=60`; got != want {
			t.Errorf("RateLimit-Policy: got %q, want %q", got, want)
		}

		write(strings.Replace(string(demo.DefaultPolicies), before, "{rate: -20, period: 1m}", 1))
		if err := p.Set.Reload(); err == nil || !strings.Contains(err.Error(), "policies.api.tiers.anonymous.limits[0].rate") {
			t.Fatalf("broken file: got %v, want an error naming the rate", err)
		}
		if w := send(h, "GET", "/api/ping", ip); w.Header().Get("X-RateLimit-Limit") != "20" || w.Header().Get("X-RateLimit-Remaining") != "15" {
			t.Fatalf("after the failed reload: got limit %s remaining %s, want 20 and 15", w.Header().Get("X-RateLimit-Limit"), w.Header().Get("X-RateLimit-Remaining"))
		}
		body := send(h, "GET", "/metrics", ip).Body.String()
		for _, want := range []string{"ratekeeper_policy_last_reload_successful 0", `ratekeeper_policy_reloads_total{result="failure"} 1`, `ratekeeper_policy_mode{mode="enforce",policy="api"} 1`} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics: missing %q", want)
			}
		}
	})

	t.Run("metrics show the series", func(t *testing.T) {
		h := newServer(t)
		send(h, "GET", "/api/ping", "192.0.2.5")
		w := send(h, "GET", "/metrics", "192.0.2.5")
		if w.Code != 200 || w.Header().Get("X-RateLimit-Limit") != "" {
			t.Fatalf("metrics: got %d with headers %v", w.Code, w.Header())
		}
		body := w.Body.String()
		for _, want := range []string{`ratekeeper_decisions_total{outcome="allowed",policy="api/anonymous"} 1`, "ratekeeper_decision_duration_seconds_bucket"} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics: missing %q", want)
			}
		}
	})

	t.Run("admin API only with ADMIN_TOKEN, and an exempt login client", func(t *testing.T) {
		if w := send(newServer(t), "GET", "/admin/policies", "192.0.2.6"); w.Code != http.StatusNotFound {
			t.Fatalf("without ADMIN_TOKEN: got %d, want 404 (no admin API)", w.Code)
		}
		const token = "an-operator-token-of-some-length"
		st, err := demo.OpenStore(t.Context(), "", slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		p, err := demo.NewPolicies(st, demo.Env{JWTSecret: demo.DemoSecret, AdminToken: token}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		h := routes(p)
		for _, auth := range []string{"", "Bearer wrong-token-of-some-length", token, "Basic " + token} {
			if w := send(h, "GET", "/admin/policies", "192.0.2.6", "Authorization", auth); w.Code != http.StatusUnauthorized {
				t.Errorf("Authorization %q: got %d, want 401", auth, w.Code)
			}
		}
		bearer := "bearer " + token // the scheme is case-insensitive
		if w := send(h, "GET", "/admin/policies", "192.0.2.6", "Authorization", bearer); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"login"`) {
			t.Fatalf("policies: got %d %s, want 200 listing login", w.Code, w.Body)
		}
		r := httptest.NewRequest("POST", "/admin/policies/login/override", strings.NewReader(`{"identity":"192.0.2.6","kind":"exempt","ttl":"10m"}`))
		r.RemoteAddr = "192.0.2.6:40000"
		r.Header.Set("Authorization", bearer)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("override: got %d %s, want 200", w.Code, w.Body)
		}
		for i := 1; i <= 8; i++ {
			if w := send(h, "POST", "/login", "192.0.2.6"); w.Code == http.StatusTooManyRequests {
				t.Fatalf("exempt client, login %d: got 429, want admitted", i)
			}
		}
		for i := 1; i <= 6; i++ {
			w := send(h, "POST", "/login", "192.0.2.7")
			if i == 6 && w.Code != http.StatusTooManyRequests {
				t.Fatalf("other client, login 6: got %d, want 429", w.Code)
			}
		}
	})
}
