package admin_test

import (
	"crypto/subtle"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware/admin"
	"github.com/ratekeeper/ratekeeper/middleware/policy"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

const policies = `
policies:
  login:
    key: ip
    limits:
      - {name: minute, algorithm: sliding_window_log, threshold: 3, period: 1m, block: 15m}
`

// send serves one request and returns the status and, for the admin API,
// the body.
func send(h http.Handler, method, path, token, body string) string {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	r.RemoteAddr = "203.0.113.7:5000"
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return strings.TrimSpace(fmt.Sprint(w.Code, " ", w.Body.String()))
}

// Mount the admin API behind a bearer token, then unblock a client that
// failed to log in too often.
func Example() {
	st, _ := memstore.New(memstore.Options{})
	set, err := policy.New("policies.yaml", []byte(policies), st, policy.Options{
		Keys:   map[string]keyfunc.KeyFunc{"ip": keyfunc.RemoteIP},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	const token = "s3cret" // in production: from a secret store, one per operator
	api, err := admin.New(set, st, admin.Options{
		Authorize: func(r *http.Request) (string, error) {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				return "", admin.ErrUnauthenticated
			}
			return "ops", nil
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("POST /login", set.Handler("login")(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})))
	mux.Handle("/admin/ratelimit/", http.StripPrefix("/admin/ratelimit", api))

	for range 4 {
		fmt.Println(send(mux, "POST", "/login", "", "")[:3])
	}
	fmt.Println(send(mux, "GET", "/admin/ratelimit/policies/login/client?identity=203.0.113.7", "", ""))
	fmt.Println(send(mux, "POST", "/admin/ratelimit/policies/login/reset", token, `{"identity":"203.0.113.7"}`))
	fmt.Println(send(mux, "POST", "/login", "", "")[:3])
	// Output:
	// 200
	// 200
	// 429
	// 429
	// 401 {"error":"unauthenticated","message":"credentials missing or invalid"}
	// 200 {"policy":"login","identity":"203.0.113.7","found":true}
	// 200
}
