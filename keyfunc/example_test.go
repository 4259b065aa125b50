package keyfunc_test

import (
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/golang-jwt/jwt/v5"

	"github.com/ratekeeper/ratekeeper/keyfunc"
)

// A service behind the load balancers 10.0.0.5 and 10.0.0.9 keys clients
// by the address the nearest untrusted hop reported. Name the proxies, not
// a network their clients share: a client whose own address is trusted
// names its key.
func ExampleNewClientIP() {
	clientIP, err := keyfunc.NewClientIP(keyfunc.IPOptions{TrustedProxies: []string{"10.0.0.5", "10.0.0.9"}})
	if err != nil {
		log.Fatal(err)
	}
	ip := clientIP.Key // the KeyFunc to give the middleware

	// The client 203.0.113.7 forged an entry on the left; the two proxies
	// each appended the address they saw.
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.5:41000"
	r.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.7, 10.0.0.9")
	fmt.Println(ip(r))

	// The same header sent straight from an untrusted peer is ignored.
	r.RemoteAddr = "198.51.100.20:5000"
	fmt.Println(ip(r))

	// IPv6 clients are grouped by /64.
	r.RemoteAddr = "10.0.0.5:41000"
	r.Header.Set("X-Forwarded-For", "2001:db8:1:2::abcd")
	fmt.Println(ip(r))
	// Output:
	// 203.0.113.7 <nil>
	// 198.51.100.20 <nil>
	// 2001:db8:1:2::/64 <nil>
}

func ExampleJWTSubject() {
	secret := []byte("an example secret of 32+ bytes!!")

	kf, err := keyfunc.JWTSubject(keyfunc.JWTOptions{
		Algorithms: []string{"HS256"},
		Key:        secret,
		Issuer:     "https://auth.example",
	})
	if err != nil {
		log.Fatal(err)
	}

	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject:   "user-42",
		Issuer:    "https://auth.example",
		ExpiresAt: jwt.NewNumericDate(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)),
	}).SignedString(secret)
	if err != nil {
		log.Fatal(err)
	}

	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	fmt.Println(kf(r))

	// No token: no identity (and not an invalid token), so the middleware
	// can key by the IP instead.
	_, err = kf(httptest.NewRequest(http.MethodGet, "/", nil))
	fmt.Println(errors.Is(err, keyfunc.ErrInvalidToken), errors.Is(err, keyfunc.ErrNoIdentity))

	// A forged token is no identity either.
	r.Header.Set("Authorization", "Bearer "+token[:len(token)-2]+"xx")
	_, err = kf(r)
	fmt.Println(errors.Is(err, keyfunc.ErrInvalidToken), errors.Is(err, keyfunc.ErrNoIdentity))
	// Output:
	// user-42 <nil>
	// false true
	// true true
}

// Keying per route with chi: middleware added with r.With runs after
// routing and sees the matched pattern.
func ExampleRoute() {
	show := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Println(keyfunc.Route(r))
			next.ServeHTTP(w, r)
		})
	}
	r := chi.NewRouter()
	r.With(show).Get("/users/{id}", func(http.ResponseWriter, *http.Request) {})

	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/users/1", nil))
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/users/2", nil))
	// Output:
	// /users/{id} <nil>
	// /users/{id} <nil>
}

// A per-route limit for each client: Join keeps the parts apart.
func ExampleJoin() {
	kf := keyfunc.Join(keyfunc.Constant("search"), keyfunc.RemoteIP)

	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "203.0.113.7:1234"
	fmt.Println(kf(r))
	// Output:
	// 6:search,11:203.0.113.7, <nil>
}
