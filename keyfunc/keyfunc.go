package keyfunc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// KeyFunc derives the identity a request is rate-limited under: the client
// address, the verified subject, the route pattern. It returns a non-empty
// identity, or an error; never an empty identity with a nil error.
//
// The identity is the value as the application knows it ("alice",
// "203.0.113.7"), not an encoding of it: it is what the middleware passes
// to tier hooks, and what [middleware.Limiter.Reset] and
// [middleware.Limiter.Allow] take. The middleware namespaces identities by
// policy and tier before they reach the store, and the stores escape or
// hash whatever bytes they receive, so identities need no escaping.
//
// A KeyFunc that finds no identity of its kind (no token, an invalid token,
// no such header) returns an error wrapping [ErrNoIdentity], so that the
// middleware can put the request in another tier or refuse it; any other
// error means the request itself is malformed for this key function.
//
// [middleware.Limiter.Reset]: https://pkg.go.dev/github.com/ratekeeper/ratekeeper/middleware#Limiter.Reset
// [middleware.Limiter.Allow]: https://pkg.go.dev/github.com/ratekeeper/ratekeeper/middleware#Limiter.Allow
type KeyFunc func(r *http.Request) (string, error)

// ErrNoIdentity reports that a request carries no identity of the kind a
// [KeyFunc] looks for.
var ErrNoIdentity = errors.New("ratekeeper: no identity")

// errNoToken reports that a request carries no bearer token where
// [JWTSubject] looks for one: no Authorization header, a scheme other than
// Bearer, or an empty header or cookie. It wraps [ErrNoIdentity].
var errNoToken error = &kindError{msg: "ratekeeper: no token", kind: ErrNoIdentity}

// ErrInvalidToken reports that a token was present but cannot identify the
// request: too long, malformed, signed with an algorithm or key that is not
// allowed, a bad signature, expired, not yet valid, the wrong issuer or
// audience, or no subject. Errors returned by [JWTSubject] wrap it together
// with the error of github.com/golang-jwt/jwt/v5 where there is one (for
// example jwt.ErrTokenExpired). It wraps [ErrNoIdentity].
var ErrInvalidToken error = &kindError{msg: "ratekeeper: invalid token", kind: ErrNoIdentity}

// kindError is a sentinel error that is also an error of a broader kind
// (errors.Is reports both).
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// errEmptyKey reports a KeyFunc that broke its contract by returning an
// empty identity without an error.
var errEmptyKey = errors.New("keyfunc: key function returned an empty identity")

// Constant returns a KeyFunc that gives every request the identity key: one
// bucket shared by all clients, for a global limit. It trusts nothing in
// the request and never fails. Constant panics when key is empty (at
// construction, never at request time).
func Constant(key string) KeyFunc {
	if key == "" {
		panic("keyfunc: Constant: empty key")
	}
	return func(*http.Request) (string, error) { return key, nil }
}

// Join returns a KeyFunc whose identity combines the identities of fns, in
// order, so that for example a client is limited per route:
//
//	keyfunc.Join(keyfunc.Route, keyfunc.RemoteIP)
//
// The parts are written as netstrings (decimal length, ':', the part, ','),
// so the combination is injective: the parts ("a:b", "c") and ("a", "b:c")
// give different identities. Join(Route, RemoteIP) gives
// "8:/reports,11:203.0.113.7," for the route "/reports" and the client
// 203.0.113.7; that is the identity [middleware.Limiter.Reset] expects.
//
// Join trusts what its parts trust. If a part fails, Join returns that
// part's error wrapped (so [ErrNoIdentity] stays visible to errors.Is); a
// part that returns an empty identity without an error is reported as an
// error that does not wrap ErrNoIdentity. Join panics when it is called
// with no functions or a nil function: that is a programming error found at
// construction, never at request time. The KeyFunc is safe for concurrent
// use if its parts are.
//
// [middleware.Limiter.Reset]: https://pkg.go.dev/github.com/ratekeeper/ratekeeper/middleware#Limiter.Reset
func Join(fns ...KeyFunc) KeyFunc {
	if len(fns) == 0 {
		panic("keyfunc: Join needs at least one key function")
	}
	for i, fn := range fns {
		if fn == nil {
			panic("keyfunc: Join: key function " + strconv.Itoa(i) + " is nil")
		}
	}
	fns = slices.Clone(fns)
	return func(r *http.Request) (string, error) {
		var b strings.Builder
		for i, fn := range fns {
			k, err := fn(r)
			if err != nil {
				return "", fmt.Errorf("keyfunc: join part %d: %w", i, err)
			}
			if k == "" {
				return "", fmt.Errorf("keyfunc: join part %d: %w", i, errEmptyKey)
			}
			b.WriteString(strconv.Itoa(len(k)))
			b.WriteByte(':')
			b.WriteString(k)
			b.WriteByte(',')
		}
		return b.String(), nil
	}
}

// FromContextFunc returns a KeyFunc that reads an identity the
// application's own authentication middleware stored in the request
// context: fn returns the identity found in ctx and whether there is one.
// A false result or an empty identity fails with an error wrapping
// [ErrNoIdentity]; otherwise the identity is returned unchanged. For a
// plain string stored under a context key:
//
//	keyfunc.FromContextFunc(func(ctx context.Context) (string, bool) {
//		id, ok := ctx.Value(userKey{}).(string)
//		return id, ok
//	})
//
// It trusts whatever fn finds: put there only identities your own
// authentication middleware verified, never request data, and let the
// limiter wrap the handler that middleware calls. It returns an error when
// fn is nil. The KeyFunc is safe for concurrent use if fn is.
func FromContextFunc(fn func(ctx context.Context) (identity string, ok bool)) (KeyFunc, error) {
	if fn == nil {
		return nil, errors.New("keyfunc: FromContextFunc: fn is nil")
	}
	return func(r *http.Request) (string, error) {
		s, ok := fn(r.Context())
		if !ok || s == "" {
			return "", fmt.Errorf("keyfunc: no identity in request context: %w", ErrNoIdentity)
		}
		return s, nil
	}, nil
}
