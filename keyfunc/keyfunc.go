package keyfunc

import (
	"errors"
	"net/http"
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
