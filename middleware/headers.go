package middleware

import (
	"net/http"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/store"
)

// writeHeaders sets the rate-limit headers for d on h, with values held
// in b; retry adds Retry-After, which every refusal carries whatever the
// options say. A decision without limits (an exempt client) gets
// Retry-After alone, when retry is set.
func writeHeaders(h http.Header, d *Decision, b *headers.Buffer, retry bool) {
	var p *headers.Policy
	if d.set != nil {
		p = d.set.fields
	}
	p.Write(h, &d.Decision, d.Reset, b, retry)
}

// resetAfter is the wait X-RateLimit-Reset names: until the deciding limit
// is full again, or for a refusal until the request may be retried.
func resetAfter(d *store.Decision) time.Duration {
	if d.Allowed {
		return d.ResetAfter
	}
	return d.RetryAfter
}

// epochSeconds is t in Unix seconds, rounded up as X-RateLimit-Reset
// rounds it.
func epochSeconds(t time.Time) int64 {
	return (t.UnixNano() + int64(time.Second) - 1) / int64(time.Second)
}
