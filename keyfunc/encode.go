package keyfunc

import (
	"crypto/sha256"
	"encoding/base64"
	"io"
	"strconv"
	"strings"
)

// MaxKeyLength is the largest key, in bytes, that the key functions of this
// package return. Longer keys are replaced by a digest (see [Encode]).
const MaxKeyLength = 256

// maxNamespaceLength bounds the escaped namespace that [Encode] keeps in
// front of a digest.
const maxNamespaceLength = 32

// digestLength is the number of bytes of SHA-256 kept in a digest: 18 bytes
// are 144 bits, 24 characters of unpadded base64url.
const digestLength = 18

// Encode builds a key from a namespace and a value: the escaped namespace,
// a colon, and the escaped value, for example Encode("sub", "alice") is
// "sub:alice". Every key function of this package that carries text from a
// request or a token builds its key with Encode.
//
// Escaping: every byte outside the printable ASCII range (0x21 to 0x7E, so
// spaces, control bytes, NUL and every byte of a multi-byte UTF-8 sequence),
// and the bytes '%', '#', '{' and '}', become %XX with upper-case hex digits.
// In the namespace ':' is escaped too. Values are compared as exact bytes:
// no Unicode normalization is applied, so the NFC and NFD spellings of one
// name are two different keys, as they are two different strings to a
// token issuer or an API-key database.
//
// Bounds: when the escaped key would be longer than [MaxKeyLength], or the
// escaped namespace longer than 32 bytes, the value (and then the namespace
// as well) is replaced by '#' and 24 base64url characters of the SHA-256
// digest of both, for example "sub:#3q2-7w...". Escaped text never contains
// a bare '#', so digests and escaped values cannot be confused.
//
// Encode is injective: two different (namespace, value) pairs give two
// different keys (for digests, short of a SHA-256 collision on 144 bits).
// Keys never contain '{', '}', NUL, whitespace or bytes above 0x7E; callers
// need not escape them again to print or log them, although logs should
// still redact keys that identify people. Encode is safe for concurrent use.
func Encode(namespace, value string) string {
	nsLen := escapedLen(namespace, true)
	valLen := escapedLen(value, false)
	if nsLen <= maxNamespaceLength && nsLen+1+valLen <= MaxKeyLength {
		var b strings.Builder
		b.Grow(nsLen + 1 + valLen)
		appendEscaped(&b, namespace, true)
		b.WriteByte(':')
		appendEscaped(&b, value, false)
		return b.String()
	}
	d := digest(namespace, value)
	if nsLen <= maxNamespaceLength {
		var b strings.Builder
		b.Grow(nsLen + 2 + len(d))
		appendEscaped(&b, namespace, true)
		b.WriteString(":#")
		b.WriteString(d)
		return b.String()
	}
	return "#" + d
}

// mustEscape reports whether byte c is written as %XX.
func mustEscape(c byte, namespace bool) bool {
	switch {
	case c <= 0x20 || c >= 0x7f:
		return true
	case c == '%' || c == '#' || c == '{' || c == '}':
		return true
	case c == ':':
		return namespace
	}
	return false
}

func escapedLen(s string, namespace bool) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if mustEscape(s[i], namespace) {
			n += 2
		}
	}
	return n
}

const upperHex = "0123456789ABCDEF"

func appendEscaped(b *strings.Builder, s string, namespace bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if mustEscape(c, namespace) {
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&0x0f])
			continue
		}
		b.WriteByte(c)
	}
}

// digest hashes an unambiguous encoding of namespace and value: the
// namespace is length-prefixed, so no two pairs share an input.
func digest(namespace, value string) string {
	h := sha256.New()
	_, _ = io.WriteString(h, strconv.Itoa(len(namespace)))
	_, _ = io.WriteString(h, ":")
	_, _ = io.WriteString(h, namespace)
	_, _ = io.WriteString(h, value)
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0])[:digestLength])
}
