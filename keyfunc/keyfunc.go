package keyfunc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// KeyFunc derives the rate-limit identity of a request. It returns a
// non-empty key, or an error. It never returns an empty key with a nil error.
//
// A KeyFunc that finds no identity of its kind (no token, an invalid token,
// no such header) returns an error wrapping [ErrNoIdentity], so that the
// middleware can fall back to another key or refuse the request; any other
// error means the request itself is malformed for this key function.
type KeyFunc func(r *http.Request) (string, error)

// ErrNoIdentity reports that a request carries no identity of the kind a
// [KeyFunc] looks for.
var ErrNoIdentity = errors.New("ratekeeper: no identity")

// ErrNoToken reports that a request carries no bearer token where
// [JWTSubject] looks for one: no Authorization header, a scheme other than
// Bearer, or an empty header or cookie. It wraps [ErrNoIdentity].
var ErrNoToken error = &identityError{msg: "ratekeeper: no token"}

// ErrInvalidToken reports that a token was present but cannot identify the
// request: too long, malformed, signed with an algorithm or key that is not
// allowed, a bad signature, expired, not yet valid, the wrong issuer or
// audience, or no subject. Errors returned by [JWTSubject] wrap it together
// with the error of github.com/golang-jwt/jwt/v5 where there is one (for
// example jwt.ErrTokenExpired). It wraps [ErrNoIdentity].
var ErrInvalidToken error = &identityError{msg: "ratekeeper: invalid token"}

// identityError is a sentinel that is also an [ErrNoIdentity].
type identityError struct{ msg string }

func (e *identityError) Error() string { return e.msg }
func (e *identityError) Unwrap() error { return ErrNoIdentity }

// errEmptyKey reports a KeyFunc that broke its contract by returning an
// empty key without an error.
var errEmptyKey = errors.New("keyfunc: key function returned an empty key")

// Constant returns a KeyFunc that gives every request the same key,
// Encode("const", key): one bucket shared by all clients, for a global
// limit. It trusts nothing in the request and never fails. Any key,
// including "", is allowed; long keys are hashed as [Encode] describes.
func Constant(key string) KeyFunc {
	k := Encode("const", key)
	return func(*http.Request) (string, error) { return k, nil }
}

// Join returns a KeyFunc whose key combines the keys of fns, in order, so
// that for example a client is limited per route:
//
//	keyfunc.Join(keyfunc.Route, ip)
//
// The parts are written as netstrings (decimal length, ':', the part, ','),
// so the combination is injective: the parts ("a:b", "c") and ("a", "b:c")
// give different keys. The result is Encode("join", parts), hashed when
// longer than [MaxKeyLength].
//
// Join trusts what its parts trust. If a part fails, Join returns that
// part's error wrapped (so [ErrNoIdentity] stays visible to errors.Is); a
// part that returns an empty key without an error is reported as an error
// that does not wrap ErrNoIdentity. Join panics when it is called with no
// functions or a nil function: that is a programming error found at
// construction, never at request time. The KeyFunc is safe for concurrent
// use if its parts are.
func Join(fns ...KeyFunc) KeyFunc {
	checkFuncs("Join", fns)
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
		return Encode("join", b.String()), nil
	}
}

// First returns a KeyFunc that tries fns in order and returns the key of the
// first one that finds an identity, for example the JWT subject, else the
// client IP:
//
//	keyfunc.First(jwtKey, ip)
//
// A function that fails with an error wrapping [ErrNoIdentity] is skipped;
// any other error (a malformed request) is returned at once. When every
// function reports no identity, First returns their errors joined, which
// still wrap ErrNoIdentity. Keys are returned unchanged: the key functions
// of this package use disjoint namespaces, so keys from different functions
// cannot collide. First panics when it is called with no functions or a nil
// function (at construction, never at request time). The KeyFunc is safe
// for concurrent use if its parts are.
func First(fns ...KeyFunc) KeyFunc {
	checkFuncs("First", fns)
	fns = slices.Clone(fns)
	return func(r *http.Request) (string, error) {
		var errs []error
		for i, fn := range fns {
			k, err := fn(r)
			if err == nil {
				if k == "" {
					return "", fmt.Errorf("keyfunc: first part %d: %w", i, errEmptyKey)
				}
				return k, nil
			}
			if !errors.Is(err, ErrNoIdentity) {
				return "", err
			}
			errs = append(errs, err)
		}
		return "", errors.Join(errs...)
	}
}

func checkFuncs(name string, fns []KeyFunc) {
	if len(fns) == 0 {
		panic("keyfunc: " + name + " needs at least one key function")
	}
	for i, fn := range fns {
		if fn == nil {
			panic("keyfunc: " + name + ": key function " + strconv.Itoa(i) + " is nil")
		}
	}
}

// FromContext returns a KeyFunc that reads an identity that the
// application's own authentication middleware stored in the request context
// under ctxKey (with context.WithValue). The value must be a non-empty
// string, or of a type whose underlying type is string; the key is
// Encode("ctx", value).
//
// It trusts the application's middleware completely, and must run after it:
// the limiter must wrap the handler that the authentication middleware
// calls. It fails with an error wrapping [ErrNoIdentity] when the context
// holds no value or an empty one, and with an error that does not wrap it
// when the value has another type (a programming error that should be
// loud). FromContext returns an error when ctxKey is nil or not comparable,
// as context.WithValue would panic on such a key. The KeyFunc is safe for
// concurrent use.
func FromContext(ctxKey any) (KeyFunc, error) {
	if ctxKey == nil {
		return nil, errors.New("keyfunc: FromContext: ctxKey is nil")
	}
	if !reflect.TypeOf(ctxKey).Comparable() {
		return nil, fmt.Errorf("keyfunc: FromContext: ctxKey of type %T is not comparable", ctxKey)
	}
	return func(r *http.Request) (string, error) {
		v := r.Context().Value(ctxKey)
		if v == nil {
			return "", fmt.Errorf("keyfunc: no identity in request context: %w", ErrNoIdentity)
		}
		rv := reflect.ValueOf(v)
		if rv.Kind() != reflect.String {
			return "", fmt.Errorf("keyfunc: identity in request context has type %T, want a string", v)
		}
		s := rv.String()
		if s == "" {
			return "", fmt.Errorf("keyfunc: empty identity in request context: %w", ErrNoIdentity)
		}
		return Encode("ctx", s), nil
	}, nil
}

// FromContextFunc is like [FromContext] with a lookup function instead of a
// context key: fn returns the identity stored in ctx and whether there is
// one. A false result or an empty identity fails with an error wrapping
// [ErrNoIdentity]; the key is Encode("ctx", identity). It trusts whatever
// fn finds: put there only identities your own authentication middleware
// verified, never request data. It returns an error when fn is nil. The
// KeyFunc is safe for concurrent use if fn is.
func FromContextFunc(fn func(ctx context.Context) (identity string, ok bool)) (KeyFunc, error) {
	if fn == nil {
		return nil, errors.New("keyfunc: FromContextFunc: fn is nil")
	}
	return func(r *http.Request) (string, error) {
		s, ok := fn(r.Context())
		if !ok || s == "" {
			return "", fmt.Errorf("keyfunc: no identity in request context: %w", ErrNoIdentity)
		}
		return Encode("ctx", s), nil
	}, nil
}
