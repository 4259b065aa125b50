package middleware

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// Canonical names of the headers the limiter writes (see package headers
// for their meaning).
const (
	hdrLimit      = "X-Ratelimit-Limit"
	hdrRemaining  = "X-Ratelimit-Remaining"
	hdrReset      = "X-Ratelimit-Reset"
	hdrRetryAfter = "Retry-After"
	hdrBucket     = "X-Ratelimit-Bucket"
	hdrTier       = "X-Ratelimit-Tier"
	hdrRateLimit  = "Ratelimit"
	hdrPolicy     = "Ratelimit-Policy"
	hdrSuppress   = "X-Ratelimit-Suppression"
)

// hdrBuf holds the values of one response's headers. Numbers are formatted
// into buf and the header map refers to them there, so writing the headers
// of an admitted request allocates nothing beyond the request's state,
// which embeds an hdrBuf. A hdrBuf is written once and never reused: the
// strings it hands out must not change.
type hdrBuf struct {
	vals [3]string
	nv   int
	buf  [48]byte
	nb   int
}

// num returns a one-element header value holding v in decimal.
func (b *hdrBuf) num(v int64) []string {
	var digits [20]byte
	return b.value(strconv.AppendInt(digits[:0], v, 10))
}

// value returns a one-element header value holding a copy of p, kept in b
// when there is room.
func (b *hdrBuf) value(p []byte) []string {
	if b.nv == len(b.vals) || len(b.buf)-b.nb < len(p) || len(p) == 0 {
		return []string{string(p)}
	}
	n := copy(b.buf[b.nb:], p)
	// The bytes live in the heap-allocated hdrBuf and are never written
	// again, which is what a string needs.
	b.vals[b.nv] = unsafe.String(&b.buf[b.nb], n)
	b.nb += n
	b.nv++
	return b.vals[b.nv-1 : b.nv : b.nv]
}

// writeHeaders sets the rate-limit headers for d on h; retry adds
// Retry-After, which every refusal carries whatever the Writer says.
func (q *quota) writeHeaders(h http.Header, d *Decision, b *hdrBuf, retry bool) {
	if retry {
		h[hdrRetryAfter] = b.num(retryAfterSeconds(d.RetryAfter))
	}
	w := q.hdr
	if w.Omit || d.set == nil {
		return
	}
	set := d.set
	if !w.NoLegacy {
		if i := d.Index; i >= 0 && i < len(set.limitHdr) && set.limits[i].Capacity() == d.Limit {
			h[hdrLimit] = set.limitHdr[i]
		} else {
			h[hdrLimit] = b.num(d.Limit)
		}
		h[hdrRemaining] = b.num(max(d.Remaining, 0))
		if w.ResetDelta {
			h[hdrReset] = b.num(ceilSeconds(resetAfter(&d.Decision)))
		} else {
			h[hdrReset] = b.num(ceilSeconds(time.Duration(d.Reset.UnixNano())))
		}
	}
	if w.IETF {
		var stack [192]byte
		h[hdrPolicy] = set.policyHdr
		h[hdrRateLimit] = b.value(set.appendRateLimit(stack[:0], d))
	}
	if set.suppressed {
		var digits [24]byte
		h[hdrSuppress] = b.value(strconv.AppendFloat(digits[:0], d.Suppression, 'f', -1, 64))
	}
	if w.Bucket {
		h[hdrBucket] = d.t.bucketHdr
		if d.t.tierHdr != nil {
			h[hdrTier] = d.t.tierHdr
		}
	}
}

// appendRateLimit appends the RateLimit field to b: one item per limit, r
// the units remaining and t the seconds until the limit is full again; for
// the deciding limit of a refusal t is the wait before a retry, equal to
// Retry-After.
func (s *limitSet) appendRateLimit(b []byte, d *Decision) []byte {
	for i, name := range s.quoted {
		rem, reset := d.Remaining, d.ResetAfter
		if d.PerLimit != nil && i < len(d.PerLimit) {
			rem, reset = d.PerLimit[i].Remaining, d.PerLimit[i].ResetAfter
		} else if len(s.quoted) > 1 && i != d.Index {
			continue // no per-limit state: report the deciding limit only
		}
		if !d.Allowed && (i == d.Index || d.Blocked) {
			reset = d.RetryAfter
			if d.Blocked {
				rem = 0
			}
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = append(b, name...)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, max(rem, 0), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, ceilSeconds(reset), 10)
	}
	return b
}

// retryAfterSeconds converts a retry duration to the whole seconds sent in
// Retry-After: rounded up, and at least 1 so that clients never retry in a
// tight loop.
func retryAfterSeconds(d time.Duration) int64 {
	return max(ceilSeconds(d), 1)
}

// ceilSeconds rounds d up to whole seconds; negative durations give 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

var errUnprintable = errors.New("ratekeeper: middleware: IETF item names must be printable ASCII")

// quoteSFString renders s as an RFC 9651 sf-string.
func quoteSFString(s string) (string, error) {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("%w: %q", errUnprintable, s)
		}
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String(), nil
}
