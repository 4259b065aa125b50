package integration

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware/admin"
	"github.com/ratekeeper/ratekeeper/middleware/policy"
	"github.com/ratekeeper/ratekeeper/store"
)

// adminPolicies is a login policy: a sliding window log that refuses the
// third attempt in a minute and blocks the client for 15 minutes, with
// refused attempts counted; and an api policy of 3 a minute with
// per-client overrides.
const adminPolicies = `
policies:
  login:
    key: ip
    limits:
      - {name: minute, algorithm: sliding_window_log, threshold: 3, period: 1m, block: 15m}
    count_denied: true
  api:
    key: ip
    limits:
      - {name: minute, rate: 3, period: 1m}
    overrides: true
`

const adminToken = "test-operator-token"

// adminApp is an application with a login route and the admin API
// mounted under /admin/, authorized by a bearer token.
func adminApp(t *testing.T, c redis.UniversalClient, prefix string, authorize func(*http.Request) (string, error)) *http.ServeMux {
	t.Helper()
	st := newStore(t, c, prefix)
	set, err := policy.New("policies.yaml", []byte(adminPolicies), st, policy.Options{
		Keys:   map[string]keyfunc.KeyFunc{"ip": keyfunc.RemoteIP},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	api, err := admin.New(set, st, admin.Options{
		Authorize: authorize,
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /login", set.Handler("login")(okHandler))
	mux.Handle("GET /api", set.Handler("api")(okHandler))
	mux.Handle("/admin/", http.StripPrefix("/admin", api))
	return mux
}

func bearer(r *http.Request) (string, error) {
	if r.Header.Get("Authorization") != "Bearer "+adminToken {
		return "", admin.ErrUnauthenticated
	}
	return "operator", nil
}

// adminCall sends a request to h and returns the status and body; token
// "" sends none, a body is sent as JSON.
func adminCall(t *testing.T, h http.Handler, method, path, token, body, client string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	r.RemoteAddr = client + ":40000"
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// blockedList is the blocked clients endpoint's answer.
type blockedList struct {
	Clients []struct {
		Identity   string    `json:"identity"`
		Scope      string    `json:"scope"`
		Until      time.Time `json:"until"`
		RetryAfter int64     `json:"retry_after"`
	} `json:"clients"`
	Cursor string `json:"cursor"`
}

// TestAdminOnRedis drives the admin API on real Redis: unauthorized
// requests are refused and change nothing; a client blocked by the login
// policy is listed by the blocked clients endpoint and shown as blocked;
// a reset through the API unblocks it and its next login is admitted.
func TestAdminOnRedis(t *testing.T) {
	srv := sharedRedis(t)
	c := newClient(t, srv)
	prefix := randomPrefix(t)
	app := adminApp(t, c, prefix, bearer)
	const client = "203.0.113.7"

	t.Run("unauthorized", func(t *testing.T) {
		for _, token := range []string{"", "wrong"} {
			code, body := adminCall(t, app, "GET", "/admin/policies", token, "", client)
			if code != http.StatusUnauthorized || strings.Contains(body, "login") {
				t.Errorf("token %q: got %d %s, want 401 revealing nothing", token, code, body)
			}
		}
		closed := adminApp(t, c, prefix, nil) // no authorization function
		code, _ := adminCall(t, closed, "POST", "/admin/policies/login/mode", adminToken, `{"mode":"off"}`, client)
		if code != http.StatusForbidden {
			t.Errorf("no authorization function: got %d, want 403", code)
		}
	})

	for i, want := range []int{200, 200, 429, 429} {
		if code, _ := adminCall(t, app, "POST", "/login", "", "", client); code != want {
			t.Fatalf("login %d: got %d, want %d", i+1, code, want)
		}
	}

	code, body := adminCall(t, app, "GET", "/admin/policies/login/blocked", adminToken, "", client)
	if code != http.StatusOK {
		t.Fatalf("blocked: got %d %s, want 200", code, body)
	}
	var blocked blockedList
	if err := json.Unmarshal([]byte(body), &blocked); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if len(blocked.Clients) != 1 || blocked.Cursor != "" {
		t.Fatalf("got %s, want one blocked client and no cursor", body)
	}
	if b := blocked.Clients[0]; b.Identity != client || b.Scope != "minute" || b.RetryAfter < 14*60 || b.RetryAfter > 15*60 {
		t.Errorf("got %+v, want %s blocked by minute for about 15 minutes", b, client)
	}

	code, body = adminCall(t, app, "GET", "/admin/policies/login/client?identity="+client, adminToken, "", client)
	if code != http.StatusOK || !strings.Contains(body, `"blocked":true`) {
		t.Errorf("client: got %d %s, want blocked", code, body)
	}

	code, body = adminCall(t, app, "POST", "/admin/policies/login/reset", "", `{"identity":"`+client+`"}`, client)
	if code != http.StatusUnauthorized {
		t.Errorf("reset without a token: got %d %s, want 401", code, body)
	}
	code, body = adminCall(t, app, "POST", "/admin/policies/login/reset", adminToken, `{"identity":"`+client+`"}`, client)
	if code != http.StatusOK || !strings.Contains(body, `"found":true`) {
		t.Fatalf("reset: got %d %s, want 200 found", code, body)
	}
	if code, _ := adminCall(t, app, "POST", "/login", "", "", client); code != http.StatusOK {
		t.Errorf("login after the reset: got %d, want 200", code)
	}
	_, body = adminCall(t, app, "GET", "/admin/policies/login/blocked", adminToken, "", client)
	if err := json.Unmarshal([]byte(body), &blocked); err != nil || len(blocked.Clients) != 0 {
		t.Errorf("blocked after the reset: got %s, want none", body)
	}
}

// TestAdminBlocksOnRedisCluster lists blocked clients spread over the
// three masters of a Redis Cluster, a few per page: every master is
// scanned, and every client is listed.
func TestAdminBlocksOnRedisCluster(t *testing.T) {
	cluster := startCluster(t, clusterSpec{masters: 3})
	cc := cluster.client(t)
	prefix := randomPrefix(t)
	st := newStore(t, cc, prefix)
	limit := store.Limit{Name: "minute", Algorithm: store.SlidingWindowLog, Rate: 1, Period: time.Minute, Block: time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want := map[string]bool{}
	for i := range 30 {
		id := "192.0.2." + strconv.Itoa(i)
		want[id] = true
		for range 2 {
			if _, err := st.Take(ctx, store.Request{Key: "login:" + id, Limits: []store.Limit{limit}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Keys of another policy, which must not be listed.
	if _, err := st.Take(ctx, store.Request{Key: "loginx:192.0.2.1", Limits: []store.Limit{limit}}); err != nil {
		t.Fatal(err)
	}

	got := map[string]bool{}
	masters := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 200 {
			t.Fatal("the listing does not end")
		}
		blocks, next, err := st.Blocks(ctx, "login:", cursor, 5)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		for _, b := range blocks {
			id, ok := strings.CutPrefix(b.Key, "login:")
			if !ok || b.Scope != "minute" || b.Remaining <= 0 || b.Remaining > time.Minute {
				t.Errorf("got %+v, want a login client blocked by minute", b)
			}
			got[id] = true
		}
		if next != "" {
			masters[strings.SplitN(next, "-", 2)[0]] = true
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d clients, want %d: %v", len(got), len(want), got)
	}
	for id := range want {
		if !got[id] {
			t.Errorf("client %s not listed", id)
		}
	}
	if len(masters) < 2 {
		t.Errorf("cursors named masters %v, want the listing to move across masters", masters)
	}
	if _, _, err := st.Blocks(ctx, "login:", "7-0", 5); err == nil {
		t.Error("a cursor naming a fourth master: got nil error")
	}
}
