package middleware

import (
	"net/http"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
)

// writeHeaders sets the rate-limit headers for d on h, with values held
// in b; retry adds Retry-After, which every refusal carries whatever the
// options say. A decision without limits (an exempt client) gets
// Retry-After alone, when retry is set.
func writeHeaders(h http.Header, d *limiter.Decision, b *headers.Buffer, retry bool) {
	d.Headers.Write(h, &d.Decision, d.Reset, b, retry)
}

// epochSeconds is t in Unix seconds, rounded up as X-RateLimit-Reset
// rounds it.
func epochSeconds(t time.Time) int64 {
	return (t.UnixNano() + int64(time.Second) - 1) / int64(time.Second)
}
