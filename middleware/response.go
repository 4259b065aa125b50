package middleware

import (
	"net/http"
	"strconv"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/store"
)

const contentTypeJSON = "application/json"

var (
	hdrContentType = http.CanonicalHeaderKey("Content-Type")
	hdrNoSniff     = http.CanonicalHeaderKey("X-Content-Type-Options")
	hdrCacheCtl    = http.CanonicalHeaderKey("Cache-Control")

	bodyUnauthorized = []byte(`{"error":"unauthorized","message":"A valid credential is required."}` + "\n")
	bodyBadRequest   = []byte(`{"error":"bad_request","message":"The request's client identity could not be determined."}` + "\n")
	bodyUnavailable  = []byte(`{"error":"rate_limiter_unavailable","message":"The service is temporarily unavailable. Try again shortly."}` + "\n")
)

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h[hdrContentType] = []string{contentTypeJSON}
	h[hdrNoSniff] = []string{"nosniff"}
	h[hdrCacheCtl] = []string{"no-store"}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeLimited writes the default 429 response: a JSON body whose message
// states the real wait, e.g.
//
//	{"error":"rate_limit_exceeded","message":"Too many requests. Try again in 17 seconds.",
//	 "retry_after":17,"limit":100,"remaining":0,"reset":1767225600,"policy":"api"}
//
// reset is the epoch second at which the request may be retried, the same
// instant Retry-After names.
func (l *Limiter) writeLimited(w http.ResponseWriter, d store.Decision, now time.Time) {
	writeJSON(w, http.StatusTooManyRequests, l.limitedBody(d, now))
}

func (l *Limiter) limitedBody(d store.Decision, now time.Time) []byte {
	secs := headers.RetryAfterSeconds(d.RetryAfter)
	reset := now.Add(d.RetryAfter)
	resetEpoch := reset.Unix()
	if reset.Nanosecond() != 0 {
		resetEpoch++
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"error":"rate_limit_exceeded","message":"Too many requests. Try again in `...)
	b = strconv.AppendInt(b, secs, 10)
	if secs == 1 {
		b = append(b, ` second."`...)
	} else {
		b = append(b, ` seconds."`...)
	}
	b = append(b, `,"retry_after":`...)
	b = strconv.AppendInt(b, secs, 10)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, d.Limit, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, max(d.Remaining, 0), 10)
	b = append(b, `,"reset":`...)
	b = strconv.AppendInt(b, resetEpoch, 10)
	b = append(b, `,"policy":`...)
	b = append(b, l.nameJSON...)
	b = append(b, "}\n"...)
	return b
}
