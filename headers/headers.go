package headers

import (
	"net/http"
	"strconv"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// Canonical header names written by this package.
const (
	// Limit is X-RateLimit-Limit: the deciding limit's capacity.
	Limit = "X-Ratelimit-Limit"
	// Remaining is X-RateLimit-Remaining: units left.
	Remaining = "X-Ratelimit-Remaining"
	// Reset is X-RateLimit-Reset: epoch (or delta) seconds until full.
	Reset = "X-Ratelimit-Reset"
	// RetryAfter is Retry-After, sent on refusals.
	RetryAfter = "Retry-After"
)

// ResetMode chooses how X-RateLimit-Reset is expressed.
type ResetMode int

const (
	// ResetEpoch writes Unix epoch seconds, rounded up. The default.
	ResetEpoch ResetMode = iota
	// ResetDelta writes seconds from now, rounded up.
	ResetDelta
)

// Writer writes rate-limit headers. The zero value writes the default
// X-RateLimit-* set with epoch resets. A Writer is immutable and safe for
// concurrent use.
type Writer struct {
	// Reset chooses epoch (default) or delta seconds for X-RateLimit-Reset.
	Reset ResetMode
	// Omit suppresses every rate-limit header, including Retry-After (useful
	// on login routes, where headers help attackers pace themselves). It
	// governs headers only: a refusal's body still states the wait, as
	// users locked out of a login need to know it.
	Omit bool
	// IETF adds the RateLimit-Policy and RateLimit fields of
	// draft-ietf-httpapi-ratelimit-headers-10 (through [Writer.Compile]).
	IETF bool
	// NoLegacy drops the X-RateLimit-* fields (Retry-After is still sent on
	// refusals); use it with IETF to send the standard fields only.
	NoLegacy bool
}

// Write sets the X-RateLimit-* headers (and Retry-After on refusals) for d
// on h. now is the time the decision was taken, used for epoch resets.
// Existing values of these headers are replaced. The IETF fields need the
// policy's limits: use [Writer.Compile].
func (w Writer) Write(h http.Header, d store.Decision, now time.Time) {
	if w.Omit {
		return
	}
	reset := d.ResetAfter
	if !d.Allowed {
		reset = d.RetryAfter
	}
	var rs int64
	if w.Reset == ResetDelta {
		rs = ceilSeconds(reset)
	} else {
		rs = ceilSeconds(time.Duration(now.UnixNano()) + reset)
	}
	// One backing array for all values: one allocation instead of four.
	vals := make([]string, 4)
	vals[0] = strconv.FormatInt(d.Limit, 10)
	vals[1] = strconv.FormatInt(max(d.Remaining, 0), 10)
	vals[2] = strconv.FormatInt(rs, 10)
	h[Limit] = vals[0:1:1]
	h[Remaining] = vals[1:2:2]
	h[Reset] = vals[2:3:3]
	if !d.Allowed {
		vals[3] = strconv.FormatInt(RetryAfterSeconds(d.RetryAfter), 10)
		h[RetryAfter] = vals[3:4:4]
	}
}

// RetryAfterSeconds converts a retry duration to the whole seconds sent in
// Retry-After: rounded up, and at least 1 so that clients never retry in a
// tight loop.
func RetryAfterSeconds(d time.Duration) int64 {
	return max(ceilSeconds(d), 1)
}

// ceilSeconds rounds d up to whole seconds; negative durations give 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
