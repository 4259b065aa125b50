package keyfunc

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"io"
	"net/http"
	"slices"
	"strings"
)

// defaultMaxHeaderLength bounds the header value read by [Header].
const defaultMaxHeaderLength = 1024

// digestLength is the number of bytes of SHA-256 kept in a digest: 18 bytes
// are 144 bits, 24 characters of unpadded base64url.
const digestLength = 18

// HeaderOptions configures [Header]. The zero value hashes with plain
// SHA-256 and accepts values up to 1024 bytes.
type HeaderOptions struct {
	// Secret, when non-empty, keys the hash: HMAC-SHA256 with this secret
	// instead of SHA-256. Without it, anyone who reads the store's keys can
	// test guessed header values offline; with it they cannot. Use at least
	// 32 random bytes and keep it as secret as the header values. Changing
	// it changes every key (all buckets start afresh).
	Secret []byte

	// MaxLength bounds the header value in bytes. Zero means 1024;
	// negative is an error.
	MaxLength int
}

// Header returns a KeyFunc that keys requests by the value of the header
// name, for example an API key. The identity is not the value but the
// first 24 base64url characters (144 bits) of its SHA-256 or HMAC-SHA256
// digest, so the value itself never reaches the store, the logs or the
// hooks; [middleware.Limiter.Reset] therefore expects that digest too.
//
// It trusts the header as sent by the client, unverified: a client can send
// a made-up value with every request and get a fresh bucket each time, so
// use it for credentials that the application rejects when invalid, and
// keep an IP limit in front of it (a second limiter keyed by [RemoteIP] or
// [ClientIP.Key]). The
// value is compared as exact bytes,
// after surrounding spaces and tabs are removed. It fails with an error
// wrapping [ErrNoIdentity] when the header is absent or empty, appears more
// than once, or is longer than MaxLength. Header returns an error when name
// is not a valid header name or MaxLength is negative. The KeyFunc is safe
// for concurrent use.
//
// [middleware.Limiter.Reset]: https://pkg.go.dev/github.com/ratekeeper/ratekeeper/middleware#Limiter.Reset
func Header(name string, opts HeaderOptions) (KeyFunc, error) {
	if !isToken(name) {
		return nil, fmt.Errorf("keyfunc: Header: %q is not a valid header name", name)
	}
	maxLen := opts.MaxLength
	switch {
	case maxLen < 0:
		return nil, fmt.Errorf("keyfunc: HeaderOptions.MaxLength is %d, want >= 0", maxLen)
	case maxLen == 0:
		maxLen = defaultMaxHeaderLength
	}
	canon := http.CanonicalHeaderKey(name)
	secret := slices.Clone(opts.Secret)
	newHash := func() hash.Hash {
		if len(secret) > 0 {
			return hmac.New(sha256.New, secret)
		}
		return sha256.New()
	}
	return func(r *http.Request) (string, error) {
		values := r.Header.Values(canon)
		if len(values) > 1 {
			return "", fmt.Errorf("keyfunc: %s header appears %d times: %w", canon, len(values), ErrNoIdentity)
		}
		var v string
		if len(values) == 1 {
			v = strings.Trim(values[0], " \t")
		}
		switch {
		case v == "":
			return "", fmt.Errorf("keyfunc: no %s header: %w", canon, ErrNoIdentity)
		case len(v) > maxLen:
			return "", fmt.Errorf("keyfunc: %s header of %d bytes exceeds %d: %w", canon, len(v), maxLen, ErrNoIdentity)
		}
		h := newHash()
		_, _ = io.WriteString(h, v)
		var sum [sha256.Size]byte
		return base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0])[:digestLength]), nil
	}, nil
}
