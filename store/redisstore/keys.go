package redisstore

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"unsafe"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// maxEncodedLen is the longest escaped form [encodeKey] returns; longer
// ones are replaced by a hash.
const maxEncodedLen = 128

// hashedLen is the length of a hashed encoding: '~' and 43 base64url bytes.
const hashedLen = 1 + 43

// safe marks the bytes [encodeKey] copies unchanged: printable ASCII except
// the hash tag braces, the key separator ':', the escape '%', the hash
// marker '~' and the glob metacharacters * ? [ ] \ (so that SCAN MATCH
// patterns over encoded keys stay literal).
var safe = func() (t [256]bool) {
	for c := 0x21; c <= 0x7e; c++ {
		t[c] = true
	}
	for _, c := range []byte("{}:%~*?[]\\") {
		t[c] = false
	}
	return t
}()

const hexDigits = "0123456789ABCDEF"

// encodeKey returns a form of s that is safe inside a Redis key built by
// this package: bytes outside printable ASCII and the characters
// { } : % ~ * ? [ ] \ are written as %XX (upper-case hex). When that form is
// longer than [maxEncodedLen] bytes, the result is '~' followed by the
// unpadded base64url SHA-256 of s (44 bytes).
//
// The encoding is injective: distinct inputs give distinct outputs (for the
// hashed form, barring a SHA-256 collision), since '~' never starts an
// escaped form. Outputs never contain '{', '}' or ':', so they cannot move a
// Redis Cluster hash tag or forge a separator. Keys themselves may carry
// personal data (IP addresses, user IDs) and stay readable in Redis unless
// they are hashed; hash them before they reach the store when that matters.
// encodeKey is safe for concurrent use.
func encodeKey(s string) string {
	switch n := encodedLen(s); {
	case n > maxEncodedLen:
		return hashKey(s)
	case n == len(s):
		return s
	default:
		return string(appendEscaped(make([]byte, 0, n), s))
	}
}

// encodedLen returns the length of the escaped form of s.
func encodedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if !safe[s[i]] {
			n += 2
		}
	}
	return n
}

// appendEscaped appends the escaped form of s to b.
func appendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if safe[c] {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hexDigits[c>>4], hexDigits[c&0xf])
	}
	return b
}

// keyOf returns keyBase(prefix, encodeKey(key)) + suffix in one
// allocation: a request's state key (or, with an empty suffix, its base)
// without the intermediate strings.
func keyOf(prefix, key, suffix string) string {
	n := encodedLen(key)
	if n > maxEncodedLen {
		return keyBase(prefix, hashKey(key)) + suffix
	}
	b := make([]byte, 0, len(prefix)+len(":{}:")+n+len(suffix))
	b = append(b, prefix...)
	b = append(b, ":{"...)
	b = appendEscaped(b, key)
	b = append(b, "}:"...)
	b = append(b, suffix...)
	// b is never written again: the string is its only reference.
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// hashKey returns '~' and the base64url SHA-256 of s.
func hashKey(s string) string {
	sum := sha256.Sum256([]byte(s))
	var b [hashedLen]byte
	b[0] = '~'
	base64.RawURLEncoding.Encode(b[1:], sum[:])
	return string(b[:])
}

// Key part naming the kind of state. The algorithm is part of the key so
// that changing a limit's algorithm under the same name starts from fresh
// state instead of misreading (or failing on) the old one.
const (
	tagGCRA    = "g"
	tagBucket  = "t"
	tagLog     = "l"
	tagCounter = "c"
	tagFixed   = "f"
	tagSupp    = "s"
	tagOp      = "op"
	// Per request key, shared by all its limits.
	tagBlock   = "block"
	tagStrikes = "strikes"
	tagDedup   = "dedup"
	// The key's override (store.Override).
	tagOverride = "o"
)

var algorithmTags = [...]string{
	store.GCRA:                 tagGCRA,
	store.TokenBucket:          tagBucket,
	store.SlidingWindowLog:     tagLog,
	store.SlidingWindowCounter: tagCounter,
	store.FixedWindow:          tagFixed,
	contract.Suppressed:        tagSupp,
}

// keyBase returns "<prefix>:{<encoded key>}:", the start of every key of
// one request. The braces make the encoded key the Redis Cluster hash tag.
func keyBase(prefix, encodedKey string) string {
	return prefix + ":{" + encodedKey + "}:"
}

// limitKey returns a limit's part of its state key, a function of its ID
// alone: the encoded ID, or, for the ID a limit gets by default
// ("<algorithm>/<period>", whose algorithm the key's tag already names),
// '~' and the period (for a calendar limit, '~' and the calendar). No encoded ID has that form: escaped forms never
// contain '~', and hashed ones are 44 bytes long.
func limitKey(l store.Limit) string {
	if l.Calendar != "" && (l.Name == "" || l.Name == l.Algorithm.String()+"/"+l.Calendar) {
		return "~" + l.Calendar
	}
	if l.Name == "" || l.Name == l.Algorithm.String()+"/"+l.Period.String() {
		return "~" + l.Period.String()
	}
	return encodeKey(l.Name)
}

// appendKeyKeys appends the keys of the request key's own state, shared by
// every limit: its block, strike counter and de-duplication hash.
func appendKeyKeys(keys []string, base string) []string {
	return append(keys, base+tagBlock, base+tagStrikes, base+tagDedup)
}

// maxDedupIDLen is the longest [store.Request.DedupID] stored as given;
// longer ids are replaced by their SHA-256.
const maxDedupIDLen = 128

// dedupField returns the de-duplication hash field of id: '=' and id, or
// for ids longer than maxDedupIDLen bytes '~' and the base64url SHA-256
// of id. The marks keep the two forms, and the hash's bookkeeping field
// "#", apart.
func dedupField(id string) string {
	if len(id) > maxDedupIDLen {
		return hashKey(id)
	}
	return "=" + id
}

// appendStateKeys appends the state keys of limits (all of one algorithm,
// as validated) to keys: one per limit, or the one sliding window log.
func appendStateKeys(keys []string, base string, limits []store.Limit) []string {
	alg := limits[0].Algorithm
	if alg == store.SlidingWindowLog {
		return append(keys, base+tagLog+":"+logSuffix(limits))
	}
	tag := algorithmTags[alg]
	for _, l := range limits {
		keys = append(keys, base+tag+":"+limitKey(l))
	}
	return keys
}

// logSuffix names the sorted set of a sliding window log request: the
// encoded limit IDs, sorted, joined by ':'. Requests with the same set of
// limits share one log; a different set (say, a policy with a longer
// period) gets its own, so that pruning to one request's longest period
// never drops units another request still counts. A suffix longer than
// maxEncodedLen is hashed and marked "~~", which no other suffix starts
// with.
func logSuffix(limits []store.Limit) string {
	if len(limits) == 1 {
		return limitKey(limits[0])
	}
	var buf [store.MaxLimits]string
	ids := buf[:0]
	for _, l := range limits {
		id := limitKey(l)
		i := len(ids)
		ids = append(ids, id)
		for ; i > 0 && ids[i-1] > id; i-- {
			ids[i] = ids[i-1]
		}
		ids[i] = id
	}
	s := strings.Join(ids, ":")
	if len(s) <= maxEncodedLen {
		return s
	}
	return "~" + hashKey(s)
}
